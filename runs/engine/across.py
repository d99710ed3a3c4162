"""Across runs: a run's summary read off its results matrix, and what many summaries say together -- a
blueprint's trend per model variant, each run against a pinned baseline, a model's runs and its weakest and
strongest prompts against its peers, leaderboards over many blueprints, and drift at temperature 0.

Every score here is a matrix cell's (``Cell.score``, its prompt's trial rule applied) or a figure of
``runs.engine.stats`` over such cells; nothing here reads rows or recomputes a cell. A *summary* is a plain
dict (stored as JSON by ``runs.across``):

    {"prompts": [prompt id, ...], "weights": [prompt weight or None, ...], "order": [variant, ...],
     "variants": {variant: {"model", "temperature", "mean", "low", "high", "n", "cells": [score or None per
                  prompt], "responses": [response id or None per prompt], "calls", "costUsd", "costCalls",
                  "latencyMs", "states": [cell state or None (no cell) per prompt], "trials",
                  "latencyCalls", "outputTokens" (mean per answer with a known count), "tokenAnswers", "shouldNot": {"failures", "answers"} or None
                  (runs/engine/bounds.py over its trials; None: the run has no should-not point)}}}

Coverage (``coverage``): what each model was actually run on -- blueprints, prompts, trials, the share of its
cells not evaluated, cost, latency, answer length -- and every missing cell named: a prompt another model of
the same run was run on and this one was not. Never averaged away: a leaderboard's mean sits beside it.

Pure Python: no Django here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable, Mapping, Sequence

from blueprints.spec.model_ids import split_variant_suffixes

from . import bounds as deal_breakers
from . import stats
from .matrix import Matrix

SUMMARY_SHAPE = 2  # bump when the summary's layout changes: older stored summaries are rebuilt
DRIFT_MIN_GAP = timedelta(days=1)
WEAK_LISTED = 5  # weakest and strongest prompts listed on a model page

def parse_variant(variant_id: str) -> tuple[str, float | None, int | None]:
    """``model[temp:T][sp_idx:i]`` -> (model id as written, T, i), by the model-id grammar's own reader
    (``split_variant_suffixes``); an id without suffixes is all model."""
    base, temperature, system_index, _ = split_variant_suffixes(variant_id)
    return base, temperature, system_index


# --- one run -----------------------------------------------------------------------------------------------------


def summarise(matrix: Matrix, prompts: Sequence, *, critical_failed=frozenset()) -> dict:
    """A run's summary from its matrix: per variant the mean with its interval (``stats.mean_intervals`` over
    every prompt of the run, exactly as ``runs.compare.decisions`` gives it), the cell scores by prompt, the
    response each cell stands for, and cost and latency per call (from the cells' trials)."""
    columns: dict[str, dict[int, float | None]] = {v: {} for v in matrix.variants}
    for (index, variant_id), cell in matrix.cells.items():
        columns.setdefault(variant_id, {})[index] = cell.score
    intervals = stats.mean_intervals(columns, {i: p.weight for i, p in enumerate(prompts)},
                                     items=range(len(prompts)))
    guarded = deal_breakers.matrix_bounds(matrix, critical_failed=critical_failed)
    variants = {}
    for variant_id in matrix.variants:
        model, temperature, _ = parse_variant(variant_id)
        cells: list[float | None] = [None] * len(prompts)
        responses: list[int | None] = [None] * len(prompts)
        states: list[str | None] = [None] * len(prompts)
        calls = cost_calls = latency_calls = trials = token_answers = tokens = 0
        cost = latency = 0.0
        for index in range(len(prompts)):
            cell = matrix.cell(index, variant_id)
            if cell is None:
                continue
            cells[index] = stats.finite(cell.score)
            responses[index] = cell.response_id
            states[index] = cell.state
            trials += len(cell.trials)
            for trial in cell.trials:
                if trial.output_tokens is not None and trial.status == "done":
                    token_answers += 1
                    tokens += trial.output_tokens
                if trial.status not in ("done", "failed"):
                    continue
                calls += 1
                if trial.cost_usd is not None:
                    cost_calls += 1
                    cost += trial.cost_usd
                if trial.latency_ms is not None:
                    latency_calls += 1
                    latency += trial.latency_ms
        interval = intervals.get(variant_id) or stats.MeanInterval(None, None, None, 0)
        variants[variant_id] = {
            "model": model, "temperature": temperature, "mean": interval.mean, "low": interval.low,
            "high": interval.high, "n": interval.n, "cells": cells, "responses": responses, "calls": calls,
            "costUsd": cost / cost_calls if cost_calls else None, "costCalls": cost_calls,
            "latencyMs": latency / latency_calls if latency_calls else None, "states": states, "trials": trials,
            "latencyCalls": latency_calls, "outputTokens": tokens / token_answers if token_answers else None,
            "tokenAnswers": token_answers,
            "shouldNot": ({"failures": guarded[variant_id].failures, "answers": guarded[variant_id].n}
                          if variant_id in guarded else None)}
    return {"shape": SUMMARY_SHAPE, "prompts": [p.id for p in prompts], "weights": [p.weight for p in prompts],
            "order": list(matrix.variants), "variants": variants}


def cell_scores(summary: dict, variant_id: str) -> dict[str, float | None]:
    """``{prompt id: cell score}`` of one variant (the first of two prompts sharing an id)."""
    out: dict[str, float | None] = {}
    cells = summary["variants"].get(variant_id, {}).get("cells") or []
    for prompt_id, score in zip(summary["prompts"], cells):
        out.setdefault(prompt_id, score)
    return out


def weights_of(summary: dict) -> dict[str, float | None]:
    return dict(zip(summary["prompts"], summary["weights"]))


def rank_of(summary: dict, variant_id: str) -> tuple[int | None, int]:
    """(1 for the best mean among the run's variants with a mean, or None without one; how many have one)."""
    means = [v["mean"] for v in summary["variants"].values() if v["mean"] is not None]
    mine = summary["variants"].get(variant_id, {}).get("mean")
    if mine is None:
        return None, len(means)
    return 1 + sum(1 for m in means if m > mine), len(means)


# --- coverage: what a model was actually run on ------------------------------------------------------------------


RUN_STATES = ("scored", "not-evaluated", "failed")  # a cell in one of these was run (an answer was asked for)


@dataclass
class Coverage:
    """What one model (all its variants) was run on in some runs, pooled; ``missing``: (blueprint, prompt id)
    pairs another model was run on in the same run and this one was not."""

    blueprints: int = 0
    prompts: int = 0  # cells run (prompt x variant)
    offered: int = 0  # cells it would have with every prompt any model of those runs was run on
    trials: int = 0
    not_evaluated: int = 0  # cells run with no score (not evaluated or failed)
    calls: int = 0
    cost: float = 0.0
    cost_calls: int = 0
    latency: float = 0.0
    latency_calls: int = 0
    tokens: float = 0.0
    token_answers: int = 0
    failures: int = 0  # should-not points met, over ``answers``
    answers: int = 0
    guarded: bool = False  # some run had a should-not point
    missing: list = field(default_factory=list)

    @property
    def not_evaluated_rate(self) -> float | None:
        return self.not_evaluated / self.prompts if self.prompts else None

    @property
    def cost_usd(self) -> float | None:
        return self.cost / self.cost_calls if self.cost_calls else None

    @property
    def latency_ms(self) -> float | None:
        return self.latency / self.latency_calls if self.latency_calls else None

    @property
    def output_tokens(self) -> float | None:
        return self.tokens / self.token_answers if self.token_answers else None

    @property
    def bound(self) -> deal_breakers.Bound | None:
        """Its deal-breaker bound over the pooled should-not answers; None without a should-not point."""
        if not self.guarded:
            return None
        return deal_breakers.Bound("", self.failures, self.answers,
                                   deal_breakers.upper_bound(self.failures, self.answers))

    def to_dict(self) -> dict:
        bound = self.bound
        return {"blueprints": self.blueprints, "prompts": self.prompts, "offered": self.offered,
                "trials": self.trials, "notEvaluated": self.not_evaluated,
                "notEvaluatedRate": self.not_evaluated_rate, "costUsd": self.cost_usd, "latencyMs": self.latency_ms,
                "outputTokens": self.output_tokens,
                "missing": [{"blueprint": b, "prompt": p} for b, p in self.missing],
                "shouldNot": bound.to_dict() if bound is not None else None}


def _was_run(state: str | None) -> bool:
    return state in RUN_STATES


def coverage(summaries: Iterable[tuple[str, dict]], model: str) -> Coverage:
    """``summaries``: (blueprint key, summary) of the runs to pool (the latest of each blueprint, say)."""
    return coverages(summaries, [model])[model]


def coverages(summaries: Iterable[tuple[str, dict]], models: Iterable[str] | None = None) -> dict[str, Coverage]:
    """``coverage`` of every model at once (``models``: these, even when absent; None: those in the summaries),
    one pass over each summary's cells."""
    out: dict[str, Coverage] = {m: Coverage() for m in (models or ())}
    for key, summary in summaries:
        size = len(summary["prompts"])
        by_model: dict[str, list[str]] = {}
        for v in summary["order"]:
            by_model.setdefault(summary["variants"][v]["model"], []).append(v)
        states_of = {v: ((summary["variants"][v].get("states") or [None] * size) + [None] * size)[:size]
                     for v in summary["order"]}
        run_by_all = [0] * size
        run_by: dict[str, list[int]] = {}
        for model, mine in by_model.items():
            counts = run_by[model] = [0] * size
            for v in mine:
                for index, state in enumerate(states_of[v]):
                    if _was_run(state):
                        counts[index] += 1
                        run_by_all[index] += 1
        for model, mine in by_model.items():
            if models is not None and model not in out:
                continue
            out_model = out.setdefault(model, Coverage())
            _add_run(out_model, key, summary, mine, states_of, [a - m for a, m in zip(run_by_all, run_by[model])])
    return out


def _add_run(out: Coverage, key: str, summary: dict, mine: list[str], states_of: dict, others_at: list[int]) -> None:
    """Add one run's cells of one model (its variants ``mine``) to ``out``; ``others_at``: variants of other
    models run on each prompt."""
    out.blueprints += 1
    for variant_id in mine:
        data = summary["variants"][variant_id]
        for index, state in enumerate(states_of[variant_id]):
            if _was_run(state):
                out.prompts += 1
                out.offered += 1
                if state != "scored":
                    out.not_evaluated += 1
            elif others_at[index]:
                out.offered += 1
                out.missing.append((key, summary["prompts"][index]) if len(mine) == 1
                                   else (key, f"{summary['prompts'][index]} ({variant_id})"))
        out.trials += data.get("trials") or 0
        out.calls += data.get("calls") or 0
        if data.get("costUsd") is not None:
            out.cost += data["costUsd"] * data["costCalls"]
            out.cost_calls += data["costCalls"]
        if data.get("latencyMs") is not None:
            out.latency += data["latencyMs"] * data["latencyCalls"]
            out.latency_calls += data["latencyCalls"]
        if data.get("outputTokens") is not None:
            out.tokens += data["outputTokens"] * data["tokenAnswers"]
            out.token_answers += data["tokenAnswers"]
        guard = data.get("shouldNot")
        if guard is not None:
            out.guarded = True
            out.failures += guard["failures"]
            out.answers += guard["answers"]


# --- a run against another (the baseline) --------------------------------------------------------------------------


def compare_summaries(run: dict, base: dict, changed: Iterable[str] = ()) -> dict[str, stats.Comparison]:
    """Each variant of ``run`` against the same variant of ``base`` (``a`` the run's, ``b`` the base's), prompts
    matched by id, ``changed`` prompts left out; the comparisons drawn from the same resamples of the prompts, as
    ``runs.compare.compare_with_base`` does, so the verdicts are the compare page's."""
    common = [v for v in run["order"] if v in base["variants"]]
    left_out = set(changed)
    weights = weights_of(run)
    pairs = [(cell_scores(run, v), cell_scores(base, v)) for v in common]
    return dict(zip(common, stats.paired_many(pairs, weights, left_out)))


def comparison_from_dict(data: dict) -> stats.Comparison:
    return stats.Comparison(data.get("delta"), data.get("low"), data.get("high"), data.get("n", 0),
                            data.get("verdict", "cant_tell"), data.get("meanA"), data.get("meanB"))


def comparison_to_dict(c: stats.Comparison) -> dict:
    return {**c.to_dict(), "meanA": c.mean_a, "meanB": c.mean_b}


# --- a blueprint's history -----------------------------------------------------------------------------------------


@dataclass
class TrendPoint:
    run_id: int
    when: datetime
    revision: int
    mean: float | None
    low: float | None
    high: float | None
    n: int


def trends(history: Sequence[tuple[int, datetime, int, dict]]) -> dict[str, list[TrendPoint]]:
    """Per variant, its mean with its interval in each run (``history``: (run id, when, revision number,
    summary), oldest first); variants in order of first appearance."""
    out: dict[str, list[TrendPoint]] = {}
    for run_id, when, revision, summary in history:
        for variant_id in summary["order"]:
            v = summary["variants"][variant_id]
            out.setdefault(variant_id, []).append(TrendPoint(run_id, when, revision, v["mean"], v["low"], v["high"],
                                                             v["n"]))
    return out


def trend_svg_points(points: Sequence[TrendPoint], width: int = 560, height: int = 120, pad: int = 14) -> list[dict]:
    """Where each run's mean (and its interval) sits in a ``width`` x ``height`` chart of 0..1 scores."""
    if not points:
        return []
    step = (width - 2 * pad) / max(1, len(points) - 1)

    def y(score: float) -> float:
        return round(pad + (1 - score) * (height - 2 * pad), 1)

    out = []
    for i, p in enumerate(points):
        x = round(pad + i * step if len(points) > 1 else width / 2, 1)
        out.append({"x": x, "y": y(p.mean) if p.mean is not None else None,
                    "y_low": y(p.low) if p.low is not None else None,
                    "y_high": y(p.high) if p.high is not None else None, "point": p})
    return out


# --- a model across runs -------------------------------------------------------------------------------------------


@dataclass
class PromptGap:
    run_id: int
    prompt_index: int
    prompt_id: str
    variant_id: str
    score: float
    peers: float  # the other models' mean cell score on that prompt
    response_id: int | None

    @property
    def gap(self) -> float:
        return self.score - self.peers


def prompt_gaps(run_id: int, summary: dict, model: str) -> list[PromptGap]:
    """Every cell of ``model``'s variants in a run against the mean of the other models' cells on that prompt."""
    mine = [v for v in summary["order"] if summary["variants"][v]["model"] == model]
    others = [v for v in summary["order"] if summary["variants"][v]["model"] != model]
    out = []
    for variant_id in mine:
        data = summary["variants"][variant_id]
        for index, score in enumerate(data["cells"]):
            if score is None:
                continue
            peers = [summary["variants"][o]["cells"][index] for o in others]
            peers = [p for p in peers if p is not None]
            if not peers:
                continue
            out.append(PromptGap(run_id, index, summary["prompts"][index], variant_id, score,
                                 sum(peers) / len(peers), data["responses"][index]))
    return out


def weakest_and_strongest(gaps: Iterable[PromptGap], limit: int = WEAK_LISTED) -> tuple[list[PromptGap],
                                                                                        list[PromptGap]]:
    """The prompts where a model falls furthest below its peers' mean, and where it stands furthest above."""
    gaps = list(gaps)
    weak = sorted((g for g in gaps if g.gap < 0), key=lambda g: (g.gap, g.run_id, g.prompt_index))[:limit]
    strong = sorted((g for g in gaps if g.gap > 0), key=lambda g: (-g.gap, g.run_id, g.prompt_index))[:limit]
    return weak, strong


# --- leaderboards over many blueprints -----------------------------------------------------------------------------


@dataclass
class BoardRow:
    model: str
    mean: float | None
    low: float | None
    high: float | None
    covered: int  # blueprints it ran (in the latest finished run of each)
    per_blueprint: dict = field(default_factory=dict)  # blueprint key -> its mean there
    rank: int | None = None
    coverage: Coverage | None = None  # what it was run on in those runs, missing cells named


@dataclass
class Board:
    blueprints: int
    minimum: int  # blueprints a model must have run to be ranked
    ranked: list[BoardRow]
    apart: list[BoardRow]  # ran too few: shown, not ranked


def minimum_covered(blueprints: int) -> int:
    """A model is ranked when it ran at least half of the tag's blueprints (rounded up; at least one)."""
    return max(1, math.ceil(blueprints / 2))


def model_means(summary: dict) -> dict[str, float]:
    """Per model of a run, its blueprint score: the prompt-weighted mean of its cells (every variant of the model
    pooled: a cell is a prompt x variant), ``stats.mean_interval``'s mean."""
    cells: dict[str, tuple[list, list]] = {}
    for variant_id in summary["order"]:
        data = summary["variants"][variant_id]
        scores, weights = cells.setdefault(data["model"], ([], []))
        scores.extend(data["cells"])
        weights.extend(summary["weights"])
    out = {}
    for model, (scores, weights) in cells.items():
        pairs = [(s, stats.item_weight(w)) for s, w in zip(scores, weights) if s is not None]
        total = sum(w for _, w in pairs)
        if total > 0:
            out[model] = sum(s * w for s, w in pairs) / total
    return out


def leaderboard(latest: Mapping[str, dict], blueprints: int) -> Board:
    """``latest``: blueprint key -> the summary of its latest finished run. Each model's mean over the
    blueprints it ran, its 95% interval a bootstrap over those blueprints (``stats.mean_interval``: none with
    fewer than two), ranked best first among the models that ran at least ``minimum_covered`` of them."""
    per_model: dict[str, dict] = {}
    for key, summary in latest.items():
        for model, mean in model_means(summary).items():
            per_model.setdefault(model, {})[key] = mean
    minimum = minimum_covered(blueprints)
    rows = []
    covered = coverages(latest.items(), per_model)
    for model, means in per_model.items():
        interval = stats.mean_interval(list(means.values()))
        rows.append(BoardRow(model, interval.mean, interval.low, interval.high, len(means), dict(means),
                             coverage=covered[model]))
    rows.sort(key=lambda r: (r.mean is None, -(r.mean or 0.0), r.model))
    ranked = [r for r in rows if r.covered >= minimum]
    for i, row in enumerate(ranked):
        row.rank = i + 1
    return Board(blueprints, minimum, ranked, [r for r in rows if r.covered < minimum])


# --- drift ---------------------------------------------------------------------------------------------------------


@dataclass
class Drift:
    revision_id: int
    variant_id: str
    model: str
    run_id: int  # the later run
    base_id: int  # the earlier one, at least DRIFT_MIN_GAP before
    comparison: stats.Comparison

    @property
    def verdict_words(self) -> str:
        return {"better": "up", "worse": "down"}.get(self.comparison.verdict, "can't tell")


def drift(runs: Sequence[tuple[int, int, datetime, dict]], min_gap: timedelta = DRIFT_MIN_GAP) -> list[Drift]:
    """``runs``: (run id, revision id, when, summary) of finished runs. For each revision and each variant at
    temperature 0, its latest run against the latest earlier run at least ``min_gap`` before it, paired by prompt
    (the revision is the same, so every prompt is the same question); flagged when the verdict is not
    "can't tell". Most recent first."""
    by_revision: dict[int, list] = {}
    for run in runs:
        by_revision.setdefault(run[1], []).append(run)
    out = []
    for revision_id, mine in by_revision.items():
        mine.sort(key=lambda r: (r[2], r[0]))
        variants = {v for _, _, _, s in mine for v, data in s["variants"].items() if data["temperature"] == 0}
        for variant_id in sorted(variants):
            having = [r for r in mine if variant_id in r[3]["variants"]]
            if len(having) < 2:
                continue
            later = having[-1]
            earlier = [r for r in having if later[2] - r[2] >= min_gap]
            if not earlier:
                continue
            base = earlier[-1]
            comparison = compare_summaries({**later[3], "order": [variant_id]}, base[3])[variant_id]
            if comparison.verdict != "cant_tell":
                out.append(Drift(revision_id, variant_id, later[3]["variants"][variant_id]["model"], later[0],
                                 base[0], comparison))
    out.sort(key=lambda d: (-d.run_id, d.variant_id))
    return out
