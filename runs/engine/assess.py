# Over 500 lines: one response's whole assessment (points, judges, gates, trials' subject) in one place, so every door scores alike.
"""Assessing one response: every point scored (by its function or by the judges), then the response's score.

``assess_response`` is the one entry point, for a task and for a test alike:
no Django, no globals. It takes the prompt as authored, what generation
produced, who judges, and the function that reaches models; it gives back
each point's assessment, the score (or why there is none), the worked
calculation, similarity to the ideal, judge agreement and judge usage.

Expected failures are values: a failed generation, a judge that could not be
reached or answered nonsense, a function that errored. They never become a
score. Only bugs raise (a point with both text and a function cannot come
out of the parser, so meeting one here is a bug).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Mapping

from blueprints.spec import functions as spec_functions
from blueprints.spec.schema import TEXT_AND_TOOL_CALLS, Point, Prompt

from .config import EngineConfig
from .judge import Consensus, JudgePlan, JudgeTask, JudgeVerdict, band_scale, criteria_list, judge_point
from .points import InvalidPoint, ResponseMetrics, display_text, parse_tool_calls, text_with_tool_calls
from .points import evaluate_point as real_evaluate_point
from .scoring import (
    AlphaResult,
    Calculation,
    CheckResult,
    EmbedFn,
    JudgeAgreement,
    Rating,
    calculate,
    check_results,
    decide_verdict,
    judge_agreement,
    round2,
    round_half_up,
    similarity_to_ideal,
    textbook_alpha,
)
from .types import CompleteFn, GeneratedResponse, Turn

ScoreBasis = Literal["coverage", "similarity"]
PointEvaluator = Callable[..., Any]  # runs.engine.points.evaluate_point, sync or async


def key_point_text(point: Point) -> str:
    """The text a point is shown and exported by: its criterion, or ``Function: fn(<JSON of args>)``."""
    if point.fn:
        return display_text(point.fn, point.fn_args if point.has_args else None)
    return point.text or ""


INVERTED_PREFIX = "[INVERTED] "


@dataclass(frozen=True, slots=True)
class PointAssessment:
    """One point of one response: the point as authored, its score or why it has none, and who said so."""

    point: Point
    score: float | None  # final: after should_not inversion; None: not scored
    raw_score: float | None = None  # the function's or the judges' score before inversion
    reflection: str | None = None  # the explanation shown to a reviewer
    error: str | None = None  # why there is no score; never set together with a score
    warning: str | None = None  # scored, but some judges failed or the backup stood in
    judge_model_id: str | None = None  # consensus(<judge id>, ...) for judged points
    verdicts: tuple[JudgeVerdict, ...] = ()  # every judge asked, failed ones included
    judge_std_dev: float | None = None  # population std-dev of the answering judges
    disagreement: bool = False  # judge_std_dev > 0.3
    backup_used: bool = False
    original_score: float | None = None  # the judges' or function's score when a reviewer overrode it
    overridden: bool = False
    override_reason: str | None = None  # the reviewer's reason, and who they are, when overridden
    override_by: str | None = None

    @property
    def kind(self) -> Literal["function", "judged"]:
        return self.point.kind

    @property
    def multiplier(self) -> float:
        return self.point.multiplier

    @property
    def path_id(self) -> str | None:
        return self.point.path_id

    @property
    def inverted(self) -> bool:
        return self.point.inverted

    @property
    def key_point_text(self) -> str:
        return key_point_text(self.point)

    @property
    def individual_judgements(self) -> tuple[JudgeVerdict, ...]:
        """The judges that answered (failed judges are not judgements; they are in ``failed_judges``).
        A judge's re-askings (role ``repeat``) score nothing: they are not among them."""
        return tuple(v for v in self.verdicts if v.ok and v.role != "repeat")

    @property
    def failed_judges(self) -> tuple[JudgeVerdict, ...]:
        return tuple(v for v in self.verdicts if not v.ok and v.role != "repeat")

    def ratings(self) -> list[Rating]:
        return [Rating(v.judge.label, v.score, v.judge.model, v.judge.approach) for v in self.individual_judgements]


