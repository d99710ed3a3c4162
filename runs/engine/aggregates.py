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

from .matrix import STATES, Matrix, PassCount, ResponseRecord, VariantSummary, build_matrix
from .scoring import VERDICTS, Rating, run_stats, textbook_alpha
from .assess import unknown_cost_calls


@dataclass(frozen=True, slots=True)
class Spend:
    """What one attempt of one item spent: the calls its candidate and its judges sent, their tokens and cost.

    One for each response as it stands (its generation and its judging), and one for each earlier attempt a
    retry, a re-run or a cancel left behind (``runs.models.EarlierAttempt``): every call that was sent stays in
    the run's figures. ``judge_usage`` is a stored ``JudgeUsage`` dict."""

    variant_id: str
    calls_sent: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: no call of known price
    cost_unknown: int = 0  # calls sent whose price is unknown
    judge_calls_sent: int = 0
    judge_usage: dict = field(default_factory=dict)


def spend_of(record: ResponseRecord, *, calls_sent: int = 0, cost_unknown: int = 0, judge_calls_sent: int = 0
             ) -> Spend:
    """A response's own spending, from its record (the judges' part only once it is finished: an item waiting
    again has handed what its judges spent to an earlier attempt)."""
    finished = record.status in ("done", "failed") or record.failed
    return Spend(record.variant_id, calls_sent, record.input_tokens or 0, record.output_tokens or 0,
                 record.cost_usd, cost_unknown, judge_calls_sent if finished else 0,
                 (record.judge_usage or {}) if finished else {})


def run_aggregates(records: Sequence[ResponseRecord], prompts: Sequence[Prompt], *,
                   agreement: dict | None = None, ratings: Iterable[Sequence[Rating]] = (),
                   spends: Sequence[Spend] | None = None) -> dict:
    """``variants``, ``cells``, ``overall``, ``agreement`` and, for blueprints with trials or verdicts, ``cellDetails``.

    A cell's score is its trials' mean unless the prompt asks for another aggregation; a
    variant's mean weights each prompt by its ``weight``. ``agreement`` is reused when
    given (an override changes scores, never the judges' verdicts); else the textbook
    alpha over ``ratings`` (one list of the primary judges' ratings per judged point).
    """
    matrix = build_matrix(records, prompts)
    return aggregates_of(matrix, records, agreement=agreement, ratings=ratings, spends=spends)


def _usage(spends: Sequence[Spend]) -> dict:
    """Calls, tokens and cost summed over spends: the model table's figures and the run's counters alike."""
    known = [s.cost_usd for s in spends if s.cost_usd is not None]
    judge = [s.judge_usage for s in spends]
    return {
        "calls": sum(s.calls_sent for s in spends),
        "inputTokens": sum(s.input_tokens for s in spends), "outputTokens": sum(s.output_tokens for s in spends),
        "costUsd": float(sum(known)) if known else None, "costUnknown": sum(s.cost_unknown for s in spends),
        "judgeCalls": sum(s.judge_calls_sent for s in spends),
        "judgeInputTokens": sum(u.get("inputTokens") or 0 for u in judge),
        "judgeOutputTokens": sum(u.get("outputTokens") or 0 for u in judge),
        "judgeCostUsd": float(sum(u.get("costUsd") or 0 for u in judge)),
        "judgeCostUnknown": sum(unknown_cost_calls(u) for u in judge),
    }


