"""Reviewing a run: a reviewer's override, and the shapes the result pages show.

``apply_override`` sets, changes or removes a reviewer's score for a point and
recomputes what depends on it. ``review_response`` groups a response's points as
the score groups them and says what part each group plays; ``heatmap_rows``,
``compare_runs`` and ``text_diff`` feed the heatmap, the run-to-run comparison
and its diff, each reading only the rows its page shows.

Overrides: the judges' verdict is never touched. The response's ``score`` (overrides
applied) is recomputed with the same function the exports use, its
``violated_should_not`` flag follows the effective scores, and a finished run's
stored aggregates are recomputed so every page and export agrees.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

from django.db import transaction

from runs.engine import calls as calls_log
from runs.engine.scoring import ScoredPoint, calculate, group_kind, round2

from .models import Annotation, PointAssessment, PointOverride, Response, Run
from .records import assessment_fields, assessment_of
from .records import compute_aggregates


class OverrideRefused(Exception):
    """The override cannot be applied; the message says why in words a reviewer can act on."""


@dataclass(frozen=True)
class OverrideOutcome:
    response: Response
    assessment: PointAssessment
    before: float | None  # the response's score before this change
    after: float | None


def apply_override(assessment: PointAssessment, score: float | None, *, reason: str = "",
                   who: str = "") -> OverrideOutcome:
    """Set the reviewer's ``score`` (0..1) for a point with a ``reason``; ``score=None`` removes the override.

    Raises OverrideRefused for a score outside 0..1, a missing reason, or a
    response that is not finished (its points may still be replaced).
    """
    if score is not None:
        if not 0 <= score <= 1:
            raise OverrideRefused("A score is between 0 and 1.")
        if not reason.strip():
            raise OverrideRefused("Say why: the reason stays beside the judges' verdict.")
    with transaction.atomic():
        response = Response.objects.select_for_update().select_related("run").get(pk=assessment.response_id)
        if response.status not in ("done", "failed"):
            raise OverrideRefused("This response is still being worked on; override it when it is finished.")
        before = response.score
        if score is None:
            PointOverride.objects.filter(assessment_id=assessment.pk).delete()
        else:
            PointOverride.objects.update_or_create(
                assessment_id=assessment.pk, defaults={"score": score, "reason": reason.strip(), "who": who.strip()})
        points = list(PointAssessment.objects.filter(response=response).select_related("override")
                      .order_by("position"))
        if points and response.score_basis != "similarity":
            # The engine works the score out again, gates and verdicts (docs/scoring.md section 7) included.
            assessed = assessment_of(response, points, response.run.prompt(response.prompt_index))
            fields = assessment_fields(assessed)
            for name, value in fields.items():
                setattr(response, name, value)
            response.save(update_fields=sorted(fields))
        run = response.run
        if run.is_finished:
            Run.objects.filter(pk=run.pk).update(aggregates=compute_aggregates(run.pk, agreement=(run.aggregates or {}).get("agreement")))
    assessment = next(pa for pa in points if pa.pk == assessment.pk)
    return OverrideOutcome(response=response, assessment=assessment, before=before, after=response.score)


# --- what the response page shows ----------------------------------------------------------


@dataclass
class PointView:
    """One point as the response page shows it."""

    pa: PointAssessment
    number: int  # 1-based, in authored order

    @property
    def override(self) -> PointOverride | None:
        return getattr(self.pa, "override", None)

    @property
    def score(self) -> float | None:
        return self.pa.effective_score

    @property
    def evaluated(self) -> bool:
        return self.score is not None

    @property
    def verdicts(self) -> list[dict]:
        return [{**v, "failed": bool(v.get("error")) or v.get("score") is None} for v in self.pa.verdicts]

    @property
    def answered_judges(self) -> int:
        return sum(1 for v in self.verdicts if not v["failed"])


@dataclass
class GroupView:
    """Required points, one ``should`` path, or one ``should_not`` path, with its part in the score."""

    path_id: str  # "" for the required points
    kind: str  # required, should, should_not
    title: str
    points: list[PointView]
    mean: float | None
    role: str = ""  # counts, best, lost, worst, spared, left-out
    why: str = ""

    @property
    def scored(self) -> list[PointView]:
        return [p for p in self.points if p.evaluated]

    @property
    def formula(self) -> str:
        """The weighted mean written out: (1 x 1.00 + 2 x 0.50) / 3."""
        scored = self.scored
        if not scored:
            return ""
        weights = [p.pa.multiplier if p.pa.multiplier is not None else 1.0 for p in scored]
        terms = " + ".join(f"{w:g} × {p.score:.2f}" for w, p in zip(weights, scored))
        return f"({terms}) / {sum(weights):g}"

    @property
    def counts(self) -> bool:
        return self.role in ("counts", "best", "worst")


@dataclass
class CalculationView:
    groups: list[GroupView]
    parts: list[tuple[str, float]]  # (what, mean) averaged into the score
    left_out: list[str]
    score: float | None  # unrounded
    rounded: float | None
    overridden: bool
    judged_score: float | None


def _title(kind: str, ordinal: int, path_id: str) -> str:
    if kind == "required":
        return "Required points"
    if kind == "should":
        return f"Alternative path {ordinal}"
    return f"Should-not path {ordinal}"


def review_response(response: Response, assessments: list[PointAssessment]) -> CalculationView:
    """Group the points as the score does and say, for each group, what part it plays (DESIGN.md scoring)."""
    calc = calculate(ScoredPoint(score=pa.effective_score, multiplier=pa.multiplier, path_id=pa.path_id or None)
                     for pa in assessments)
    views = {pa.pk: PointView(pa, i + 1) for i, pa in enumerate(assessments)}
    by_path: dict[str, list[PointView]] = {}
    for pa in assessments:
        by_path.setdefault(pa.path_id or "", []).append(views[pa.pk])
    best = calc.best_path.path_id if calc.best_path else None
    worst = calc.worst_not_path.path_id if calc.worst_not_path else None
    groups: list[GroupView] = []
    ordinals = {"should": 0, "should_not": 0}
    scores = {g.path_id or "": g.mean for g in (calc.required, *calc.paths, *calc.not_paths) if g is not None}
    for group in (calc.required, *calc.paths, *calc.not_paths):
        if group is None:
            continue
        path_id = group.path_id or ""
        kind = group_kind(group.path_id)
        if kind != "required":
            ordinals[kind] += 1
        view = GroupView(path_id=path_id, kind=kind, title=_title(kind, ordinals.get(kind, 0), path_id),
                         points=by_path.get(path_id, []), mean=group.mean)
        if group.mean is None:
            view.role, view.why = "left-out", "Left out: none of its points could be evaluated."
        elif kind == "required":
            view.role, view.why = "counts", "Counts: the weighted mean of the required points."
        elif kind == "should":
            if path_id == best:
                view.role = "best"
                view.why = ("Counts: the best path." if len(calc.paths) > 1 else
                            "Counts: the only path with a score.")
            else:
                best_mean = scores.get(best)
                view.role = "lost"
                view.why = (f"Tied with {_title('should', _ordinal(calc.paths, best), best)}, which comes first and "
                            "counts." if best_mean is not None and group.mean == best_mean else
                            f"Does not count: {round2(group.mean):.2f} is below the best path's "
                            f"{round2(best_mean):.2f}.")
        else:
            if path_id == worst:
                view.role = "worst"
                view.why = "Counts: the worst should-not path (meeting any should-not path fails the response)."
            else:
                view.role = "spared"
                worst_mean = scores.get(worst)
                view.why = (f"Does not count: {round2(group.mean):.2f} is above the worst should-not path's "
                            f"{round2(worst_mean):.2f}." if worst_mean is not None and group.mean != worst_mean else
                            "Does not count: another should-not path with the same score comes first.")
        groups.append(view)
    names = {g.path_id: g.title for g in groups}
    parts = [(names.get("" if name == "required" else name, name), mean) for name, mean in calc.parts]
    overridden = any(getattr(pa, "override", None) is not None for pa in assessments)
    return CalculationView(
        groups=groups, parts=parts, left_out=[names.get("" if n == "required" else n, n) for n in calc.left_out],
        score=calc.score, rounded=round2(calc.score) if calc.score is not None else None, overridden=overridden,
        judged_score=response.judged_score,
    )


def _ordinal(paths, path_id) -> int:
    return next((i + 1 for i, g in enumerate(paths) if g.path_id == path_id), 0)


# --- the prompts x models heatmap -----------------------------------------------------------

HEATMAP_PAGE_SIZE = 100
HEATMAP_SORTS = {"order": "Blueprint order", "lowest": "Lowest mean first", "spread": "Most spread first"}


@dataclass
class Cell:
    variant_id: str
    state: str = "pending"  # pending, running, failed, not-evaluated, scored
    score: float | None = None
    response_id: int | None = None  # trial 0, the one the cell links to
    trials: int = 0
    violated_should_not: bool = False
    disagreement: bool = False
    reason: str = ""

    @property
    def bucket(self) -> int | None:
        """One of 11 colour buckets, floor(score x 10), as the upstream's heatmap (10 for a perfect score)."""
        return None if self.score is None else min(10, max(0, int(self.score * 10 + 1e-9)))