@dataclass(frozen=True, slots=True)
class JudgeUsage:
    """Judge calls for one response (or, summed, for a run), kept apart from the candidates' usage."""

    calls: int = 0  # requests sent, repairs included
    failed_verdicts: int = 0
    cached_verdicts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # what the calls of known price cost; None: no call's price is known
    unknown_cost_calls: int = 0  # calls whose price is not known (each call counts, repairs included)

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        cost = None if self.cost_usd is None and other.cost_usd is None else \
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return JudgeUsage(self.calls + other.calls, self.failed_verdicts + other.failed_verdicts,
                          self.cached_verdicts + other.cached_verdicts, self.input_tokens + other.input_tokens,
                          self.output_tokens + other.output_tokens, cost,
                          self.unknown_cost_calls + other.unknown_cost_calls)

    @classmethod
    def of(cls, verdicts: list[JudgeVerdict]) -> JudgeUsage:
        known = [v.cost_usd for v in verdicts if v.calls and v.cost_usd is not None]
        unknown = sum(v.calls for v in verdicts if v.calls and v.cost_usd is None)
        return cls(
            calls=sum(v.calls for v in verdicts),
            failed_verdicts=sum(1 for v in verdicts if not v.ok),
            cached_verdicts=sum(1 for v in verdicts if v.cached),
            input_tokens=sum(v.input_tokens or 0 for v in verdicts),
            output_tokens=sum(v.output_tokens or 0 for v in verdicts),
            cost_usd=float(sum(known)) if known or not unknown else None,
            unknown_cost_calls=unknown,
        )

    def to_dict(self) -> dict:
        return {"calls": self.calls, "failedVerdicts": self.failed_verdicts, "cachedVerdicts": self.cached_verdicts,
                "inputTokens": self.input_tokens, "outputTokens": self.output_tokens, "costUsd": self.cost_usd,
                "unknownCostCalls": self.unknown_cost_calls}

    @classmethod
    def from_dict(cls, data: dict) -> JudgeUsage:
        return cls(calls=data.get("calls") or 0, failed_verdicts=data.get("failedVerdicts") or 0,
                   cached_verdicts=data.get("cachedVerdicts") or 0, input_tokens=data.get("inputTokens") or 0,
                   output_tokens=data.get("outputTokens") or 0, cost_usd=data.get("costUsd", 0.0),
                   unknown_cost_calls=unknown_cost_calls(data))


def unknown_cost_calls(usage: dict) -> int:
    """Judge calls of unknown price in a stored usage dict (stored before the count was kept: every call
    of a response whose judge cost was unknown)."""
    if "unknownCostCalls" in usage:
        return usage.get("unknownCostCalls") or 0
    return (usage.get("calls") or 0) if usage.get("costUsd") is None else 0