def aggregates_of(matrix: Matrix, records: Sequence[ResponseRecord], *, agreement: dict | None = None,
                  ratings: Iterable[Sequence[Rating]] = (), spends: Sequence[Spend] | None = None) -> dict:
    """The stored figures of a run, read off its matrix (cell scores, variant means, cells per state) and what
    it spent (``spends``: every attempt of every item; without them, each record's own figures).

    Per variant, ``notRun`` counts the cells that never ran (a cancel, a budget) and ``notEvaluated`` the cells
    that ran without a score (failed ones included): one never counts as the other."""
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
    if spends is None:
        spends = [spend_of(r) for r in records]
    spent: dict[str, list[Spend]] = {}
    for s in spends:
        spent.setdefault(s.variant_id, []).append(s)
    variants: dict[str, dict] = {}
    for variant_id in sorted(by_variant):
        mine = by_variant[variant_id]
        stats = matrix.summaries[variant_id]
        latencies = [r.latency_ms for r in mine if r.latency_ms is not None]
        not_run = stats.counts.get("not-run", 0)
        waiting = stats.counts.get("pending", 0) + stats.counts.get("running", 0)
        variants[variant_id] = {
            "mean": stats.mean, "std": stats.std, "n": stats.n,
            "notEvaluated": stats.not_evaluated - not_run - waiting, "notRun": not_run,
            "failed": sum(1 for r in mine if r.failed), "states": dict(stats.counts),
            **_usage(spent.get(variant_id, ())),
            "latencyMs": sum(latencies) / len(latencies) if latencies else None,
            "violatedShouldNot": sum(1 for r in mine if r.violated_should_not),
            "disagreements": sum(1 for r in mine if r.disagreement),
            # Its cells by whether they passed (the matrix's one rule): with ``states`` and the mean, what a page
            # of the run's cells needs of the whole run (``summaries_of``) without building every cell again.
            "passes": matrix.passes(variant_id).to_dict(),
        }
        if details:
            counts = {name: 0 for name in VERDICTS}
            for per_variant in details.values():
                cell_verdict = (per_variant.get(variant_id) or {}).get("verdict")
                if cell_verdict in counts:
                    counts[cell_verdict] += 1
            variants[variant_id]["verdicts"] = counts
    for variant_id, interval in variant_intervals(matrix).items():
        if variant_id in variants:  # the mean's 95% interval (the grid's and the run page's model lines)
            variants[variant_id]["interval"] = interval.to_dict()
    overall = run_stats(v["mean"] for v in variants.values())
    with_cells, in_prompts = matrix.prompts_with_cells()
    out = {
        "variants": variants,
        "cells": cells,
        "overall": {"mean": overall.mean, "std": overall.std, "n": overall.n},
        "agreement": agreement if agreement is not None else textbook_alpha(ratings).to_dict(),
        # How many prompts have a cell, and their cells: a page of the grid's plain view reads these.
        "promptsWithCells": len(with_cells), "cellsOfPrompts": in_prompts,
    }
    if details:  # trials and verdicts, per cell: only for blueprints that use them
        out["cellDetails"] = details
    return out


def stored_totals(records: Sequence[ResponseRecord], judge_calls: dict[str, int], spends: Sequence[Spend]) -> dict:
    """A run's counters as the sum of what is stored: items and judge verdicts (``judge_calls``: primary
    verdicts that answered and that failed) counted once per item, and the calls sent, tokens and costs of every
    attempt (``spends``: the responses' and their earlier attempts', as the model table sums them per variant).
    A finished run writes these over the counters it kept while working, so a retry, a resume or a re-run can
    never leave them counting something twice, nor drop what an earlier attempt spent."""
    finished = [r for r in records if r.status in ("done", "failed") or r.failed]
    usage = _usage(spends)
    return {
        "items_done": len(finished),
        "items_failed": sum(1 for r in finished if r.failed),
        "judge_calls_done": judge_calls.get("ok", 0),
        "judge_calls_failed": judge_calls.get("failed", 0),
        "candidate_calls_sent": usage["calls"],
        "candidate_input_tokens": usage["inputTokens"],
        "candidate_output_tokens": usage["outputTokens"],
        "candidate_cost_usd": usage["costUsd"] or 0.0,
        "candidate_cost_unknown": usage["costUnknown"],
        "judge_calls_sent": usage["judgeCalls"],
        "judge_input_tokens": usage["judgeInputTokens"],
        "judge_output_tokens": usage["judgeOutputTokens"],
        "judge_cost_usd": usage["judgeCostUsd"],
        "judge_cost_unknown": usage["judgeCostUnknown"],
    }


