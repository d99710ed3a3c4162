# Over 500 lines: the one place rows and engine values meet, both ways (saving, finishing, the matrix, trust).
"""The one mapping between the engine's values and the database's rows, both ways.

Saving: ``result_fields`` gives a finished item's ``Response`` columns and what it
adds to the run's counters, ``point_rows`` its ``PointAssessment`` rows (written by ``runs.bulk``).
Reading: ``assessment_of`` gives a stored response back as the engine's
``ResponseAssessment``, reviewers' overrides applied by the engine's
``apply_overrides``. Pages, exports and overrides read results through it, so
the functions the conformance tests check (``export_response``,
``apply_overrides``, ``calculate``) are the ones that make what a user sees.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Iterator, NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, TextField
from django.db.models.functions import Cast
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from blueprints.spec.schema import Blueprint as SpecBlueprint
from blueprints.spec.schema import Point, Prompt
from runs.engine import calls, jsonfast
from runs.engine.bounds import critical_positions, matrix_bounds
from runs.engine.aggregates import Spend, aggregates_of, spend_of, stored_totals, summaries_of
from runs.engine.findings import JudgeSaid, PointRecord as FindingPoint
from runs.engine.matrix import CellFigures, Matrix, ResponseRecord, build_matrix, cell_figures, cell_figures_json, \
    cell_figures_of, page_matrix as build_page_matrix
from runs.engine.trust import ReviewedPoint
from runs.engine.assess import JudgeUsage, Override, PointAssessment as EnginePoint, ResponseAssessment, \
    apply_overrides, key_point_text, unknown_cost_calls
from runs.engine.judge import JudgePlan, JudgeSpec, JudgeVerdict, primary_tally, scale_for
from runs.engine.pipeline import ItemResult
from runs.engine.scanners import Answer as ScanAnswer
from runs.engine.scoring import CheckResult, JudgeAgreement, Rating, calculate

from .bulk import add_to, insert, update_each
from .models import FINISHED, Annotation, EarlierAttempt, PointAssessment, PointConfirmation, PointOverride, Response, \
    ResponseStatus, Run, RunCells, RunStatus
from .spec import parsed_blueprint

log = logging.getLogger(__name__)

# --- engine -> rows -----------------------------------------------------------------------


def point_rows(response_id: int, assessment: ResponseAssessment) -> list[dict]:
    """A response's ``PointAssessment`` rows, as columns (``runs.bulk.insert`` writes them)."""
    out = []
    for position, pa in enumerate(assessment.point_assessments):
        point = pa.point
        out.append(dict(
            response_id=response_id, position=position, kind=pa.kind, text=point.text or "", fn=point.fn or "",
            fn_args=point.fn_args if point.has_args else None, citation=point.citation,
            multiplier=point.multiplier, path_id=point.path_id or "", inverted=point.inverted,
            key_point_text=key_point_text(point), source_line=point.origin.line,
            score=pa.score, raw_score=pa.raw_score, reflection=pa.reflection or "", error=pa.error or "",
            warning=pa.warning or "", judge_model_id=pa.judge_model_id or "",
            verdicts=[v.to_dict() for v in pa.verdicts], judge_std_dev=pa.judge_std_dev,
            disagreement=pa.disagreement, backup_used=pa.backup_used,
        ))
    return out


def assessment_fields(assessment: ResponseAssessment) -> dict:
    """The Response columns that follow from an assessment (after a run, or after an override)."""
    return dict(
        score=assessment.score, score_basis=assessment.score_basis or "",
        not_evaluated_reason=assessment.not_evaluated_reason or "",
        violated_should_not=assessment.violated_should_not,
        verdict=assessment.verdict or "", verdict_reason=assessment.verdict_reason or "",
        score_before_gates=assessment.score_before_gates, gates_failed=list(assessment.gates_failed),
        checks=[c.to_dict() for c in assessment.check_results],
    )


def _generation_fields(response) -> dict:
    """The Response columns of what the candidate generated, and what it took."""
    return dict(
        conversation=[t.to_dict() for t in response.conversation],  # a tool loop's steps included
        text=response.text, final_text=response.final_text, tool_calls=list(response.tool_calls),
        # The generation's spending, a simulated user's calls included (their share is in the call log, purpose
        # "user"): what the run's bill adds up.
        latency_ms=response.latency_ms, input_tokens=response.spent_usage.input_tokens,
        output_tokens=response.spent_usage.output_tokens, cost_usd=response.spent_cost_usd, cached=response.cached,
    )


def _spent_now(result: ItemResult) -> tuple[list[dict], list[dict]]:
    """The item's calls made now, candidate and judge apart (a re-judged item made no candidate call now)."""
    fresh = result.item.existing is None
    return ([c for c in result.calls if c.get("purpose") != "judge"] if fresh else [],
            [c for c in result.calls if c.get("purpose") == "judge"])


def _generation_spend(result: ItemResult, made: list[dict]) -> dict:
    """What the generation made now spent, as the columns of a response (or of an earlier attempt)."""
    if result.item.existing is not None:  # judged again: the generation was counted when it was made
        return dict(candidate_calls_sent=0, candidate_input_tokens=0, candidate_output_tokens=0,
                    candidate_cost_usd=None, candidate_cost_unknown=0)
    response, spent = result.response, calls.spent(made)
    if result.internal_error is not None:  # stopped by its budget (or a bug): its calls say what it spent
        return dict(candidate_calls_sent=spent["sent"], candidate_input_tokens=spent["inputTokens"],
                    candidate_output_tokens=spent["outputTokens"], candidate_cost_usd=spent["costUsd"],
                    candidate_cost_unknown=spent["unknownCostCalls"])
    return dict(candidate_calls_sent=spent["sent"], candidate_input_tokens=response.spent_usage.input_tokens or 0,
                candidate_output_tokens=response.spent_usage.output_tokens or 0,
                candidate_cost_usd=response.spent_cost_usd,
                candidate_cost_unknown=spent["unknownCostCalls"])


def _judge_usage_of(spent: dict) -> dict:
    """Judge calls' ``calls.spent`` in the shape of a stored ``JudgeUsage`` (``Response.judge_usage``)."""
    return {k: spent[k] for k in ("calls", "inputTokens", "outputTokens", "costUsd", "unknownCostCalls")}