@dataclass(frozen=True, slots=True)
class ResponseAssessment:
    prompt_id: str
    model_variant_id: str
    trial: int
    point_assessments: tuple[PointAssessment, ...]
    score: float | None  # avgCoverageExtent (2 places), or similarity for an ideal-only prompt; None: not evaluated
    score_basis: ScoreBasis | None = None
    not_evaluated_reason: str | None = None
    calculation: Calculation | None = None
    similarity: float | None = None  # cosine similarity of the final answer to the ideal
    similarity_error: str | None = None
    judge_agreement: JudgeAgreement | None = None  # the upstream's figures for this response
    judge_usage: JudgeUsage = JudgeUsage()
    generation_error: str | None = None
    # The pass/fail layer (only when the prompt has verdicts, gates or minimums; docs/scoring.md section 7).
    verdict: str | None = None  # pass, borderline, fail; None: no verdict layer, or undecided
    score_before_gates: float | None = None  # the score a failed gate set to 0
    gates_failed: tuple[str, ...] = ()
    checks_failed: tuple[str, ...] = ()
    check_results: tuple[CheckResult, ...] = ()
    verdict_reason: str | None = None
    score_before_overrides: float | None = None  # the score as assessed, when reviewers overrode points

    @property
    def evaluated(self) -> bool:
        return self.score is not None

    @property
    def overridden(self) -> bool:
        return any(pa.overridden for pa in self.point_assessments)

    @property
    def judges_all_failed(self) -> bool:
        return judges_all_failed(self.point_assessments) is not None

    @property
    def violated_should_not(self) -> bool:
        """Some ``should_not`` point was met (its final score below 0.5)."""
        return any(pa.inverted and pa.score is not None and pa.score < 0.5 for pa in self.point_assessments)

    @property
    def passed(self) -> bool | None:
        return None if self.verdict is None else self.verdict == "pass"

    @property
    def key_points_count(self) -> int:
        return len(self.point_assessments)


# --------------------------------------------------------------------------


def _conversation(prompt: Prompt, response: GeneratedResponse) -> tuple[Turn, ...]:
    if response.conversation:
        return response.conversation
    turns = [Turn(role="system", content=prompt.system)] if prompt.system else []
    return (*turns, *(Turn(role=m.role, content=m.content) for m in prompt.messages))


def response_metrics(response: GeneratedResponse) -> ResponseMetrics:
    """What generation recorded about a response, for the metric checks."""
    generated = sum(1 for t in response.conversation if t.generated)
    return ResponseMetrics(latency_ms=response.latency_ms, cost_usd=response.cost_usd,
                           input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens,
                           llm_calls=generated if response.conversation else None, cached=response.cached)


async def _assess_function_point(point: Point, evaluate_point: PointEvaluator, subject: str,
                                 conversation: tuple[Turn, ...], response: GeneratedResponse,
                                 prompt: Prompt, external_services: Any,
                                 files: Mapping[str, str] | None = None,
                                 config: EngineConfig | None = None) -> PointAssessment:
    extra: dict[str, Any] = {}
    if config is not None:
        extra["config"] = config
    # Only the functions that need them get these, so that an evaluator a caller passes keeps its signature.
    if point.fn in spec_functions.METRIC_FUNCTIONS or point.fn in spec_functions.FILE_FUNCTIONS:
        extra["metrics"] = response_metrics(response)
    if point.fn in spec_functions.FILE_FUNCTIONS:
        extra["files"] = files or {}
    call = dict(
        messages=[{"role": t.role, "content": t.content} for t in conversation],
        model_id=response.model_variant_id,
        # The native trajectory's calls (none is none); trace-only: None lets the function parse the text itself.
        tool_calls=list(response.tool_calls) if response.tool_mode == "native" else (list(response.tool_calls) or None),
        prompt_id=prompt.id,
        external_services=external_services,
        **extra,
    )
    args = point.fn_args if point.has_args else None
    if point.fn in spec_functions.FILE_FUNCTIONS:  # a script: keep the event loop free while it runs
        result = await asyncio.to_thread(evaluate_point, point.fn, args, subject, **call)
    else:
        result = evaluate_point(point.fn, args, subject, **call)
    if inspect.isawaitable(result):
        result = await result
    if result.error is not None or result.score is None:
        error = result.error or f"Function '{point.fn}' gave no score"
        return PointAssessment(point=point, score=None, reflection=f"Error: {error}", error=error)
    raw = float(result.score)
    reflection = result.explain or f"Function '{point.fn}' evaluated to {round_half_up(raw, 2):.2f}."
    return PointAssessment(point=point, score=1 - raw if point.inverted else raw, raw_score=raw,
                           reflection=reflection)


