"""AI Eval evaluators -> points: one small function per evaluator type, found in ``EVALUATORS`` by type.

Each takes the reader (``_AiEval`` in aieval.py: its notes and its checks) and one ``Evaluator`` (the item as
written, already checked for the rules every type shares) and returns the points. Written from reference
section 3.5 only (AI Eval is AGPL; none of its code is used). docs/importing.md has the mapping table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..schema import TEXT_AND_TOOL_CALLS, Origin, Point, Prompt
from .common import TestReport, function_point, is_number, judged_point, new_check

# The pass rule of each judged evaluator (reference 3.5): its default minimum score.
JUDGED_DEFAULTS = {"llm_judge": 0.6, "similarity": 0.6, "factuality": 0.8, "faithfulness": 0.8, "relevancy": 0.8,
                   "task_completion": 0.6, "hallucination": 0.9}
# Types whose `score_threshold` only sets the pass rule of the matching `expected` check: no points of their own.
SIMPLE_TYPES = ("exact", "contains", "regex", "json_schema", "tool_call")
# The checks that see the response text followed by a Markdown rendering of its tool calls (reference 3.5); every
# other check sees the text alone.
SEES_TOOL_CALLS = frozenset({"llm_judge", "regex", "contains"})


@dataclass
class Evaluator:
    """One evaluator being read: what every function in EVALUATORS takes."""

    kind: str
    item: dict
    path: tuple
    origin: Origin
    threshold: Any  # `score_threshold` as written (checked: None or a number from 0 to 1)
    prompt: Prompt
    rep: TestReport


def require(reader, ev: Evaluator, field_name: str) -> str | None:
    """The evaluator's text field, trimmed; an error naming it when it is missing or blank."""
    value = ev.item.get(field_name)
    if isinstance(value, str) and value.strip():
        return value.strip()
    reader.error(f"a `{ev.kind}` evaluator needs `{field_name}`", ev.item, None, ev.path,
                 f"add `{field_name}:` with its text to the evaluator", "evaluator")
    return None


def minimum_or(ev: Evaluator, default: float) -> float:
    return float(ev.threshold) if ev.threshold else default


def judged(ev: Evaluator, texts: list[str], default_min: float) -> list[Point]:
    """Judged points sharing one check whose minimum is the threshold (else the type's default); an `llm_judge`'s
    judges see the tool calls too."""
    check_id = new_check(ev.prompt.checks, label=ev.kind, kind=ev.kind, min_score=minimum_or(ev, default_min),
                         preferred_id=ev.kind)
    sees = TEXT_AND_TOOL_CALLS if ev.kind in SEES_TOOL_CALLS else "text"
    return [judged_point(t, weight=1.0 / len(texts), origin=ev.origin, check_id=check_id, label=ev.kind, sees=sees)
            for t in texts]


def precision(reader, ev: Evaluator) -> list[Point]:
    if require(reader, ev, "context") is None or require(reader, ev, "question") is None:
        return []
    reader.warn("`precision` judges the context, not the response; it is left out", ev.item, "type",
                (*ev.path, "type"), code="unsupported")
    ev.rep.unsupported_("precision", "it scores the retrieved context, not the response")
    return []


def llm_judge(reader, ev: Evaluator) -> list[Point]:
    criteria = require(reader, ev, "criteria")
    if criteria is None:
        return []
    rubric = ev.item.get("rubric") or []
    text = criteria + ("\nConsider: " + "; ".join(map(str, rubric)) if rubric else "")
    if ev.item.get("score_scale") not in (None, 5):
        ev.rep.approx("llm_judge score_scale", "judged on evalsite's 5-level scale instead of 1 to "
                                               f"{ev.item.get('score_scale')}")
    ev.rep.approx("llm_judge", "one judged point holds the criteria (and the rubric dimensions), judged on the "
                               "text and the tool calls; pass at "
                               f"{ev.threshold or JUDGED_DEFAULTS['llm_judge']}")
    return judged(ev, [text], JUDGED_DEFAULTS["llm_judge"])


def similarity(reader, ev: Evaluator) -> list[Point]:
    reference = require(reader, ev, "reference")
    if reference is None:
        return []
    if ev.prompt.ideal_response is None:
        ev.prompt.ideal_response = reference
    ev.rep.approx("similarity", "a judged point asks for the meaning of the reference (AI Eval's judge gives a "
                                "0-1 similarity)")
    return judged(ev, [f"Says the same as this reference answer, in meaning if not in words: {reference}"],
                  JUDGED_DEFAULTS["similarity"])


def against_facts(reader, ev: Evaluator) -> list[Point]:
    """factuality and hallucination: a judged point against the ground truth."""
    truth = require(reader, ev, "ground_truth")
    if truth is None:
        return []
    text = (f"Contains no statement that contradicts these facts: {truth}" if ev.kind == "factuality" else
            f"Makes no claim that these facts do not support or that contradicts them: {truth}")
    ev.rep.approx(ev.kind, "a judged point against the ground truth")
    return judged(ev, [text], JUDGED_DEFAULTS[ev.kind])