def _counters(generation: dict, judge_sent: int, usage: dict | None) -> dict:
    """What an item's calls add to the run's counters: its generation's (``_generation_spend``) and its judges'."""
    usage = usage or {}
    return dict(
        candidate_calls_sent=generation["candidate_calls_sent"],
        candidate_input_tokens=generation["candidate_input_tokens"],
        candidate_output_tokens=generation["candidate_output_tokens"],
        candidate_cost_usd=generation["candidate_cost_usd"] or 0,
        candidate_cost_unknown=generation["candidate_cost_unknown"],
        judge_calls_sent=judge_sent,
        judge_input_tokens=usage.get("inputTokens") or 0, judge_output_tokens=usage.get("outputTokens") or 0,
        judge_cost_usd=usage.get("costUsd") or 0, judge_cost_unknown=unknown_cost_calls(usage),
    )


def _stopped_fields(result: ItemResult) -> tuple[dict, dict, dict | None]:
    """An item the cancel stopped under way: back to pending, keeping a complete generation (and counting its cost).

    What it spent and does not keep (a generation stopped between turns, judges that answered before the stop)
    becomes an earlier attempt of the response (``EarlierAttempt``), so the run's totals keep it."""
    response = result.response
    fields = dict(status=ResponseStatus.PENDING, claimed_by="", claimed_at=None)
    made, judged = _spent_now(result)
    generation = _generation_spend(result, made)
    fresh = result.item.existing is None
    kept = fresh and not response.error and bool(response.text)
    if kept:
        fields.update(_generation_fields(response), error="", candidate_calls=calls.pack(made),
                      candidate_calls_sent=generation["candidate_calls_sent"],
                      candidate_cost_unknown=generation["candidate_cost_unknown"])
    judge = calls.spent(judged)
    lost = fresh and not kept and (bool(calls.spent(made)["calls"]) or generation["candidate_input_tokens"]
                                   or generation["candidate_output_tokens"])
    earlier = None
    if lost or judge["calls"]:
        earlier = dict(why="stopped", generation=bool(lost), **(generation if lost else {}),
                       judge_calls_sent=judge["sent"], judge_usage=_judge_usage_of(judge),
                       calls=calls.pack([*(made if lost else []), *judged]))
    return fields, _counters(generation, judge["sent"], _judge_usage_of(judge)), earlier


def _call_fields(result: ItemResult) -> dict:
    """The item's call log, candidate and judge calls apart; a re-judged item keeps its generation's calls."""
    made, judged = _spent_now(result)
    out = {"judge_calls": calls.pack(judged), "judge_calls_sent": calls.spent(judged)["sent"]}
    if result.item.existing is None:
        generation = _generation_spend(result, made)
        out.update(candidate_calls=calls.pack(made), candidate_calls_sent=generation["candidate_calls_sent"],
                   candidate_cost_unknown=generation["candidate_cost_unknown"])
    return out


def judge_counts(verdict_lists) -> dict:
    """Primary judge verdicts that answered and that failed, over stored ``PointAssessment.verdicts`` lists
    (what ``result_fields`` added to the run's judge counters)."""
    ok = failed = 0
    for verdicts in verdict_lists:
        for v in verdicts or ():
            if (v.get("role") or "primary") != "primary":
                continue
            if v.get("error") is None and v.get("score") is not None:
                ok += 1
            else:
                failed += 1
    return {"ok": ok, "failed": failed}


def result_fields(result: ItemResult) -> tuple[dict, dict, dict | None]:
    """The Response columns for a finished item, what it adds to the run's counters, and (an item a cancel
    stopped) the ``EarlierAttempt`` columns of what it spent and does not keep."""
    if result.stopped:
        return _stopped_fields(result)
    response, assessment = result.response, result.assessment
    failed = bool(response.error) or assessment is None
    verdicts = [v for pa in (assessment.point_assessments if assessment else ()) for v in pa.verdicts
                if v.role == "primary"]
    judge_ok = sum(1 for v in verdicts if v.ok)
    judge_failed = len(verdicts) - judge_ok
    # Every judge call failed: the engine left it not evaluated (judges_all_failed); it is failed too.
    failed = failed or assessment.judges_all_failed
    usage = assessment.judge_usage if assessment else None
    fields = dict(
        status=ResponseStatus.FAILED if failed else ResponseStatus.DONE, **_generation_fields(response),
        error=response.error or "", finished_at=timezone.now(), claimed_by="", claimed_at=None,
        fresh_requested=False,
    )
    if assessment is not None:
        fields.update(
            assessment_fields(assessment),
            judged_score=assessment.score, similarity=assessment.similarity,
            calculation=assessment.calculation.to_dict() if assessment.calculation else {},
            agreement=assessment.judge_agreement.to_upstream() if assessment.judge_agreement else {},
            judge_usage=usage.to_dict(), judge_errors=judge_failed,
            disagreement=any(pa.disagreement for pa in assessment.point_assessments),
        )
    else:
        fields.update(score=None, judged_score=None, not_evaluated_reason=response.error or "", verdict="",
                      verdict_reason="", score_before_gates=None, gates_failed=[], checks=[])
        if result.internal_error is not None:  # over its budget: what its calls spent stays on the response
            made, judged = _spent_now(result)
            generation = _generation_spend(result, made)
            usage = JudgeUsage.from_dict(_judge_usage_of(calls.spent(judged)))
            fields.update(judge_usage=usage.to_dict())
            if result.item.existing is None:
                fields.update(input_tokens=generation["candidate_input_tokens"],
                              output_tokens=generation["candidate_output_tokens"],
                              cost_usd=generation["candidate_cost_usd"])
            else:  # the kept generation's spending stays where it was counted
                for name in ("input_tokens", "output_tokens", "cost_usd"):
                    fields.pop(name)
    fields.update(_call_fields(result))
    # The generation counts once, when it is made (a re-judged item's was counted then); every call of unknown
    # price that was sent counts.
    counters = dict(items_done=1, items_failed=1 if failed else 0,
                    judge_calls_done=judge_ok, judge_calls_failed=judge_failed,
                    **_counters(_generation_spend(result, _spent_now(result)[0]), fields["judge_calls_sent"],
                                usage.to_dict() if usage else None))
    return fields, counters, None


