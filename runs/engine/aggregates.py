"""A run's aggregates from its responses: per model variant, per cell (prompt x variant), overall, agreement.

Pure arithmetic over plain records, so that what the run page, the exports and
the API show is checked without a database (``tests/engine/test_aggregates.py``)
and is the same function the runs app calls when a run ends or a reviewer
overrides a point (``runs.records.compute_aggregates`` only loads the rows).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from blueprints.spec.schema import Prompt

from .matrix import Matrix, ResponseRecord, build_matrix
from .scoring import VERDICTS, Rating, run_stats, textbook_alpha
from .assess import unknown_cost_calls


def run_aggregates(records: Sequence[ResponseRecord], prompts: Sequence[Prompt], *,
                   agreement: dict | None = None, ratings: Iterable[Sequence[Rating]] = ()) -> dict:
    """``variants``, ``cells``, ``overall``, ``agreement`` and, for blueprints with trials or verdicts, ``cellDetails``.

    A cell's score is its trials' mean unless the prompt asks for another aggregation; a
    variant's mean weights each prompt by its ``weight``. ``agreement`` is reused when
    given (an override changes scores, never the judges' verdicts); else the textbook
    alpha over ``ratings`` (one list of the primary judges' ratings per judged point).
    """
    matrix = build_matrix(records, prompts)
    return aggregates_of(matrix, records, agreement=agreement, ratings=ratings)


def aggregates_of(matrix: Matrix, records: Sequence[ResponseRecord], *, agreement: dict | None = None,
                  ratings: Iterable[Sequence[Rating]] = ()) -> dict:
    """The stored figures of a run, read off its matrix (cell scores, variant means) and its records (usage)."""
    cells: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, dict]] = {}
    for cell in matrix.cells.values():
        prompt = matrix.prompts[cell.prompt_index] if 0 <= cell.prompt_index < len(matrix.prompts) else None
        cells.setdefault(cell.prompt_id, {})[cell.variant_id] = cell.shown
        if cell.k > 1 or (prompt is not None and prompt.has_verdicts):
            details.setdefault(cell.prompt_id, {})[cell.variant_id] = cell.outcome.to_dict()
    by_variant: dict[str, list[ResponseRecord]] = {}
    for r in records:
        by_variant.setdefault(r.variant_id, []).append(r)
    variants: dict[str, dict] = {}
    for variant_id in sorted(by_variant):
        mine = by_variant[variant_id]
        stats = matrix.summaries[variant_id]
        latencies = [r.latency_ms for r in mine if r.latency_ms is not None]
        costs = [r.cost_usd for r in mine if r.cost_usd is not None]
        usage = [r.judge_usage or {} for r in mine]
        variants[variant_id] = {
            "mean": stats.mean, "std": stats.std, "n": stats.n, "notEvaluated": stats.not_evaluated,
            "failed": sum(1 for r in mine if r.failed), "states": dict(stats.counts),
            "inputTokens": sum(r.input_tokens or 0 for r in mine),
            "outputTokens": sum(r.output_tokens or 0 for r in mine),
            "costUsd": sum(costs) if costs else None, "costUnknown": len(mine) - len(costs),
            "judgeInputTokens": sum(u.get("inputTokens", 0) for u in usage),
            "judgeOutputTokens": sum(u.get("outputTokens", 0) for u in usage),
            "judgeCostUsd": sum(u.get("costUsd") or 0 for u in usage),
            "judgeCostUnknown": sum(unknown_cost_calls(u) for u in usage),
            "latencyMs": sum(latencies) / len(latencies) if latencies else None,
            "violatedShouldNot": sum(1 for r in mine if r.violated_should_not),
            "disagreements": sum(1 for r in mine if r.disagreement),
        }
        if details:
            counts = {name: 0 for name in VERDICTS}
            for per_variant in details.values():
                cell_verdict = (per_variant.get(variant_id) or {}).get("verdict")
                if cell_verdict in counts:
                    counts[cell_verdict] += 1
            variants[variant_id]["verdicts"] = counts
    overall = run_stats(v["mean"] for v in variants.values())
    out = {
        "variants": variants,
        "cells": cells,
        "overall": {"mean": overall.mean, "std": overall.std, "n": overall.n},
        "agreement": agreement if agreement is not None else textbook_alpha(ratings).to_dict(),
    }
    if details:  # trials and verdicts, per cell: only for blueprints that use them
        out["cellDetails"] = details
    return out


def stored_totals(records: Sequence[ResponseRecord], judge_calls: dict[str, int],
                  unknown_candidate_calls: int) -> dict:
    """A run's counters as the sum of what is stored: items, judge calls (``judge_calls``: primary verdicts
    that answered and that failed), tokens and costs. A finished run writes these over the counters it kept
    while working, so a retry, a resume or a re-run can never leave them counting something twice."""
    finished = [r for r in records if r.status in ("done", "failed") or r.failed]
    usage = [r.judge_usage or {} for r in finished]
    return {
        "items_done": len(finished),
        "items_failed": sum(1 for r in finished if r.failed),
        "judge_calls_done": judge_calls.get("ok", 0),
        "judge_calls_failed": judge_calls.get("failed", 0),
        "candidate_input_tokens": sum(r.input_tokens or 0 for r in records),
        "candidate_output_tokens": sum(r.output_tokens or 0 for r in records),
        "candidate_cost_usd": float(sum(r.cost_usd or 0 for r in records)),
        "candidate_cost_unknown": unknown_candidate_calls,
        "judge_input_tokens": sum(u.get("inputTokens") or 0 for u in usage),
        "judge_output_tokens": sum(u.get("outputTokens") or 0 for u in usage),
        "judge_cost_usd": float(sum(u.get("costUsd") or 0 for u in usage)),
        "judge_cost_unknown": sum(unknown_cost_calls(u) for u in usage),
    }