def judged_point_assessment(point: Point, verdict: Consensus) -> PointAssessment:
    """A text point's assessment from its judges' consensus: inverted for should_not, errors kept as errors."""
    common = dict(point=point, verdicts=verdict.verdicts, judge_std_dev=verdict.std_dev,
                  disagreement=verdict.disagreement, backup_used=verdict.backup_used)
    if verdict.score is None:
        return PointAssessment(score=None, reflection=f"Error: {verdict.error}", error=verdict.error, **common)
    # The upstream inverts without rounding (1 - 0.33 stays 0.6699999999999999); so do we.
    final = 1 - verdict.score if point.inverted else verdict.score
    reflection = (INVERTED_PREFIX if point.inverted else "") + (verdict.reflection or "")
    return PointAssessment(score=final, raw_score=verdict.score, reflection=reflection, warning=verdict.warning,
                           judge_model_id=verdict.judge_model_id, **common)


def judges_all_failed(assessments: tuple[PointAssessment, ...]) -> str | None:
    """Why a response is not evaluated when every judge call on its judged points failed, else None.

    Such a response is failed (runs/models.py: "retry failed" asks the judges again) and not
    evaluated, even when its function points scored: a judging outage must not show as a score
    made of the function points alone (an errored point among answered ones is still left out,
    deviation 1). A backup judge that answered, or a reviewer's score on a judged point, is an answer.
    """
    judged = [pa for pa in assessments if pa.kind == "judged"]
    if not judged or any(pa.overridden for pa in judged):
        return None
    verdicts = [v for pa in judged for v in pa.verdicts if v.role != "repeat"]  # a re-asking scores nothing
    if not verdicts or any(v.ok for v in verdicts):
        return None
    primary = [v for v in verdicts if v.role == "primary"] or verdicts
    first = next((v.error for v in primary if v.error), "no answer")
    return f"every judge call failed ({len(primary)} of {len(primary)}); the first: {first}"


def _no_score_reason(assessments: tuple[PointAssessment, ...]) -> str:
    errors = [a.error for a in assessments if a.error]
    if errors and len(set(errors)) == 1:
        return f"no point could be scored: {errors[0]}"
    if errors:
        return f"no point could be scored ({len(errors)} errors; the first: {errors[0]})"
    return "no point could be scored"


def _check_points(prompt: Prompt) -> None:
    for point in prompt.all_points():
        if point.text and point.fn:
            # The parser rejects such a point; reaching here means a caller built one by hand.
            raise InvalidPoint("Point object cannot have both 'text' and a function ('fn' or idiomatic). "
                             f"Prompt ID: '{prompt.id}'")


def _subject(response: GeneratedResponse) -> str:
    """What points are scored against: every generated turn; the final answer when nothing was generated."""
    return response.text or response.final_text or ""


def response_tool_calls(response: GeneratedResponse, subject: str) -> list[dict]:
    """The response's tool calls as the tool functions see them: a native trajectory's calls, else the TOOL_CALL
    lines of the text."""
    if response.tool_mode == "native" or response.tool_calls:
        return [dict(c) for c in response.tool_calls]
    return parse_tool_calls(subject)


SAW_TOOL_CALLS = "(Checked against the response text and its tool calls, as AI Eval checks it.)"


def point_subject(point: Point, subject: str, response: GeneratedResponse) -> str:
    """What ``point`` is scored against: the text, or (``sees: text+tool_calls``, AI Eval's `contains`, `regex` and
    `llm_judge`) the text followed by the Markdown rendering of the response's tool calls."""
    if point.sees != TEXT_AND_TOOL_CALLS:
        return subject
    return text_with_tool_calls(subject, response_tool_calls(response, subject))


def judge_tasks(prompt: Prompt, response: GeneratedResponse) -> list[JudgeTask]:
    """What the judges receive for each text point of a response, in rubric order."""
    conversation = _conversation(prompt, response)
    all_criteria = criteria_list(prompt)
    subject = _subject(response)
    return [
        JudgeTask(criterion=p.text or "", conversation=conversation, subject_text=point_subject(p, subject, response),
                  inverted=p.inverted, all_criteria=all_criteria, prompt_id=prompt.id,
                  scale=band_scale(p.score_ranges) if p.score_ranges else None)
        for p in prompt.all_points() if p.fn is None
    ]