@dataclass
class Row:
    index: int
    prompt_id: str
    summary: str
    weight: float | None
    cells: list[Cell]

    @property
    def mean(self) -> float | None:
        scores = [c.score for c in self.cells if c.score is not None]
        return sum(scores) / len(scores) if scores else None


@dataclass
class Column:
    variant_id: str
    rank: int | None
    mean: float | None
    std: float | None


def variant_columns(run: Run) -> list[Column]:
    """Models best first, from the stored aggregates; while a run is going, in id order."""
    stats = (run.aggregates or {}).get("variants") or {}
    if not stats:
        ids = Response.objects.filter(run=run).order_by("variant_id").values_list("variant_id", flat=True).distinct()
        return [Column(v, None, None, None) for v in ids]
    ordered = sorted(stats.items(), key=lambda kv: (kv[1].get("mean") is None, -(kv[1].get("mean") or 0), kv[0]))
    return [Column(v, i + 1 if s.get("mean") is not None else None, s.get("mean"), s.get("std"))
            for i, (v, s) in enumerate(ordered)]


def prompt_summary(prompt) -> str:
    """The prompt's first user message on one line, cut to 90 characters."""
    text = next((m.content for m in prompt.messages if m.role == "user" and m.content), "") or ""
    text = " ".join(text.split())
    return text if len(text) <= 90 else text[:89] + "…"