# --- the judge plan ---------------------------------------------------------------------


def plan_to_json(plan: JudgePlan) -> dict:
    def spec(j: JudgeSpec | None):
        return None if j is None else {"id": j.id, "model": j.model, "approach": j.approach}

    return {"judges": [spec(j) for j in plan.judges], "backup": spec(plan.backup), "configured": plan.configured,
            "scale": plan.scale.name,
            # Only when the judges are asked more than once: a run asking once is stored as it always was.
            **({"repeats": plan.repeats} if plan.repeats > 1 else {})}


def plan_from_json(data: dict, bp: SpecBlueprint) -> JudgePlan:
    judges = tuple(JudgeSpec(**j) for j in data.get("judges", []))
    backup = JudgeSpec(**data["backup"]) if data.get("backup") else None
    scale = scale_for(bp.coverage)
    return JudgePlan(judges=judges, scale=scale, backup=backup, configured=data.get("configured", False),
                     description=bp.description, repeats=data.get("repeats") or 1)


# --- rows -> engine -----------------------------------------------------------------------


def _point_of(row: PointAssessment, authored: list[Point]) -> Point:
    """The authored point (it knows its check, minimum and label) when the revision still matches the row."""
    if row.position < len(authored):
        point = authored[row.position]
        if point.kind == row.kind and (point.path_id or "") == row.path_id and point.inverted == row.inverted:
            return point
    return Point(text=row.text or None, fn=row.fn or None, fn_args=row.fn_args,
                 has_args=row.fn_args is not None, multiplier=row.multiplier, citation=row.citation,
                 path_id=row.path_id or None, inverted=row.inverted)


def point_of(row: PointAssessment, authored: list[Point] = ()) -> EnginePoint:
    """One stored point assessment as the engine's value (without the reviewer's override)."""
    return EnginePoint(
        point=_point_of(row, list(authored)), score=row.score, raw_score=row.raw_score,
        reflection=row.reflection or None, error=row.error or None, warning=row.warning or None,
        judge_model_id=row.judge_model_id or None,
        verdicts=tuple(JudgeVerdict.from_dict(v) for v in row.verdicts or ()),
        judge_std_dev=row.judge_std_dev, disagreement=row.disagreement, backup_used=row.backup_used,
    )


def overrides_of(rows: list[PointAssessment]) -> dict[int, Override]:
    """The reviewers' overrides of a response's points, keyed by point index (rows need ``override`` loaded)."""
    out = {}
    for i, row in enumerate(rows):
        override = getattr(row, "override", None)
        if override is not None:
            out[i] = Override(score=override.score, reason=override.reason, who=override.who)
    return out


def assessment_of(response: Response, rows: list[PointAssessment], prompt: Prompt | None = None
                  ) -> ResponseAssessment:
    """A stored response as the engine's assessment, with its reviewers' overrides applied.

    ``rows`` are its point assessments in rubric order, with ``override`` loaded
    (``select_related("override")``); ``prompt``, the prompt as authored, lets an
    override work out the pass/fail verdict again.
    """
    authored = prompt.all_points() if prompt is not None else []
    points = tuple(point_of(row, authored) for row in rows)
    generation_error = None
    if not points and (response.error or response.not_evaluated_reason.startswith("Generation failed")):
        generation_error = response.not_evaluated_reason or f"Generation failed: {response.error}"
    assessed = ResponseAssessment(
        prompt_id=response.prompt_id, model_variant_id=response.variant_id, trial=response.trial,
        point_assessments=points, score=response.judged_score if points else response.score,
        score_basis=response.score_basis or None, not_evaluated_reason=response.not_evaluated_reason or None,
        calculation=calculate(points) if points else None, similarity=response.similarity,
        judge_agreement=JudgeAgreement.from_upstream(response.agreement) if response.agreement else None,
        judge_usage=JudgeUsage.from_dict(response.judge_usage or {}),
        generation_error=generation_error,
        verdict=response.verdict or None, verdict_reason=response.verdict_reason or None,
        score_before_gates=response.score_before_gates, gates_failed=tuple(response.gates_failed or ()),
        check_results=tuple(CheckResult.from_dict(c) for c in response.checks or ()),
    )
    return apply_overrides(assessed, overrides_of(rows), prompt)


# --- saving -----------------------------------------------------------------------------


class Stored(NamedTuple):
    """An item ``save_results`` stored: what a progress display needs."""

    pk: int
    status: str


def save_results(run_id: int, token: str, results: list[ItemResult]) -> list[Stored]:
    """Store finished items and move the run's counters, in one transaction.

    An item another worker has taken over (its claim is no longer ours) is dropped:
    its result, not ours, counts. An item a cancel stopped under way goes back to pending.
    One prepared UPDATE per shape of row and one INSERT for every point (``runs.bulk``).
    """
    saved: list[Stored] = []
    totals: dict[str, float] = {}
    assessments: list[dict] = []
    earlier: list[EarlierAttempt] = []
    prepared = [(result, *result_fields(result)) for result in results]
    with transaction.atomic():
        stored = update_each(Response, [(result.item.key, fields) for result, fields, _, _ in prepared],
                             where={"claimed_by": token})
        rejudged = [result.item.key for (result, _, _, _), ok in zip(prepared, stored)
                    if ok and not result.stopped and result.item.existing is not None]
        if rejudged:  # judged again: the earlier assessments give way
            PointAssessment.objects.filter(response_id__in=rejudged).delete()
        for (result, fields, counters, attempt), ok in zip(prepared, stored):
            if not ok:
                continue
            for name, value in counters.items():
                totals[name] = totals.get(name, 0) + value
            if attempt is not None:
                earlier.append(EarlierAttempt(run_id=run_id, response_id=result.item.key, **attempt))
            if result.stopped:  # cancelled under way: pending again, nothing scored
                continue
            if result.assessment is not None:
                assessments.extend(point_rows(result.item.key, result.assessment))
            saved.append(Stored(result.item.key, fields["status"]))
        insert(PointAssessment, assessments)
        if earlier:
            EarlierAttempt.objects.bulk_create(earlier)
        if totals or saved:
            add_to(Run, run_id, {"results_version": 1, **{k: v for k, v in totals.items() if v}})
    return saved


