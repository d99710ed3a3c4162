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

from runs.engine.export_shape import evalsite_details, export_response

from .models import Annotation, PointAssessment, Response, Run
from .records import assessment_of
from .spec import parsed_blueprint

IDEAL_MODEL_ID = "IDEAL_BENCHMARK"


def _timestamp(run: Run) -> str:
    when = run.finished_at or run.started_at or run.created_at
    return when.strftime("%Y-%m-%dT%H-%M-%S-") + f"{when.microsecond // 1000:03d}Z"


def assessments_by_response(run: Run) -> dict[int, list[PointAssessment]]:
    """Every assessment of a run (with its override), grouped by response, in rubric order."""
    out: dict[int, list[PointAssessment]] = {}
    for pa in PointAssessment.objects.filter(response__run=run).select_related("override").order_by(
            "response_id", "position"):
        out.setdefault(pa.response_id, []).append(pa)
    return out


def annotations_by_response(run: Run) -> dict[int, Annotation]:
    return {a.response_id: a for a in Annotation.objects.filter(response__run=run)}


def run_to_json(run: Run) -> dict:
    bp = parsed_blueprint(run.revision)
    responses = list(Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial"))
    assessments = assessments_by_response(run)
    notes = annotations_by_response(run)

    coverage: dict[str, dict[str, dict]] = {}
    finals: dict[str, dict[str, str | None]] = {}
    histories: dict[str, dict[str, list]] = {}
    errors: dict[str, dict[str, str]] = {}
    extras: dict[str, dict[str, dict]] = {}
    for r in responses:
        assessed = assessment_of(r, assessments.get(r.pk, []), run.prompt(r.prompt_index, bp))
        extras.setdefault(r.prompt_id, {}).setdefault(r.variant_id, {"trials": []})["trials"].append({
            "trial": r.trial, "status": r.status, "cached": r.cached, "latencyMs": r.latency_ms,
            "inputTokens": r.input_tokens, "outputTokens": r.output_tokens, "costUsd": r.cost_usd,
            "toolCalls": r.tool_calls, **evalsite_details(assessed),
            "annotation": notes[r.pk].to_export() if r.pk in notes else None,
        })
        if r.trial:  # the upstream layout has one response per prompt and model: trial 0
            continue
        if r.error:
            errors.setdefault(r.prompt_id, {})[r.variant_id] = r.error
        finals.setdefault(r.prompt_id, {})[r.variant_id] = r.final_text
        histories.setdefault(r.prompt_id, {})[r.variant_id] = [
            {"role": t["role"], "content": t["content"]} for t in r.conversation]
        coverage.setdefault(r.prompt_id, {})[r.variant_id] = export_response(assessed)

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
               "judges", "disagreement", "thumbs", "comment"]


def run_to_csv(run: Run) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    responses = Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial")
    assessments = assessments_by_response(run)
    notes = annotations_by_response(run)
    bp = parsed_blueprint(run.revision)
    for r in responses:
        note = notes[r.pk].to_export() if r.pk in notes else {"thumbs": None, "comment": ""}
        annotated = [note["thumbs"] or "", note["comment"]]
        points = assessments.get(r.pk, [])
        assessed = assessment_of(r, points, run.prompt(r.prompt_index, bp))
        score = assessed.score
        if not points:
            writer.writerow([run.pk, r.prompt_id, r.variant_id, r.trial, _num(score), "", "", "", "", "", "", "", "",
                             "", "", r.error or r.not_evaluated_reason, "", "", *annotated])
        for pa in points:
            override = getattr(pa, "override", None)
            judges = "; ".join(f"{v['judgeId']}={_num(v.get('score'))}" if not v.get("error") else
                               f"{v['judgeId']}=error" for v in pa.verdicts)
            writer.writerow([run.pk, r.prompt_id, r.variant_id, r.trial, _num(score), pa.position, pa.kind,
                             pa.key_point_text, pa.path_id, int(pa.inverted), pa.multiplier,
                             _num(pa.effective_score), _num(pa.score), int(override is not None), pa.reflection,
                             pa.error or pa.warning, judges, int(pa.disagreement), *annotated])
    return buffer.getvalue()


def _num(value) -> str:
    return "" if value is None else json.dumps(value)