def prompt_order(run: Run, bp, sort: str) -> list[int]:
    indices = list(range(len(bp.prompts)))
    if sort not in ("lowest", "spread"):
        return indices
    cells = (run.aggregates or {}).get("cells") or {}

    def key(i):
        scores = [s for s in (cells.get(bp.prompts[i].id) or {}).values() if s is not None]
        if not scores:
            return (1, 0.0, i)
        mean = sum(scores) / len(scores)
        if sort == "lowest":
            return (0, mean, i)
        return (0, -(max(scores) - min(scores)), i)

    return sorted(indices, key=key)


def heatmap_rows(run: Run, bp, indices: list[int], columns: list[Column]) -> list[Row]:
    """Rows for these prompt positions: one query over their responses only."""
    wanted = {c.variant_id: n for n, c in enumerate(columns)}
    rows = {i: Row(i, bp.prompts[i].id, prompt_summary(bp.prompts[i]), bp.prompts[i].weight,
                   [Cell(c.variant_id) for c in columns]) for i in indices}
    scores: dict[tuple[int, int], list[float]] = {}
    for r in (Response.objects.filter(run=run, prompt_index__in=indices)
              .order_by("prompt_index", "variant_id", "trial")
              .values_list("pk", "prompt_index", "variant_id", "trial", "status", "score", "violated_should_not",
                           "disagreement", "error", "not_evaluated_reason")):
        pk, index, variant_id, trial, status, score, violated, disagreement, error, reason = r
        column = wanted.get(variant_id)
        if column is None or index not in rows:
            continue
        cell = rows[index].cells[column]
        cell.trials += 1
        if cell.response_id is None or trial == 0:
            cell.response_id = pk
        cell.violated_should_not |= violated
        cell.disagreement |= disagreement
        if score is not None:
            scores.setdefault((index, column), []).append(score)
        elif status in ("failed", "done") and not cell.reason:
            cell.reason = error or reason or ""
        cell.state = _merge_state(cell.state if cell.trials > 1 else None, status, score)
    for (index, column), values in scores.items():
        rows[index].cells[column].score = round2(sum(values) / len(values))
        rows[index].cells[column].state = "scored"
    return [rows[i] for i in indices]


def _merge_state(previous: str | None, status: str, score: float | None) -> str:
    state = ("scored" if score is not None else "failed" if status == "failed" else
             "not-evaluated" if status == "done" else status)
    if previous is None or previous == state:
        return state
    order = ["scored", "running", "pending", "not-evaluated", "failed"]
    return min(previous, state, key=order.index)


# --- two runs of one blueprint --------------------------------------------------------------

COMPARE_PAGE_SIZE = 100


@dataclass
class Change:
    prompt_id: str
    prompt_index: int
    variant_id: str
    before: float | None
    after: float | None
    before_id: int | None
    after_id: int | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return round2(self.after - self.before)


def _cell_scores(run: Run) -> dict[tuple[str, str], tuple[float | None, int, int]]:
    """(prompt id, model variant) -> (mean score over trials, prompt position, trial-0 response id)."""
    cells: dict[tuple[str, str], list] = {}
    for pk, prompt_id, index, variant_id, trial, score in (
            Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial")
            .values_list("pk", "prompt_id", "prompt_index", "variant_id", "trial", "score")):
        entry = cells.setdefault((prompt_id, variant_id), [[], index, pk])
        if score is not None:
            entry[0].append(score)
        if trial == 0:
            entry[2] = pk
    return {key: (round2(sum(s) / len(s)) if s else None, index, pk) for key, (s, index, pk) in cells.items()}