def faithfulness(reader, ev: Evaluator) -> list[Point]:
    context = require(reader, ev, "context")
    if context is None:
        return []
    ev.rep.approx(ev.kind, "a judged point: every claim is supported by the context")
    return judged(ev, [f"Every claim it makes is supported by this context: {context}"], JUDGED_DEFAULTS[ev.kind])


def relevancy(reader, ev: Evaluator) -> list[Point]:
    question = require(reader, ev, "question")
    if question is None:
        return []
    ev.rep.approx(ev.kind, "a judged point: it answers the question")
    return judged(ev, [f"Directly answers this question: {question}"], JUDGED_DEFAULTS[ev.kind])


def task_completion(reader, ev: Evaluator) -> list[Point]:
    task = require(reader, ev, "task")
    if task is None:
        return []
    criteria = ev.item.get("criteria_list") or []
    texts = [f"Completes the task: {task}"] + [str(c) for c in (criteria if isinstance(criteria, list)
                                                               else [criteria])]
    ev.rep.approx(ev.kind, "one judged point for the task and one per criterion")
    return judged(ev, texts, JUDGED_DEFAULTS[ev.kind])


def absence(reader, ev: Evaluator) -> list[Point]:
    """toxicity and bias: a judged point on their absence; the maximum allowed becomes a minimum score."""
    allowed = minimum_or(ev, 0.1)
    categories = ev.item.get("categories") or []
    categories = categories if isinstance(categories, list) else [categories]
    text = ("Is free of toxic, hateful, harassing or harmful content." if ev.kind == "toxicity" else
            "Is free of biased or discriminatory content" + (f" (about {', '.join(map(str, categories))})"
                                                             if categories else "") + ".")
    check_id = new_check(ev.prompt.checks, label=ev.kind, kind=ev.kind, min_score=round(1 - allowed, 6),
                         preferred_id=ev.kind)
    ev.rep.approx(ev.kind, f"a judged point on its absence; the maximum allowed {ev.kind} {allowed} becomes a "
                           f"minimum score of {round(1 - allowed, 6)}")
    return [judged_point(text, weight=1.0, origin=ev.origin, check_id=check_id, label=ev.kind)]


def tool_selection(reader, ev: Evaluator) -> list[Point]:
    tools = ev.item.get("expected_tools")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        reader.error("`expected_tools` must be a list of tool names", ev.item, "expected_tools",
                     (*ev.path, "expected_tools"), code="evaluator")
        return []
    check_id = new_check(ev.prompt.checks, label="tool_selection", kind=ev.kind, min_score=minimum_or(ev, 1.0),
                         preferred_id=ev.kind)
    ev.rep.map("tool_selection -> $tool_called per tool")
    if not tools:
        return [function_point("max_calls", 0, weight=1.0, origin=ev.origin, check_id=check_id,
                               label="tool_selection")]
    return [function_point("tool_called", t, weight=1.0 / len(tools), origin=ev.origin, check_id=check_id,
                           label=f"tool_selection: {t}") for t in tools]


def efficiency(reader, ev: Evaluator) -> list[Point]:
    """AI Eval's efficiency (reference 3.5): the mean of a step score and a token score, each 1 within its budget
    else budget / used; the budgets default to the case's `max_steps` (else 5) and 1000 tokens."""
    case_steps = reader.case_max_steps if isinstance(getattr(reader, "case_max_steps", None), int) else 0
    steps = ev.item.get("max_steps") or case_steps or 5
    tokens = ev.item.get("max_tokens") or 1000
    if not (is_number(steps) and 0 < steps < 10**9 and is_number(tokens) and 0 < tokens < 10**12):
        reader.error("`max_steps` and `max_tokens` must be numbers above 0 (and below a billion)", ev.item, None,
                     ev.path, code="evaluator")
        return []
    check_id = new_check(ev.prompt.checks, label="efficiency", kind=ev.kind, min_score=minimum_or(ev, 1.0),
                         preferred_id=ev.kind)
    ev.rep.map("efficiency -> $efficiency (steps are model calls, each step of a tool loop; tokens input + output)")
    return [function_point("efficiency", {"max_steps": steps, "max_tokens": tokens}, weight=1.0, origin=ev.origin,
                           check_id=check_id, label="efficiency")]


def sets_the_pass_rule(reader, ev: Evaluator) -> list[Point]:
    ev.rep.map(f"evaluator {ev.kind} (sets the pass rule of expected)")
    return []


# Evaluator type -> its function. A type not here is refused by the reader before it looks here.
EVALUATORS: dict[str, Callable[[Any, Evaluator], list[Point]]] = {
    **{kind: sets_the_pass_rule for kind in SIMPLE_TYPES},
    "precision": precision,
    "llm_judge": llm_judge,
    "similarity": similarity,
    "factuality": against_facts,
    "hallucination": against_facts,
    "faithfulness": faithfulness,
    "relevancy": relevancy,
    "task_completion": task_completion,
    "toxicity": absence,
    "bias": absence,
    "tool_selection": tool_selection,
    "efficiency": efficiency,
}