def variant_intervals(matrix: Matrix) -> dict:
    """Each variant's prompt-weighted mean over its cell scores with its 95% bootstrap interval (``MeanInterval``),
    every variant's drawn from the same resamples of the run's prompts. Worked out once per matrix (a kept matrix
    serves many requests); a page matrix holds the stored ones (``summaries_of``)."""
    kept = matrix.__dict__.get("_intervals")
    if kept is not None:
        return kept
    from .stats import mean_intervals  # NumPy: for finished runs and their pages, not every process that imports this

    columns: dict[str, dict[int, float | None]] = {v: {} for v in matrix.variants}
    for (index, variant_id), cell in matrix.cells.items():
        columns.setdefault(variant_id, {})[index] = cell.score
    weights = {i: p.weight for i, p in enumerate(matrix.prompts)}
    kept = matrix.__dict__["_intervals"] = mean_intervals(columns, weights, items=range(len(matrix.prompts)))
    return kept


def draw_intervals_ahead(prompts: int) -> None:
    """Draw now the resamples the intervals of a run of ``prompts`` prompts will use (``variant_intervals``: every
    prompt of the run, the default resamples and seed), kept by ``stats.resample_counts``: a command that waits on
    its calls draws them meanwhile, not after its last call (0.05-0.4 s for 2,000 prompts)."""
    if prompts > 0:
        from .stats import RESAMPLES, SEED, resample_counts

        resample_counts(prompts, resamples=RESAMPLES, seed=SEED)


@dataclass(frozen=True)
class StoredWhole:
    """What ``aggregates_of`` stored of the whole matrix that a page of its cells shows: per variant its summary,
    pass counts and mean's interval, and (when every prompt has a cell) how many cells the prompts have."""

    summaries: dict[str, VariantSummary]
    passes: dict[str, PassCount]
    intervals: dict
    cells_of_prompts: int | None  # None: some prompt has no cell (or not stored)


def summaries_of(stored: dict | None, prompts: int) -> StoredWhole | None:
    """The whole matrix's per-variant summaries, pass counts and intervals as ``aggregates_of`` stored them
    (``stored``: the stored aggregates, or those of their keys: ``variants``, ``promptsWithCells``,
    ``cellsOfPrompts``), equal to those of the matrix they were read off; None when they are not all there (a run
    finished before they were stored, an imported one): the caller builds the matrix. ``prompts``: how many the
    run's blueprint has."""
    from .stats import MeanInterval

    stored_variants = (stored or {}).get("variants")
    if not stored_variants:
        return None
    summaries, passes, intervals = {}, {}, {}
    for variant_id, figures in stored_variants.items():
        counts, passed, interval = figures.get("states"), figures.get("passes"), figures.get("interval")
        if not isinstance(counts, dict) or not isinstance(passed, dict) or not isinstance(interval, dict) \
                or set(counts) != set(STATES):
            return None
        waiting = counts["pending"] + counts["running"]
        summaries[variant_id] = VariantSummary(
            variant_id, figures["mean"], figures["std"], figures["n"],
            figures["notEvaluated"] + figures["notRun"] + waiting, dict(counts), sum(counts.values()))
        passes[variant_id] = PassCount(passed["passed"], passed["didNotPass"], passed["undecided"],
                                       passed["noThreshold"])
        intervals[variant_id] = MeanInterval(interval["mean"], interval["low"], interval["high"], interval["n"])
    every = stored.get("promptsWithCells") == prompts and isinstance(stored.get("cellsOfPrompts"), int)
    return StoredWhole(summaries, passes, intervals, stored["cellsOfPrompts"] if every else None)