def supersede(run_id: int, response_ids, why: str, *, generation: bool) -> int:
    """Before a retry or a re-run does these responses again: what their last attempt spent becomes an earlier
    attempt of each (``EarlierAttempt``), so the run's totals keep every call that was sent; the response's own
    figures start again. ``generation``: its generation is done again too (else only its judging). Returns how
    many earlier attempts were recorded. Call it in the transaction that hands the items back."""
    columns = ("pk", "candidate_calls_sent", "input_tokens", "output_tokens", "cost_usd", "candidate_cost_unknown",
               "judge_calls_sent", "judge_usage", "judge_calls") + (("candidate_calls",) if generation else ())
    attempts = []
    for row in Response.objects.filter(run_id=run_id, pk__in=list(response_ids)).values_list(*columns):
        pk, made, tokens_in, tokens_out, cost, unknown, judged, usage, judge_blob = row[:9]
        usage = usage or {}
        if generation:
            blob = row[9]
            spent = made or tokens_in or tokens_out or cost or unknown or blob
            log = calls.pack([*calls.unpack(blob), *calls.unpack(judge_blob)]) if blob and judge_blob \
                else (blob or judge_blob)
        else:
            spent, log = False, judge_blob
        if not (spent or judged or usage.get("calls") or judge_blob):
            continue
        attempts.append(EarlierAttempt(
            run_id=run_id, response_id=pk, why=why, generation=generation, calls=log, judge_calls_sent=judged,
            judge_usage=usage,
            **(dict(candidate_calls_sent=made, candidate_input_tokens=tokens_in or 0,
                    candidate_output_tokens=tokens_out or 0, candidate_cost_usd=cost, candidate_cost_unknown=unknown)
               if generation else {})))
    EarlierAttempt.objects.bulk_create(attempts)
    cleared = dict(judge_usage={}, judge_calls_sent=0, judge_calls=None)
    if generation:
        cleared.update(input_tokens=None, output_tokens=None, cost_usd=None, latency_ms=None, candidate_calls_sent=0,
                       candidate_cost_unknown=0, candidate_calls=None)
    Response.objects.filter(run_id=run_id, pk__in=list(response_ids)).update(**cleared)
    return len(attempts)


# --- finishing --------------------------------------------------------------------------


def maybe_finish(run_id: int) -> bool:
    """Finish the run when no item is pending or running; after a cancel, at once.

    A cancelled run does not wait for items still running: a worker stuck in one may never come
    back. What such a worker stores later is added to the run's aggregates (execute_chunk), and
    an item whose worker never comes back goes back to pending when its lease lapses.
    """
    run = Run.objects.filter(pk=run_id).first()
    if run is None or run.is_finished:
        return True
    open_items = Response.objects.filter(run_id=run_id, status__in=[ResponseStatus.PENDING, ResponseStatus.RUNNING])
    if run.cancel_requested:
        # A cancel that came after the last item finished changes nothing: the run is done.
        return finish_run(run_id, RunStatus.CANCELLED if open_items.exists() else RunStatus.DONE)
    if open_items.exists():
        return False
    return finish_run(run_id)


def finish_run(run_id: int, status: str = RunStatus.DONE) -> bool:
    """Store the aggregates and the counters (the sum of what is stored) and mark the run finished;
    only one caller wins."""
    aggregates, totals, matrix = compute_aggregates(run_id, totals=True, final_status=status)
    with transaction.atomic():
        won = Run.objects.filter(pk=run_id).exclude(status__in=FINISHED).update(
            status=status, aggregates=aggregates, finished_at=timezone.now(), waiting={}, **totals)
    if won:
        _summarise(run_id, matrix)
        _look_into_later(run_id)
    return bool(won)


def _look_into_later(run_id: int) -> None:
    """With a summary writer configured, queue the finished run's summary (``runs.tasks.look_into``)."""
    if not settings.EVALSITE_SUMMARY_MODEL:
        return
    from django_q.tasks import async_task  # the broker's client: only when there is something to queue

    async_task("runs.tasks.look_into", run_id, task_name=f"run {run_id}: similarity and summary")


def _summarise(run_id: int, matrix: Matrix) -> None:
    """Store the finished run's summary for the pages across runs now, in the worker, so that no page has to
    build it (a stale or missing one is still rebuilt by the page that needs it; a failure here is logged).
    ``matrix``: the one the aggregates were read off, so it is not built twice."""
    # Imported here: its statistics (NumPy) are for finished runs, not for a process starting one (run_blueprint
    # imports it on a thread of its own while its calls wait).
    from .summaries import store_finished

    try:
        run = Run.objects.select_related("revision").get(pk=run_id)
        store_finished(run, matrix, critical=lambda prompts: critical_failed(run, prompts))
    except Exception:  # the run is finished and stored; its summary can wait for a page
        log.exception("run %s: its summary for the pages across runs was not stored", run_id)


def forget_matrix(run_id: int | None = None) -> None:
    """Drop what this process keeps of a run's matrix (None: of every run)."""
    with _MATRICES_LOCK:
        for key in [k for k in _MATRICES if run_id is None or k[0] == run_id]:
            del _MATRICES[key]
        for key in [k for k in _FIGURES if run_id is None or k[0] == run_id]:
            del _FIGURES[key]