async def assess_response(
    prompt: Prompt,
    response: GeneratedResponse,
    *,
    judges: JudgePlan,
    complete: CompleteFn,
    evaluate_point: PointEvaluator = real_evaluate_point,
    embed: EmbedFn | None = None,
    external_services: Any = None,
    files: Mapping[str, str] | None = None,
    config: EngineConfig | None = None,
) -> ResponseAssessment:
    """Score one response to one prompt.

    Points are assessed in rubric order (``should`` then ``should_not``):
    function points by ``evaluate_point`` (``runs.engine.points``; tests may pass their own),
    text points by every judge of ``judges`` at once, through ``complete``.
    ``embed``, when given, measures similarity to the prompt's ideal; a
    prompt with an ideal and no points is scored by it (DESIGN.md deviation 18).
    ``files`` are the suite's companion files (for ``$code_judge``). ``config`` (what the
    operator configured: limits, ``$call`` hosts, script graders) goes to ``evaluate_point``
    (its defaults when None). When the prompt has
    verdicts, gates or per-check minimums, the pass/fail layer decides the verdict, and a
    failed gate sets the score to 0.
    """
    _check_points(prompt)
    base = dict(prompt_id=prompt.id, model_variant_id=response.model_variant_id, trial=response.trial)
    subject = _subject(response)
    # A record-only answer (an AI Eval case without mocks) may be only its tool calls: those are scored, the
    # text as empty.
    recorded = any(c.get("outcome") == "recorded" for c in response.tool_calls)
    if response.error or (not subject.strip() and not recorded):
        reason = f"Generation failed: {response.error or 'the response is empty'}"
        return ResponseAssessment(point_assessments=(), score=None, not_evaluated_reason=reason,
                                  generation_error=reason, **base)

    conversation = _conversation(prompt, response)
    points = prompt.all_points()
    tasks = judge_tasks(prompt, response)
    # Judges start at once; function points are worked out meanwhile, one after another.
    judging = asyncio.gather(*(judge_point(task, judges, complete) for task in tasks))
    try:
        functions: list[PointAssessment] = []
        for point in points:
            if point.fn is not None:
                seen = point_subject(point, subject, response)
                assessed = await _assess_function_point(point, evaluate_point, seen, conversation, response, prompt,
                                                        external_services, files, config)
                if seen != subject and assessed.error is None:
                    assessed = replace(assessed, reflection=f"{assessed.reflection} {SAW_TOOL_CALLS}")
                functions.append(assessed)
        verdicts = iter(await judging)
    finally:
        judging.cancel()  # only has an effect if a bug raised above
    function_results = iter(functions)
    assessments = tuple(
        next(function_results) if point.fn is not None else judged_point_assessment(point, next(verdicts))
        for point in points
    )

    similarity, similarity_error = None, None
    ideal = prompt.ideal_response
    if ideal and embed is not None:
        similarity, similarity_error = await similarity_to_ideal(embed, response.final_text or subject, ideal)

    calculation = calculate(assessments) if assessments else None
    score, basis, reason = None, None, None
    if assessments:
        if calculation.score is not None:
            score, basis = round2(calculation.score), "coverage"
        else:
            reason = _no_score_reason(assessments)
    elif ideal:
        if similarity is not None:
            score, basis = round2(max(0.0, similarity)), "similarity"
        elif embed is None:
            reason = ("the prompt has no points, and scoring by similarity to its ideal needs an embeddings model "
                      "(set EVALSITE_EMBEDDINGS_MODEL or the blueprint's embeddingModel)")
        else:
            reason = f"the prompt has no points, and similarity to its ideal failed: {similarity_error}"
    else:
        reason = "the prompt has no points and no ideal response to score against"
    no_judge = judges_all_failed(assessments)
    if no_judge:  # a judging outage never becomes a score made of the function points alone
        score, basis, reason = None, None, no_judge

    all_verdicts = [v for a in assessments for v in a.verdicts]
    layer = verdict_layer(prompt, assessments, score)
    return ResponseAssessment(
        **layer,
        point_assessments=assessments,
        score_basis=basis,
        not_evaluated_reason=reason,
        calculation=calculation,
        similarity=similarity,
        similarity_error=similarity_error,
        judge_agreement=judge_agreement([a.ratings() for a in assessments if a.kind == "judged"]),
        judge_usage=JudgeUsage.of(all_verdicts),
        **base,
    )