def compare_runs(base: Run, run: Run) -> list[Change]:
    """Per prompt and model variant, ``base`` -> ``run``, largest regression first; unmatched cells last."""
    before, after = _cell_scores(base), _cell_scores(run)
    changes = []
    for key in {**before, **after}:
        b, a = before.get(key), after.get(key)
        changes.append(Change(prompt_id=key[0], prompt_index=(a or b)[1], variant_id=key[1],
                              before=b[0] if b else None, after=a[0] if a else None,
                              before_id=b[2] if b else None, after_id=a[2] if a else None))
    changes.sort(key=lambda c: (c.delta is None, c.delta if c.delta is not None else 0, c.prompt_index,
                                c.variant_id))
    return changes


# --- a word diff of two responses -----------------------------------------------------------

DIFF_MAX_TOKENS = 20_000


@dataclass
class DiffPiece:
    op: str  # equal, insert, delete
    text: str


def text_diff(before: str, after: str) -> list[DiffPiece]:
    """Words and whitespace that stay, go and come; lines when the texts are too long for a word diff."""
    split = re.compile(r"\s+|[^\s\w]|\w+")
    a, b = split.findall(before or ""), split.findall(after or "")
    if len(a) + len(b) > DIFF_MAX_TOKENS:
        a, b = (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pieces: list[DiffPiece] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pieces.append(DiffPiece("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(DiffPiece("delete", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(DiffPiece("insert", "".join(b[j1:j2])))
    return pieces


# --- the calls a response made ---------------------------------------------------------------

_SHOWN_CHARS = calls_log.MAX_BODY_CHARS  # a body shown on the page, as bounded as the stored one


def _pretty(value) -> str:
    """JSON indented for reading; text that is not JSON as it came."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value[:_SHOWN_CHARS]
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "\n…"


def call_views(calls: list[dict]) -> list[dict]:
    """The stored call log as the calls page shows it: one entry per call, in the order they were made."""
    out = []
    for call in calls:
        if "dropped" in call or "unreadable" in call:
            out.append({"note": call.get("unreadable") or f"{call['dropped']} more calls were made and not kept "
                                                           f"(at most {calls_log.MAX_CALLS} per response are kept)"})
            continue
        request = call.get("request")
        messages = request.get("messages") if isinstance(request, dict) else None
        params = ({k: v for k, v in request.items() if k not in ("messages", "contents", "system")}
                  if isinstance(request, dict) else None)
        out.append({
            "purpose": call.get("purpose") or "candidate", "label": call.get("label") or "",
            "model": call.get("model") or "", "url": call.get("url") or "", "source": call.get("source") or "",
            "status": call.get("status"), "error": call.get("error"), "latency_ms": call.get("latency_ms"),
            "input_tokens": call.get("input_tokens"), "output_tokens": call.get("output_tokens"),
            "cost_usd": call.get("cost_usd"), "cached": bool(call.get("cached")),
            "finish_reason": call.get("finish_reason"),
            "retries": [a for a in call.get("attempts") or () if a.get("reason")],
            "messages": messages if isinstance(messages, list) else None,
            "params": _pretty(params) if params else "",
            "request": _pretty(request) if request is not None else "",
            "answer": _pretty(call.get("answer")) if call.get("answer") is not None else "",
        })
    return out


# --- a reviewer's annotation ------------------------------------------------------------------


class AnnotationRefused(Exception):
    """The annotation cannot be saved; the message names the field and the fix."""


def save_annotation(response: Response, *, thumbs: str, comment: str, who: str = "") -> Annotation | None:
    """Set a response's thumbs ("up", "down" or "" for none) and comment; with neither, the annotation goes."""
    from django.utils import timezone

    value = {**{word: n for n, word in Annotation.WORDS.items()}, "": None}.get((thumbs or "").strip().lower(), "bad")
    if value == "bad":
        raise AnnotationRefused(f"thumbs must be up, down or empty, not {thumbs[:20]!r}")
    comment = (comment or "").replace("\r\n", "\n").strip()
    if len(comment) > Annotation.MAX_COMMENT_CHARS:
        raise AnnotationRefused(f"the comment has {len(comment):,} characters; keep it under "
                                f"{Annotation.MAX_COMMENT_CHARS:,} (link to a longer note instead)")
    who = (who or "").strip()[:150]
    if value is None and not comment:
        Annotation.objects.filter(response=response).delete()
        return None
    annotation, _ = Annotation.objects.update_or_create(
        response=response, defaults={"thumbs": value, "comment": comment, "who": who, "updated_at": timezone.now()})
    return annotation