def compute_aggregates(run_id: int, *, agreement: dict | None = None, totals: bool = False,
                       final_status: str | None = None):
    """Per model variant, per cell, overall, judge agreement (``runs.engine.aggregates``), from the stored rows.

    ``agreement`` reuses a known judge-agreement figure: a reviewer's override changes
    scores, never the judges' verdicts, so there is no need to read them all again.
    With ``totals``, also the run's counters as the sum of what is stored and the matrix the figures were read
    off: ``(aggregates, totals, matrix)``. ``final_status``: the status the run is about to be finished with
    (what still waits in a run finished as cancelled is "not run" in its stored figures too).
    """
    run = Run.objects.select_related("revision").get(pk=run_id)
    records = response_records(run_id, usage=True, reviews=False)
    spends = spends_of(run_id, records)
    ratings = []
    judged = {"ok": 0, "failed": 0}
    if agreement is None or totals:
        # The stdlib's decoder of the verdicts was half of a judged run's finish (``json_text``).
        for kind, verdicts in PointAssessment.objects.filter(response__run_id=run_id) \
                .values_list("kind", json_text("verdicts")):
            if not verdicts or verdicts == "[]":
                continue
            ok, failed, scored = primary_tally(jsonfast.loads(verdicts))
            judged["ok"] += ok
            judged["failed"] += failed
            if kind == "judged":
                ratings.append([Rating(judge.label, score, judge.model, judge.approach) for judge, score in scored])
    prompts = parsed_blueprint(run.revision).prompts
    stopped = final_status in STOPPED if final_status is not None else _stopped(run)
    matrix = build_matrix(records, prompts, stopped=stopped)
    aggregates = aggregates_of(matrix, records, agreement=agreement, ratings=ratings, spends=spends)
    store_cell_figures(run, matrix)
    if not totals:
        return aggregates
    return aggregates, stored_totals(records, judged, spends), matrix


def store_cell_figures(run: Run, matrix: Matrix) -> None:
    """Store what a comparison reads of ``run``'s matrix (``engine.matrix.cell_figures``, deal-breaker counts
    included) at the ``results_version`` read with the run, before its rows were: wherever its aggregates are
    worked out again (an override, a late worker after a cancel, a finish after a retry or a re-run), so are these.
    A change that moves the version without working them out leaves them stale: the comparison then builds the
    matrix (``cell_figures_for``); an annotation, which changes nothing they read, carries them along
    (``bump_results_keeping_cells``)."""
    RunCells.objects.update_or_create(run_id=run.pk, defaults={
        "results_version": run.results_version, "data": cell_figures_json(_figures_of(run, matrix, True))})


def bump_results_keeping_cells(run_id: int) -> None:
    """``bump_results`` for a change the stored cell figures do not read (an annotation: a cell's thumbs, not its
    scores, responses, trials or bounds): a stored form current before the bump is current after it, so the next
    comparison reads it instead of building both matrices. In the caller's transaction (the bump locks the run's
    row first, as an override's bump does before it stores the figures); a stale form stays stale."""
    bump_results(run_id)
    version = Run.objects.filter(pk=run_id).values_list("results_version", flat=True).first()
    if version is not None:
        RunCells.objects.filter(run_id=run_id, results_version=version - 1).update(results_version=version)


_FIGURES: OrderedDict[tuple, CellFigures] = OrderedDict()  # (run, results_version, status) -> its stored figures
_FIGURES_KEPT = 4


def cell_figures_for(run: Run, prompts, *, bounds: bool = False) -> CellFigures:
    """What a comparison reads of ``run``'s matrix (``engine.matrix.CellFigures``): off the whole matrix when this
    process keeps it; for a finished run (not re-running responses), else, the stored form when it was stored at
    the run's ``results_version`` (one row of a few hundred kilobytes where the matrix reads every response: 0.7 s
    and 1.5 s of CPU on a run of 100,000); else off the whole matrix (``run_matrix``), with its deal-breaker counts
    when ``bounds``. The last few read from their stored form are kept in this process."""
    kept = None
    if run.is_finished and not _rerunning(run):
        key = (run.pk, run.results_version, run.status)
        with _MATRICES_LOCK:
            kept, found = _MATRICES.get(key), _FIGURES.get(key)
        if found is not None:
            return found
        if kept is not None:
            return _figures_of(run, kept[1], bounds)
        found = cell_figures_of(_stored_cells(run), prompts)
        if found is not None:
            with _MATRICES_LOCK:
                _FIGURES[key] = found
                while len(_FIGURES) > _FIGURES_KEPT:
                    _FIGURES.popitem(last=False)
            return found
    return _figures_of(run, run_matrix(run, prompts), bounds)


def json_text(column: str) -> Cast:
    """A JSON column as its stored text, for ``jsonfast.loads``: the ORM's JSONField decodes through the standard
    library, several times slower on the columns a finish or a comparison reads whole."""
    return Cast(column, TextField())


def _stored_cells(run: Run) -> dict | None:
    """The run's stored cell figures at its ``results_version``, or None: read as text and decoded by orjson (the
    JSON field's own decoder took 25 ms of the 650 kB of a run of 100,000 responses, orjson 5)."""
    text = RunCells.objects.filter(run_id=run.pk, results_version=run.results_version) \
        .values_list(json_text("data"), flat=True).first()
    return None if text is None else jsonfast.loads(text)


def _figures_of(run: Run, matrix: Matrix, bounds: bool) -> CellFigures:
    counts = matrix_bounds(matrix, critical_failed=critical_failed(run, matrix.prompts)) if bounds else None
    return cell_figures(matrix, counts)


def spends_of(run_id: int, records: list[ResponseRecord]) -> list[Spend]:
    """What every attempt of the run's items spent: each response's own (``records``, read with ``usage``, and
    the calls it sent), and each earlier attempt's (``EarlierAttempt``)."""
    sent = {pk: (made, unknown, judged) for pk, made, unknown, judged in Response.objects.filter(run_id=run_id)
            .values_list("pk", "candidate_calls_sent", "candidate_cost_unknown", "judge_calls_sent")}
    out = []
    for r in records:
        made, unknown, judged = sent.get(r.response_id, (0, 0, 0))
        out.append(spend_of(r, calls_sent=made, cost_unknown=unknown, judge_calls_sent=judged))
    for row in EarlierAttempt.objects.filter(run_id=run_id).values_list(
            "response__variant_id", "candidate_calls_sent", "candidate_input_tokens", "candidate_output_tokens",
            "candidate_cost_usd", "candidate_cost_unknown", "judge_calls_sent", "judge_usage"):
        out.append(Spend(*row[:7], judge_usage=row[7] or {}))
    return out


def _review_marks() -> list[tuple[int, int]]:
    """(assessment, response) of every point a reviewer overrode or confirmed: what makes a point reviewed.

    From the marks to their points by key: as one join, SQLite walked every point assessment of every run to find
    the few marked (10-15 ms of each run page at 100,000 points, with no mark at all)."""
    marked = {*PointOverride.objects.values_list("assessment_id", flat=True),
              *PointConfirmation.objects.values_list("assessment_id", flat=True)}
    if not marked:
        return []
    return list(PointAssessment.objects.filter(pk__in=marked).values_list("pk", "response_id"))