def verdict_layer(prompt: Prompt, assessments: tuple[PointAssessment, ...], score: float | None) -> dict:
    """``score`` and the verdict fields of a ResponseAssessment; the score as given when the prompt has no layer."""
    if not prompt.has_verdicts:
        return {"score": score}
    checks = check_results(((a.point.check_id, a) for a in assessments), prompt.checks)
    # A point's own minimum is a check of one point.
    checks += tuple(CheckResult(id=f"point_{i}", label=(a.point.label or key_point_text(a.point))[:80], kind="point",
                                score=a.score, min_score=a.point.min_score, points=1)
                    for i, a in enumerate(assessments) if a.point.min_score is not None)
    outcome = decide_verdict(score, checks, prompt.verdicts)
    return {"score": outcome.score, "verdict": outcome.verdict, "score_before_gates": outcome.score_before_gates,
            "gates_failed": outcome.gates_failed, "checks_failed": outcome.checks_failed,
            "check_results": outcome.checks, "verdict_reason": outcome.reason}


@dataclass(frozen=True, slots=True)
class Override:
    """A reviewer's final score for one point, with why and who."""

    score: float
    reason: str = ""
    who: str = ""


def apply_overrides(assessment: ResponseAssessment, overrides: Mapping[int, float | Override],
                    prompt: Prompt | None = None) -> ResponseAssessment:
    """The assessment with reviewers' scores in place of the judges' (keyed by point index, final scores).

    The judges' verdicts stay; each overridden point keeps its original
    score in ``original_score``. The response's score is worked out again,
    and with ``prompt`` its pass/fail verdict too (also with no overrides: a
    verdict read back from storage is then the one the scores give). This is the one place an
    override changes a score: the review pages, the exports and the
    conformance tests all come here.
    """
    if not assessment.point_assessments or (not overrides and prompt is None):
        return assessment

    def overridden(pa: PointAssessment, given: float | Override) -> PointAssessment:
        o = given if isinstance(given, Override) else Override(score=given)
        return replace(pa, score=o.score, original_score=pa.score, overridden=True, error=None,
                       override_reason=o.reason or None, override_by=o.who or None)

    points = tuple(overridden(pa, overrides[i]) if i in overrides else pa
                   for i, pa in enumerate(assessment.point_assessments))
    calculation = calculate(points)
    score = round2(calculation.score) if calculation.score is not None else None
    no_judge = judges_all_failed(points)
    if no_judge:
        score = None
    layer = verdict_layer(prompt, points, score) if prompt is not None else {"score": score}
    return replace(assessment, point_assessments=points, calculation=calculation, **layer,
                   score_before_overrides=assessment.score if overrides else None,
                   score_basis="coverage" if score is not None else None,
                   not_evaluated_reason=None if score is not None else (no_judge or _no_score_reason(points)))


def run_textbook_alpha(assessments: list[ResponseAssessment]) -> AlphaResult:
    """The textbook interval Krippendorff's alpha over every point of a run that two or more judges scored."""
    return textbook_alpha(pa.ratings() for ra in assessments for pa in ra.point_assessments if pa.kind == "judged")
