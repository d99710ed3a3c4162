"""A run as a file: JSON in the upstream's result-file layout, or CSV with one row per point assessment.

JSON follows reference section 5.11 so tools written for Weval's result files
can read ours: ``evaluationResults.llmCoverageScores[promptId][modelId]`` holds
``avgCoverageExtent`` (2 places, reviewer overrides applied) and
``pointAssessments``. Everything only evalsite knows (trials, failed judges,
original scores under overrides, cache hits, costs, agreement) goes under the
top-level ``evalsite`` key. No API key can appear: none is ever stored.
"""

from __future__ import annotations

import csv
import io
import json

from runs.engine.scoring import calculate, round2
from runs.engine.scoring import ScoredPoint

from .models import PointAssessment, Response, Run
from .services import parsed_blueprint

IDEAL_MODEL_ID = "IDEAL_BENCHMARK"


def _timestamp(run: Run) -> str:
    when = run.finished_at or run.started_at or run.created_at
    return when.strftime("%Y-%m-%dT%H-%M-%S-") + f"{when.microsecond // 1000:03d}Z"


def _point_json(pa: PointAssessment) -> dict:
    override = getattr(pa, "override", None)
    score = override.score if override is not None else pa.score
    out: dict = {"keyPointText": pa.key_point_text}
    if score is not None:
        out["coverageExtent"] = score
    if pa.reflection:
        out["reflection"] = pa.reflection
    out["multiplier"] = pa.multiplier
    if pa.citation is not None:
        out["citation"] = pa.citation
    if pa.path_id:
        out["pathId"] = pa.path_id
    out["isInverted"] = pa.inverted
    if pa.kind == "judged":
        if pa.judge_model_id:
            out["judgeModelId"] = pa.judge_model_id
        answered = [v for v in pa.verdicts if v.get("score") is not None and not v.get("error")]
        if answered:
            out["individualJudgements"] = [
                {"judgeModelId": v["judgeId"], "coverageExtent": v["score"], "reflection": v.get("reflection") or ""}
                for v in answered
            ]
    if pa.error or pa.warning:
        out["error"] = pa.error or pa.warning
    return out


def response_score(response: Response, assessments: list[PointAssessment], *, recompute: bool = False
                   ) -> float | None:
    """The response's score with overrides applied (the judges' score when there are none)."""
    if response.score_basis == "similarity" or not assessments:
        return response.score
    if not recompute and (response.verdict or response.checks):
        return response.score  # gates apply: the stored score (kept up to date by overrides) is the one
    if not any(getattr(pa, "override", None) is not None for pa in assessments):
        return response.judged_score
    points = [ScoredPoint(score=pa.effective_score, multiplier=pa.multiplier, path_id=pa.path_id or None)
              for pa in assessments]
    score = calculate(points).score
    return round2(score) if score is not None else None


def assessments_by_response(run: Run) -> dict[int, list[PointAssessment]]:
    """Every assessment of a run (with its override), grouped by response, in rubric order."""
    out: dict[int, list[PointAssessment]] = {}
    for pa in PointAssessment.objects.filter(response__run=run).select_related("override").order_by(
            "response_id", "position"):
        out.setdefault(pa.response_id, []).append(pa)
    return out