def reviewed_blueprints(limit: int = 200) -> list[str]:
    """The ids of the blueprints with a reviewed point in any of their runs, in order."""
    from blueprints.models import Blueprint

    responses = {response for _, response in _review_marks()}
    if not responses:
        return []
    return list(Blueprint.objects.filter(runs__responses__in=responses).distinct().order_by("slug")
                .values_list("slug", flat=True)[:limit])


def reviewed_points(responses) -> Iterator[ReviewedPoint]:
    """The judged points of ``responses`` (a queryset) that a reviewer overrode or confirmed."""
    # From the few overrides and confirmations (people make them one by one), then which of their responses
    # are among ``responses``: never a walk over every point of the responses.
    marks = _review_marks()
    if not marks:
        return
    wanted = set(responses.filter(pk__in={response for _, response in marks}).values_list("pk", flat=True))
    reviewed = {assessment for assessment, response in marks if response in wanted}
    if not reviewed:
        return
    rows = (PointAssessment.objects.filter(pk__in=reviewed, kind="judged")
            .values_list("response_id", "response__run_id", "response__prompt_id", "response__variant_id",
                         "position", "key_point_text", "text", "inverted", "score", "verdicts", "override__score",
                         "confirmation__pk"))
    for (response_id, run_id, prompt_id, variant_id, position, key_text, text, inverted, score, verdicts, override,
         confirmation) in rows.iterator(chunk_size=2000):
        yield ReviewedPoint(run_id, response_id, position, prompt_id, variant_id, key_text or text, inverted, score,
                            tuple(JudgeVerdict.from_dict(v) for v in verdicts or ()), override,
                            confirmation is not None)


# --- rows -> the results matrix ------------------------------------------------------------

STOPPED = (RunStatus.CANCELLED, RunStatus.FAILED)  # what still waits in such a run will not run


def _rerunning(run: Run) -> bool:
    return isinstance(run.options, dict) and bool((run.options.get("reruns") or {}).get("returnsTo"))


def _stopped(run: Run) -> bool:
    """Whether what waits in this run will not run: it was cancelled or failed, or is re-running single
    responses on its way back to one of those (``work.rerun_stretch``)."""
    back = (run.options.get("reruns") or {}).get("returnsTo") if isinstance(run.options, dict) else None
    return run.status in STOPPED or back in STOPPED

_RECORD_COLUMNS = ("pk", "prompt_index", "variant_id", "trial", "status", "score", "latency_ms", "input_tokens",
                   "output_tokens", "cost_usd", "violated_should_not", "disagreement", "verdict", "error",
                   "not_evaluated_reason")


def response_records(run_id: int, *, indices=None, usage: bool = False, reviews: bool = True
                     ) -> list[ResponseRecord]:
    """Every response of a run (or of the prompts at ``indices``) as the matrix's records: one query for the
    responses' small columns, and with ``reviews`` one each for overridden responses and annotations.
    ``usage`` adds the judges' token and cost use (a JSON column: only the stored aggregates need it)."""
    rows = Response.objects.filter(run_id=run_id)
    overrides = PointOverride.objects.filter(assessment__response__run_id=run_id)
    notes = Annotation.objects.filter(response__run_id=run_id)
    if indices is not None:
        indices = list(indices)
        rows = rows.filter(prompt_index__in=indices)
        overrides = overrides.filter(assessment__response__prompt_index__in=indices)
        notes = notes.filter(response__prompt_index__in=indices)
    overridden: set[int] = set()
    thumbs: dict[int, int] = {}
    if reviews:
        overridden = set(overrides.values_list("assessment__response_id", flat=True))
        thumbs = {pk: value or 0 for pk, value in notes.values_list("response_id", "thumbs")}
    # The judges' usage read by jsonfast, the empty one not at all (the stdlib's decoder was a third of reading a
    # finished run's rows).
    columns = _RECORD_COLUMNS + ((json_text("judge_usage"),) if usage else ())
    out = []
    # The same few strings (variant ids, statuses, verdicts, reasons) come back from the database once per row: one
    # copy of each, and one empty usage (never written to), keep a big run's kept matrix compact.
    shared: dict[str, str] = {}
    one = shared.setdefault
    no_usage: dict = {}
    for row in rows.order_by("prompt_index", "variant_id", "trial").values_list(*columns):
        (pk, index, variant_id, trial, status, score, latency, tokens_in, tokens_out, cost, violated, disagreement,
         verdict, error, reason) = row[:15]
        out.append(ResponseRecord(
            prompt_index=index, variant_id=one(variant_id, variant_id), trial=trial, score=score,
            status=one(status, status), failed=status == ResponseStatus.FAILED, response_id=pk, latency_ms=latency,
            input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost,
            judge_usage=_usage_of(row[15], no_usage) if usage else no_usage,
            violated_should_not=violated, disagreement=disagreement, verdict=one(verdict, verdict) if verdict else None,
            overridden=pk in overridden, thumbs=thumbs.get(pk), reason=one(text := error or reason or "", text)))
    return out


def _usage_of(stored: str | None, empty: dict) -> dict:
    """A response's stored judge usage (JSON text), ``empty`` for none."""
    if not stored or stored == "{}":
        return empty
    return jsonfast.loads(stored) or empty


_MATRICES: OrderedDict[tuple, tuple[float, Matrix, int]] = OrderedDict()  # key -> (built at, matrix, bytes)
_MATRICES_LOCK = threading.Lock()
_BUILDING: dict[int, threading.Lock] = {}  # one lock per run whose matrix is being built

# What one kept matrix holds, in bytes (CPython 3.11, 64-bit), measured with tracemalloc by
# tests/runs/test_matrix_cache.py, which fails when the estimate strays: a response's record (a slotted
# ResponseRecord with its floats and ints; its variant id, status and reason strings are shared, see
# response_records), a cell (the Cell, its CellOutcome and trial outcomes, its key, its list of trials), and
# what the pages later keep with a cell (its heatmap HTML, its place in the row lists).
RECORD_BYTES = 250
CELL_BYTES = 560
CELL_PAGE_BYTES = 150


