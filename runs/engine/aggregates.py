"""A run's aggregates from its responses: per model variant, per cell (prompt x variant), overall, agreement.

Pure arithmetic over plain records, so that what the run page, the exports and
the API show is checked without a database (``tests/engine/test_aggregates.py``)
and is the same function the runs app calls when a run ends or a reviewer
overrides a point (``runs.records.compute_aggregates`` only loads the rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from blueprints.spec.schema import Prompt

from .scoring import VERDICTS, Rating, TrialOutcome, aggregate_trials, model_stats, round2, run_stats, textbook_alpha
from .assess import unknown_cost_calls


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """What the aggregates read of one response (a ``Response`` row's columns)."""

    prompt_index: int
    variant_id: str
    trial: int = 0
    score: float | None = None  # overrides applied; None: not evaluated
    failed: bool = False  # generation failed
    latency_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    judge_usage: dict = field(default_factory=dict)
    violated_should_not: bool = False
    disagreement: bool = False
    verdict: str | None = None


def run_aggregates(records: Sequence[ResponseRecord], prompts: Sequence[Prompt], *,
                   agreement: dict | None = None, ratings: Iterable[Sequence[Rating]] = ()) -> dict:
    """``variants``, ``cells``, ``overall``, ``agreement`` and, for blueprints with trials or verdicts, ``cellDetails``.

    A cell's score is its trials' mean unless the prompt asks for another aggregation; a
    variant's mean weights each prompt by its ``weight``. ``agreement`` is reused when
    given (an override changes scores, never the judges' verdicts); else the textbook
    alpha over ``ratings`` (one list of the primary judges' ratings per judged point).
    """
    weights = {i: p.weight for i, p in enumerate(prompts)}
    by_cell: dict[tuple[int, str], list[TrialOutcome]] = {}
    by_variant: dict[str, list[ResponseRecord]] = {}
    for r in records:
        by_cell.setdefault((r.prompt_index, r.variant_id), []).append(TrialOutcome(r.trial, r.score, r.verdict or None))
        by_variant.setdefault(r.variant_id, []).append(r)

    cells: dict[str, dict[str, float | None]] = {}
    details: dict[str, dict[str, dict]] = {}
    cell_scores: dict[str, list[tuple[float | None, float | None]]] = {}
    for (index, variant_id), trials in by_cell.items():
        prompt = prompts[index] if 0 <= index < len(prompts) else None
        prompt_id = prompt.id if prompt is not None else str(index)
        outcome = aggregate_trials(trials, prompt.trial_aggregation if prompt else None,
                                   verdicts=prompt.verdicts if prompt else None,
                                   use_verdicts=bool(prompt and prompt.has_verdicts),
                                   threshold=prompt.trial_threshold if prompt else None)
        cell_scores.setdefault(variant_id, []).append((outcome.score, weights.get(index)))
        cells.setdefault(prompt_id, {})[variant_id] = round2(outcome.score) if outcome.score is not None else None
        if len(trials) > 1 or (prompt is not None and prompt.has_verdicts):
            details.setdefault(prompt_id, {})[variant_id] = outcome.to_dict()

    variants: dict[str, dict] = {}
    for variant_id in sorted(by_variant):
        mine = by_variant[variant_id]
        stats = model_stats(cell_scores.get(variant_id, ()))
        latencies = [r.latency_ms for r in mine if r.latency_ms is not None]
        costs = [r.cost_usd for r in mine if r.cost_usd is not None]
        usage = [r.judge_usage or {} for r in mine]
        variants[variant_id] = {
            "mean": stats.mean, "std": stats.std, "n": stats.n, "notEvaluated": stats.n_not_evaluated,
            "failed": sum(1 for r in mine if r.failed),
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
