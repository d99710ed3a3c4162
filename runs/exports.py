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

from runs.engine.export_shape import evalsite_details, export_cell, export_response
from runs.engine.judge import verdict_name
from runs.engine.matrix import PASS_LABELS, STATE_LABELS

from .models import Annotation, PointAssessment, Response, Run
from .records import assessment_of, run_matrix
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
    matrix = run_matrix(run, bp.prompts)
    shown = {c.response_id for c in matrix.cells.values()}

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
        if r.pk not in shown:  # the upstream layout has one response per prompt and model: the cell's
            continue
        cell = matrix.cell(r.prompt_index, r.variant_id)
        if r.error:
            errors.setdefault(r.prompt_id, {})[r.variant_id] = r.error
        finals.setdefault(r.prompt_id, {})[r.variant_id] = r.final_text
        histories.setdefault(r.prompt_id, {})[r.variant_id] = [
            {"role": t["role"], "content": t["content"]} for t in r.conversation]
        coverage.setdefault(r.prompt_id, {})[r.variant_id] = export_cell(export_response(assessed), cell.score,
                                                                         cell.k)
    for cell in matrix.cells.values():
        extra = extras.get(cell.prompt_id, {}).get(cell.variant_id)
        if extra is not None:
            extra.update({"cellScore": cell.shown, "state": cell.state, "aggregation": cell.outcome.aggregation,
                          "shownTrial": cell.shown_trial, "passed": cell.passed, "passState": cell.pass_state})

    for prompt in bp.prompts:
        if prompt.ideal_response is not None:
            finals.setdefault(prompt.id, {})[IDEAL_MODEL_ID] = prompt.ideal_response
    effective = sorted({r.variant_id for r in responses})
    if any(p.ideal_response is not None for p in bp.prompts):
        effective.append(IDEAL_MODEL_ID)
    system_of = {}
    for r in responses:
        if r.pk in shown and r.variant_id not in system_of:
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
            "options": {k: v for k, v in (run.options or {}).items() if k != "reruns"},  # bookkeeping of re-runs
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
               "judges", "disagreement", "thumbs", "comment", "cell_score", "cell_state", "prompt_text",
               "response_text", "cell_passed"]  # columns are only ever added at the end


def prompt_text(prompt) -> str:
    """A prompt's messages as one readable text (``role: content`` a message, a blank line between)."""
    if prompt is None:
        return ""
    return "\n\n".join(f"{m.role}: {m.content if m.content is not None else '(to be generated)'}"
                        for m in prompt.messages)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value) -> str:
    """A CSV cell that a spreadsheet will not run (OWASP's CSV injection advice): text starting with
    ``= + - @``, a tab or a carriage return gets a leading single quote. Every CSV we write goes through it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _writer(buffer):
    writer = csv.writer(buffer, lineterminator="\n")
    return lambda row: writer.writerow([safe_cell(v) for v in row])


def run_to_csv(run: Run) -> str:
    buffer = io.StringIO()
    write = _writer(buffer)
    write(CSV_COLUMNS)
    responses = Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial")
    assessments = assessments_by_response(run)
    notes = annotations_by_response(run)
    bp = parsed_blueprint(run.revision)
    matrix = run_matrix(run, bp.prompts)
    texts: dict[int, str] = {}
    for r in responses:
        note = notes[r.pk].to_export() if r.pk in notes else {"thumbs": None, "comment": ""}
        cell = matrix.cell(r.prompt_index, r.variant_id)
        prompt = run.prompt(r.prompt_index, bp)
        if r.prompt_index not in texts:
            texts[r.prompt_index] = prompt_text(prompt)
        tail = [note["thumbs"] or "", note["comment"], _num(cell.shown if cell else None),
                STATE_LABELS.get(cell.state, "") if cell else "", texts[r.prompt_index], r.text or "",
                PASS_LABELS[cell.pass_state] if cell else ""]
        points = assessments.get(r.pk, [])
        assessed = assessment_of(r, points, prompt)
        score = assessed.score
        if not points:
            write([run.pk, r.prompt_id, r.variant_id, r.trial, _num(score), "", "", "", "", "", "", "", "",
                   "", "", r.error or r.not_evaluated_reason, "", "", *tail])
        for pa in points:
            override = getattr(pa, "override", None)
            judges = "; ".join(f"{verdict_name(v)}={_num(v.get('score'))}" if not v.get("error") else
                               f"{verdict_name(v)}=error" for v in pa.verdicts)
            write([run.pk, r.prompt_id, r.variant_id, r.trial, _num(score), pa.position, pa.kind,
                   pa.key_point_text, pa.path_id, int(pa.inverted), pa.multiplier,
                   _num(pa.effective_score), _num(pa.score), int(override is not None), pa.reflection,
                   pa.error or pa.warning, judges, int(pa.disagreement), *tail])
    return buffer.getvalue()


GRID_CSV_COLUMNS = ["run_id", "prompt_id", "model_id", "cell_score", "cell_state", "aggregation", "trials",
                    "should_not_met", "judges_disagree", "overridden", "thumbs", "reason", "prompt_text",
                    "response_text", "passed"]  # columns are only ever added at the end


def grid_to_csv(run: Run, bp, grid) -> str:
    """The results grid's matching cells (every page of its view), one row each, with the texts to read."""
    buffer = io.StringIO()
    write = _writer(buffer)
    write(GRID_CSV_COLUMNS)
    cells = [(row, c) for row in grid.matching_rows for c in row.cells if c.matches and c.cell is not None]
    texts = dict(Response.objects.filter(pk__in=[c.response_id for _, c in cells]).values_list("pk", "text"))
    words = {1: "up", -1: "down", 0: "comment"}
    for row, c in cells:
        write([run.pk, row.prompt_id, c.variant_id, _num(c.score), STATE_LABELS.get(c.state, c.state), c.rule,
               c.trials, int(c.violated_should_not), int(c.disagreement), int(c.overridden),
               words.get(c.thumbs, ""), c.reason, prompt_text(bp.prompts[row.index]),
               texts.get(c.response_id) or "", PASS_LABELS.get(c.pass_state, "")])
    return buffer.getvalue()


def _num(value) -> str:
    return "" if value is None else json.dumps(value)