def matrix_size(matrix: Matrix) -> int:
    """An honest estimate of the memory a kept matrix takes, in bytes: by its records and cells (what pages
    keep with it later, its cells' heatmap HTML, counted in)."""
    records = sum(len(cell.trials) for cell in matrix.cells.values())
    return records * RECORD_BYTES + len(matrix.cells) * (CELL_BYTES + CELL_PAGE_BYTES)


def _matrix_budget() -> int:
    return int(settings.EVALSITE_MATRIX_CACHE_MB * 2**20)


def kept_matrices() -> tuple[int, int]:
    """How many matrices this process keeps, and their estimated bytes (``matrix_size``)."""
    with _MATRICES_LOCK:
        return len(_MATRICES), sum(size for _, _, size in _MATRICES.values())


def _keep(key: tuple, now: float, matrix: Matrix) -> None:
    """Keep ``matrix`` (and no other of its run), then drop the least recently used until the kept ones fit in
    ``EVALSITE_MATRIX_CACHE_MB``. A matrix larger than the whole budget is not kept: its pages build it again."""
    size = matrix_size(matrix)
    with _MATRICES_LOCK:
        # What the run's rows were before (another version or status), and its pages once its whole matrix is here.
        for old in [k for k in _MATRICES if k[0] == key[0] and (k[1:3] != key[1:3] or len(key) == 3)]:
            del _MATRICES[old]
        budget = _matrix_budget()
        if size > budget:
            return
        _MATRICES[key] = (now, matrix, size)
        total = sum(kept for _, _, kept in _MATRICES.values())
        while total > budget:
            _, (_, _, dropped) = _MATRICES.popitem(last=False)
            total -= dropped
        if len(_BUILDING) > 64:  # locks of runs no longer kept
            for pk in [pk for pk in _BUILDING if pk != key[0] and not any(k[0] == pk for k in _MATRICES)]:
                _BUILDING.pop(pk, None)


LIVE_MATRIX_S = 1.0  # a working run's matrix serves the requests of this long (its viewers poll every 2 s)


def run_matrix(run: Run, prompts, *, indices=None) -> Matrix:
    """The run's results matrix from its stored rows (``indices``: only those prompts' rows; their cells are
    whole, the per-model figures then cover only them).

    The last few matrices are kept in this process, keyed by the run's ``results_version`` and status: every
    change to what a matrix is built from (an item stored, an override, an annotation) moves the version in
    the same transaction. A finished run's kept matrix is therefore never out of date. A working run's also
    changes as workers claim items (pending -> running, which moves no version), so it is kept for at most
    ``LIVE_MATRIX_S``: the several viewers of one run share it, and the poll's 5 s overlap picks up the rest.
    What is kept is bounded by its estimated size (``EVALSITE_MATRIX_CACHE_MB``), least recently used first out.
    """
    from evalsite.deadline import check as page_time_left

    if indices is not None or _rerunning(run):
        page_time_left("building this run's results")
        return build_matrix(response_records(run.pk, indices=indices), prompts, stopped=_stopped(run))
    key = (run.pk, run.results_version, run.status)  # a run's revision, so its prompts, never change
    # One build per run at a time in this process: the other requests for it wait for that build instead of
    # each building their own (20 viewers of a cold 10,000-cell run would otherwise build it 20 times at once).
    with _MATRICES_LOCK:
        building = _BUILDING.setdefault(run.pk, threading.Lock())
    with building:
        now = time.monotonic()
        with _MATRICES_LOCK:
            kept = _MATRICES.get(key)
            if kept is not None and (run.is_finished or now - kept[0] <= LIVE_MATRIX_S):
                _MATRICES.move_to_end(key)
                return kept[1]
        page_time_left("building this run's results")  # a page that waited its time out for the build stops
        matrix = build_matrix(response_records(run.pk), prompts, stopped=_stopped(run))
        _keep(key, now, matrix)
    return matrix


#: The keys of the stored aggregates a page matrix reads (``engine.aggregates.summaries_of``).
WHOLE_FIGURES = ("variants", "promptsWithCells", "cellsOfPrompts")


def figure_columns(keys=WHOLE_FIGURES) -> dict:
    """Those keys of a run's stored aggregates as columns of a query (``figure_<key>``), picked out by the
    database: never the per-cell figures beside them (megabytes of JSON on a run of 100,000 responses)."""
    return {f"figure_{k}": KeyTransform(k, "aggregates") for k in keys}


def stored_figures(run_id: int, keys=WHOLE_FIGURES) -> dict:
    """Those keys of a run's stored aggregates (``figure_columns``)."""
    row = Run.objects.filter(pk=run_id).values(**figure_columns(keys)).first()
    return {k: (row or {}).get(f"figure_{k}") for k in keys}


def page_matrix(run: Run, prompts, indices, stored: dict | None = None, *, every: bool = False) -> Matrix:
    """The cells of the prompts at ``indices`` with the whole run's columns, means, pass counts and intervals: what
    a page of a finished run's cells shows. The whole matrix when this process keeps it; else, when the run's
    stored aggregates (``stored``: their ``WHOLE_FIGURES``, read here when not given) carry them, only those
    prompts' rows are read (``engine.matrix.page_matrix``: a page of a run of 100,000 responses reads 5,000 rows,
    not all); else the whole matrix (``run_matrix``). ``every``: the page also needs to know which prompts have a
    cell (``Matrix.prompts_with_cells``). A run not finished has no stored figures to go by."""
    if not run.is_finished or _rerunning(run):
        return run_matrix(run, prompts)
    key = (run.pk, run.results_version, run.status)
    page_key = (*key, ("page", every, tuple(indices)))
    with _MATRICES_LOCK:
        kept = _MATRICES.get(key) or _MATRICES.get(page_key)
        if kept is not None:
            _MATRICES.move_to_end(key if key in _MATRICES else page_key)
            return kept[1]
    whole = summaries_of(stored if stored is not None else stored_figures(run.pk), len(prompts))
    if whole is None or (every and whole.cells_of_prompts is None):
        return run_matrix(run, prompts)
    from evalsite.deadline import check as page_time_left

    page_time_left("reading this page of the run's results")
    matrix = build_page_matrix(response_records(run.pk, indices=indices), prompts, whole, stopped=_stopped(run))
    _keep(page_key, time.monotonic(), matrix)  # kept as the whole ones are, until the run's rows change
    return matrix