def run_to_json(run: Run) -> dict:
    bp = parsed_blueprint(run.revision)
    responses = list(Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial"))
    assessments = assessments_by_response(run)

    coverage: dict[str, dict[str, dict]] = {}
    finals: dict[str, dict[str, str | None]] = {}
    histories: dict[str, dict[str, list]] = {}
    errors: dict[str, dict[str, str]] = {}
    extras: dict[str, dict[str, dict]] = {}
    for r in responses:
        points = assessments.get(r.pk, [])
        score = response_score(r, points)
        extras.setdefault(r.prompt_id, {}).setdefault(r.variant_id, {"trials": []})["trials"].append({
            "trial": r.trial, "status": r.status, "score": score, "judgedScore": r.judged_score,
            "scoreBasis": r.score_basis or None, "notEvaluatedReason": r.not_evaluated_reason or None,
            "similarity": r.similarity, "cached": r.cached, "latencyMs": r.latency_ms,
            "inputTokens": r.input_tokens, "outputTokens": r.output_tokens, "costUsd": r.cost_usd,
            "toolCalls": r.tool_calls, "calculation": r.calculation or None, "judgeUsage": r.judge_usage or None,
            **({"verdict": r.verdict or None, "verdictReason": r.verdict_reason or None,
                "scoreBeforeGates": r.score_before_gates, "gatesFailed": r.gates_failed, "checks": r.checks}
               if (r.verdict or r.checks) else {}),
            "points": [{
                "index": pa.position, "kind": pa.kind, "score": pa.effective_score, "judgesScore": pa.score,
                "overridden": getattr(pa, "override", None) is not None,
                "override": ({"score": pa.override.score, "reason": pa.override.reason, "who": pa.override.who}
                             if getattr(pa, "override", None) is not None else None),
                "failedJudges": [v for v in pa.verdicts if v.get("error")], "judgeStdDev": pa.judge_std_dev,
                "disagreement": pa.disagreement, "backupUsed": pa.backup_used,
                "judges": [{k: v.get(k) for k in ("judgeId", "model", "score", "latencyMs", "inputTokens",
                                                  "outputTokens", "costUsd", "cached", "rawAnswers", "error")}
                           for v in pa.verdicts],
            } for pa in points],
        })
        if r.trial:  # the upstream layout has one response per prompt and model: trial 0
            continue
        if r.error:
            errors.setdefault(r.prompt_id, {})[r.variant_id] = r.error
        finals.setdefault(r.prompt_id, {})[r.variant_id] = r.final_text
        histories.setdefault(r.prompt_id, {})[r.variant_id] = [
            {"role": t["role"], "content": t["content"]} for t in r.conversation]
        entry: dict = {"avgCoverageExtent": score if r.score_basis != "similarity" else None}
        if points or not r.error:
            entry["keyPointsCount"] = len(points)
            entry["pointAssessments"] = [_point_json(pa) for pa in points]
        if r.agreement:
            entry["judgeAgreement"] = r.agreement
        if score is None and (r.not_evaluated_reason or r.error):
            entry["error"] = r.not_evaluated_reason or r.error
        coverage.setdefault(r.prompt_id, {})[r.variant_id] = entry

    for prompt in bp.prompts:
        if prompt.ideal_response is not None:
            finals.setdefault(prompt.id, {})[IDEAL_MODEL_ID] = prompt.ideal_response
    effective = sorted({r.variant_id for r in responses})
    if any(p.ideal_response is not None for p in bp.prompts):
        effective.append(IDEAL_MODEL_ID)
    system_of = {}
    for r in responses:
        if r.trial == 0 and r.variant_id not in system_of:
            first = r.conversation[0] if r.conversation else None
            system_of[r.variant_id] = first["content"] if first and first["role"] == "system" else None
    config = bp.to_upstream()
    config["id"] = run.blueprint.slug
    config["models"] = run.resolved_models
    out = {
        "configId": run.blueprint.slug,
        "configTitle": bp.title or run.blueprint.slug,
        "runLabel": run.label,
        "timestamp": _timestamp(run),
        "description": bp.description,
        "config": config,
        "evalMethodsUsed": ["llm-coverage"] + (["embedding"] if any(r.similarity is not None for r in responses)
                                                else []),
        "effectiveModels": effective,
        "modelSystemPrompts": system_of,
        "promptIds": sorted(p.id for p in bp.prompts),
        "promptContexts": {p.id: [m.model_dump() for m in p.messages] for p in bp.prompts},
        "allFinalAssistantResponses": finals,
        "fullConversationHistories": histories,
        "evaluationResults": {"llmCoverageScores": coverage},
        "evalsite": {
            "runId": run.pk,
            "status": run.status,
            "revision": run.revision.number,
            "revisionSha256": run.revision.sha256,
            "judges": run.judges,
            "options": run.options,
            "aggregates": run.aggregates,
            "counters": {k: getattr(run, k) for k in (
                "items_total", "items_done", "items_failed", "judge_calls_total", "judge_calls_done",
                "judge_calls_failed")},
            "usage": {
                "candidates": {"inputTokens": run.candidate_input_tokens, "outputTokens": run.candidate_output_tokens,
                               "costUsd": run.candidate_cost_usd, "callsWithUnknownCost": run.candidate_cost_unknown},
                "judges": {"inputTokens": run.judge_input_tokens, "outputTokens": run.judge_output_tokens,
                           "costUsd": run.judge_cost_usd, "callsWithUnknownCost": run.judge_cost_unknown},
            },
            "responses": extras,
        },
    }
    if errors:
        out["errors"] = errors
    return out


CSV_COLUMNS = ["run_id", "prompt_id", "model_id", "trial", "response_score", "point_index", "kind", "key_point",
               "path_id", "inverted", "multiplier", "score", "judges_score", "overridden", "reflection", "error",
               "judges", "disagreement"]


def run_to_csv(run: Run) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    responses = Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial")
    assessments = assessments_by_response(run)
    for r in responses:
        points = assessments.get(r.pk, [])
        score = response_score(r, points)
        if not points:
            writer.writerow([run.pk, r.prompt_id, r.variant_id, r.trial, _num(score), "", "", "", "", "", "", "", "",
                             "", "", r.error or r.not_evaluated_reason, "", ""])
        for pa in points:
            override = getattr(pa, "override", None)
            judges = "; ".join(f"{v['judgeId']}={_num(v.get('score'))}" if not v.get("error") else
                               f"{v['judgeId']}=error" for v in pa.verdicts)
            writer.writerow([run.pk, r.prompt_id, r.variant_id, r.trial, _num(score), pa.position, pa.kind,
                             pa.key_point_text, pa.path_id, int(pa.inverted), pa.multiplier,
                             _num(pa.effective_score), _num(pa.score), int(override is not None), pa.reflection,
                             pa.error or pa.warning, judges, int(pa.disagreement)])
    return buffer.getvalue()


def _num(value) -> str:
    return "" if value is None else json.dumps(value)
