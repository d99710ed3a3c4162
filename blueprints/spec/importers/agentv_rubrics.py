"""AgentV rubric items (a test's ``rubrics``, ``type: rubrics`` criteria, an ``llm_judge``'s rubrics, plain strings
among assertions) -> judged points, reporting through the reader's ``Notes``.

An item is text or ``{id, outcome, weight, required, required_min_score, score_ranges, operator}``; with
``score_ranges`` it needs no ``outcome`` (the bands say what is checked). docs/importing.md has the mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..bands import read_score_ranges, uncovered
from ..notes import Notes, choice_hint
from ..schema import Point
from .common import TestReport, is_number, judged_point, short

PASS_MARK = 0.8
RUBRIC_OPERATORS = ("correctness", "contradiction")
CONTRADICTION_GUARD = ("The response makes no claim that contradicts the following (it need not mention it): {}")
ITEM_KEYS = ("id", "outcome", "weight", "required", "required_min_score", "score_ranges", "description", "criteria",
             "operator")
_BAD = object()  # a setting that was wrong (an error is reported): the item is left out


@dataclass(frozen=True)
class RubricItem:
    text: str
    weight: float  # its weight inside its evaluator
    minimum: float | None
    bands: object
    label: str
    container: list  # where it is written, for its origin
    index: int
    path: tuple


def rubric_items(notes: Notes, value: list, path: tuple, rep: TestReport) -> list[RubricItem]:
    """The items of a rubric list that read; each that does not is an error at its place."""
    items = []
    for index, rubric in enumerate(value):
        item = read_item(notes, rubric, value, index, (*path, index), rep)
        if item is not None:
            items.append(item)
    return items


def judged_points(items: list[RubricItem], origin, *, weight: float, check_id: str, negate: bool) -> list[Point]:
    """One judged point per item, the items' weights normalised inside ``weight``."""
    total = sum(i.weight for i in items)
    return [judged_point(i.text, weight=weight * (i.weight / total) if total > 0 else 0.0,
                         origin=origin(i.container, i.index, i.path), check_id=check_id, inverted=negate,
                         label=i.label, min_score=i.minimum, score_ranges=i.bands) for i in items]


def read_item(notes: Notes, rubric, value, index, ipath, rep: TestReport) -> RubricItem | None:
    if isinstance(rubric, str):
        if not rubric.strip():
            notes.error("a rubric cannot be empty", value, index, ipath, code="rubrics")
            return None
        return RubricItem(rubric.strip(), 1.0, None, None, f"rubric-{index + 1}", value, index, ipath)
    if not isinstance(rubric, dict):
        notes.error("a rubric item is text or `{id, outcome, weight, required, score_ranges}`", value, index, ipath,
                    code="rubrics")
        return None
    for k in rubric:
        if k not in ITEM_KEYS:
            notes.warn(f"unknown key `{k}` in a rubric item; it is ignored", rubric, k, (*ipath, k),
                       code="unknown-key", at_key=True)
    text = item_text(notes, rubric, index, ipath)
    if text is None:
        return None
    inner = rubric.get("weight", 1.0)
    if not is_number(inner) or not math.isfinite(inner) or inner < 0:
        notes.error(f"`weight` must be a finite number >= 0, not {short(inner)}", rubric, "weight",
                    (*ipath, "weight"), code="weight")
        return None
    bands = item_bands(notes, rubric, ipath, rep)
    minimum = _BAD if bands is _BAD else item_minimum(notes, rubric, bands, ipath, rep)
    if minimum is _BAD:
        return None
    label = rubric.get("id") if isinstance(rubric.get("id"), str) else f"rubric-{index + 1}"
    text = rubric_operator(notes, rubric, text.strip(), ipath, rep)
    return RubricItem(text, float(inner), minimum, bands, label, value, index, ipath)


def item_text(notes: Notes, rubric: dict, index, ipath) -> str | None:
    """What the item checks: its ``outcome`` (or ``description``/``criteria``); with ``score_ranges`` and none of
    them, its id (upstream makes ``outcome`` optional there)."""
    text = rubric.get("outcome", rubric.get("description", rubric.get("criteria")))
    if (not isinstance(text, str) or not text.strip()) and isinstance(rubric.get("score_ranges"), (list, dict)):
        text = str(rubric.get("id") or f"rubric {index + 1}")
    if not isinstance(text, str) or not text.strip():
        notes.error("a rubric item needs `outcome:` (what it checks)", rubric, None, ipath,
                    "add `outcome: ...`, or `score_ranges:` whose bands say what is checked", "rubrics")
        return None
    return text


def item_bands(notes: Notes, rubric: dict, ipath, rep: TestReport):
    """The item's 0-10 ``score_ranges`` bands (None without them; ``_BAD`` when they do not read)."""
    if rubric.get("score_ranges") is None:
        return None
    bands, problems = read_score_ranges(rubric["score_ranges"])
    for message, _, hint in problems:
        notes.error(message, rubric, "score_ranges", (*ipath, "score_ranges"), hint, "score-ranges")
    if problems:
        return _BAD
    if uncovered(bands):
        notes.warn("the score bands leave scores " + ", ".join(map(str, uncovered(bands))) + " without a description",
                   rubric, "score_ranges", (*ipath, "score_ranges"), code="score-ranges")
    rep.map("score_ranges (0-10 bands)")
    return bands


def item_minimum(notes: Notes, rubric: dict, bands, ipath, rep: TestReport):
    """The minimum a required item sets on its point (None when not required; ``_BAD`` when wrongly written)."""
    minimum = None
    required = rubric.get("required")
    if rubric.get("required_min_score") is not None:
        n = rubric["required_min_score"]
        if not (isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 10):
            notes.error("`required_min_score` must be a whole number from 0 to 10", rubric, "required_min_score",
                        (*ipath, "required_min_score"), code="rubrics")
            return _BAD
        minimum = n / 10
    elif required is True:
        minimum = 1.0 if bands else PASS_MARK
    elif required is not None and required is not False:
        notes.error("a rubric item's `required` is true or false", rubric, "required", (*ipath, "required"),
                    "use `required_min_score: 7` for a minimum on a 0-10 band", "rubrics")
        return _BAD
    if minimum is not None:
        rep.approx("required rubric item", "fails the verdict when missed; the score is not zeroed "
                                           "(AgentV's rubric-level required)")
    return minimum


def rubric_operator(notes: Notes, rubric: dict, text: str, path, rep: TestReport) -> str:
    """AgentV 4's rubric ``operator``: ``correctness`` (the answer must support the outcome: how every point
    is judged) or ``contradiction`` (the answer must only not contradict it), stated in the point's text.
    Another value is ignored with a warning, as AgentV ignores it."""
    operator = rubric.get("operator")
    if operator is None or operator == "correctness":
        return text
    if operator != "contradiction":
        notes.warn(f"a rubric `operator` is correctness or contradiction, not {short(operator)}; it is ignored",
                   rubric, "operator", (*path, "operator"), choice_hint(operator, RUBRIC_OPERATORS), "rubrics")
        return text
    rep.approx("rubric operator contradiction", "the point asks that the response make no claim contradicting "
                                                "the outcome (it need not mention it)")
    return CONTRADICTION_GUARD.format(text)