def bump_results(run_id: int) -> None:
    """Say that something a run's matrix is built from changed (an override, an annotation)."""
    Run.objects.filter(pk=run_id).update(results_version=F("results_version") + 1)


# --- what the findings and scanners read -------------------------------------------------------------------------

UNREADABLE = "unreadable answer"  # how a judge's verdict that could not be read begins (engine/judge.py)


def point_records(run_id: int) -> tuple[list[FindingPoint], dict[int, tuple[int, int]]]:
    """Every point assessment of a run as the findings read it, and per response ``(judge answers, unreadable
    ones)`` for the scanners. Reads the columns it needs, no model objects."""
    points, judged = [], {}
    rows = PointAssessment.objects.filter(response__run_id=run_id).values_list(
        "response_id", "response__prompt_id", "response__variant_id", "response__trial", "kind", "text", "fn",
        "inverted", "score", "raw_score", "verdicts", "error")
    for response_id, prompt_id, variant_id, trial, kind, text, fn, inverted, score, raw, verdicts, error in \
            rows.iterator(chunk_size=2000):
        verdicts = verdicts or []
        said = tuple(JudgeSaid(str(v.get("judgeId") or v.get("model") or ""), v.get("score"),
                               str(v.get("reflection") or "")) for v in verdicts if v.get("score") is not None)
        unreadable = sum(1 for v in verdicts if str(v.get("error") or "").startswith(UNREADABLE))
        answers, bad = judged.get(response_id, (0, 0))
        judged[response_id] = (answers + len(verdicts), bad + unreadable)
        met = raw if inverted else score
        points.append(FindingPoint(prompt_id, variant_id, trial, text or fn, bool(inverted), met, said,
                                   error or None))
    return points, judged


def scan_answers(run: Run, prompts, judged: dict[int, tuple[int, int]]) -> list[ScanAnswer]:
    """Every response of a run as the scanners read it: its prompt's last user message, its final answer (None
    when generation failed), the finish reasons its calls gave, and its judges' answers counted."""
    asked = {}
    for prompt in prompts:
        users = [m.content for m in prompt.messages if m.role == "user" and m.content]
        asked[prompt.id] = users[-1] if users else ""
    max_tokens = (run.options or {}).get("max_tokens")
    out = []
    rows = Response.objects.filter(run_id=run.pk, status__in=(ResponseStatus.DONE, ResponseStatus.FAILED)).values_list(
        "pk", "prompt_id", "variant_id", "trial", "final_text", "error", "output_tokens", "candidate_calls")
    for pk, prompt_id, variant_id, trial, final_text, error, output_tokens, blob in rows.iterator(chunk_size=500):
        reasons = tuple(c.get("finish_reason") for c in calls.unpack(blob) if c.get("purpose", "candidate")
                        == "candidate")
        answers, unreadable = judged.get(pk, (0, 0))
        out.append(ScanAnswer(prompt_id, variant_id, trial, asked.get(prompt_id, ""),
                              None if error else (final_text or ""), reasons, output_tokens,
                              max_tokens if isinstance(max_tokens, int) else None, answers, unreadable))
    return out


def critical_failed(run: Run, prompts) -> set[int]:
    """Ids of ``run``'s responses that failed a point marked ``critical: true`` (its final score, a reviewer's
    override applied, below 0.5), read at the critical points' stored positions only."""
    positions = critical_positions(prompts)
    if not positions:
        return set()
    where = Q()
    for index, found in positions.items():
        where |= Q(response__prompt_index=index, position__in=found)
    rows = (PointAssessment.objects.filter(where, response__run_id=run.pk)
            .values_list("response_id", "score", "override__score"))
    final = ((pk, override if override is not None else score) for pk, score, override in rows)
    return {pk for pk, score in final if score is not None and score < 0.5}


# --- what would flip a decision (runs/engine/robustness.py) ----------------------------------------------------------


def robustness_answers(run: Run, matrix: Matrix):
    """Every response of a run as ``robustness.Answer``: the matrix's records and each response's point rows with
    each primary judge's first answer, read in one query of the columns it needs (no model objects; the verdicts'
    JSON is read here, without the ORM's per-row converters: a 10,000-response run has 30,000 and more rows)."""
    import json

    from django.db import connection

    from runs.engine.robustness import PointRow, stored_answers

    points: dict[int, list] = {}
    query = (PointAssessment.objects.filter(response__run_id=run.pk).order_by("response_id", "position")
             .values_list("response_id", "kind", "path_id", "multiplier", "inverted", "score", "verdicts",
                          "override__score"))
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(5000):
            for response_id, kind, path_id, multiplier, inverted, score, verdicts, override in rows:
                if isinstance(verdicts, (str, bytes)):
                    verdicts = json.loads(verdicts)
                judges = tuple((str(v.get("judgeId") or ""), v.get("score") if v.get("error") is None else None)
                               for v in verdicts or () if isinstance(v, dict)
                               and (v.get("role") or "primary") == "primary" and not v.get("repeat"))
                points.setdefault(response_id, []).append(PointRow(
                    kind, path_id or None, multiplier, bool(inverted),
                    override if override is not None else score, judges, override is not None))
    return stored_answers((t for cell in matrix.cells.values() for t in cell.trials), points)


def final_answers(run_id: int, prompt_ids=None) -> dict[tuple[str, str], str]:
    """(prompt id, variant id) -> the final answer of the first trial, for the answers that have one (not failed,
    not empty); ``prompt_ids``: only those prompts. What the summary quotes and the similarity embeds."""
    rows = Response.objects.filter(run_id=run_id, trial=0, error="").exclude(final_text__isnull=True)
    if prompt_ids is not None:
        rows = rows.filter(prompt_id__in=list(prompt_ids))
    return {(p, v): t for p, v, t in rows.values_list("prompt_id", "variant_id", "final_text") if t and t.strip()}
