# Over 500 lines: one subject, the statistics every decision reads (intervals, verdicts, changed cells, the gate, trials).
"""Decisions you can defend: paired comparisons with intervals, a model's mean with its interval, which of many
items changed (Benjamini-Hochberg), and what repeated trials say (pass@k, pass^k, flakiness).

Every figure here is read off cell scores the results matrix gave (``Cell.score``, the prompt's trial rule
applied); nothing here reads rows or recomputes a cell. Pure NumPy/SciPy: no Django here.

* ``paired``: two score vectors aligned by prompt id (only prompts scored on both sides). The difference is the
  prompt-weighted mean of the per-prompt differences (so it is exactly mean(a) - mean(b) over those prompts);
  its 95% interval is a paired (expanded) percentile bootstrap: prompts are resampled with replacement, each resample
  keeps a prompt's two scores together, ``RESAMPLES`` resamples from ``numpy.random.Generator(PCG64(SEED))``,
  so the same data always gives the same interval. Pass/fail scores of equal weight get Newcombe's score interval
  for paired proportions instead (``paired_binary_interval``). The verdict is "better" or "worse" when the interval
  excludes 0, else "cant_tell".
* ``mean_interval``: one model's prompt-weighted mean with the same bootstrap's 95% interval.
* ``changed``: many items (prompt x model cells) each with a change; which changed more than the others' noise.
  Each change is measured against the spread of the changes (its distance from their median in units of the
  sigma-clipped standard deviation of the changes that are not 0, ``noise_scale``),
  a two-sided p-value from Student's t with that standard deviation's degrees of freedom (half a grid step
  off for scores kept to 2 places), and the Benjamini-Hochberg adjustment (``benjamini_hochberg``: SciPy's
  ``false_discovery_control`` in NumPy); an item is "changed" when its adjusted p-value is below
  ``FDR_LEVEL``: of the items listed, at most that share are expected to be noise. Items that did not move are
  never listed and are not counted among the tests.
* ``gate``: the CI gate (``manage.py compare --fail-on-regression``), stricter than the verdicts: a variant
  fails only when a one-sided paired sign-flip test (``worse_p``, counted exactly on the scores' grid) says it
  dropped, Holm-adjusted over the variants compared, at the family-wise level ``GATE_LEVEL`` (0.1%), and its
  shown verdict is "worse".
* ``trial_figures``: over a model's cells with more than one trial, the mean (unbiased) pass@k, the mean pass^k
  and the share of cells whose trials disagree (flakiness).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

# SciPy is imported where it is used: ``scipy.stats`` alone costs about 0.7 s, paid by every command and
# web process at start-up otherwise (tests/bench/bench_cli_run.py).

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 26  # issue 26: any fixed number; the same data always gives the same interval
FDR_LEVEL = 0.01  # of the cells listed as changed, at most 1% are expected to be noise
VERDICTS = ("better", "worse", "cant_tell")
METHOD = (f"paired expanded-percentile bootstrap, {RESAMPLES} resamples, seed {SEED} (for pass/fail scores of equal "
          f"weight, Newcombe's score interval for paired proportions)")


@dataclass(frozen=True, slots=True)
class Comparison:
    """``a`` against ``b`` over the ``n`` items scored on both sides."""

    delta: float | None  # mean(a) - mean(b), prompt-weighted; None: no item in common
    low: float | None
    high: float | None
    n: int
    verdict: str  # better (a above b), worse, cant_tell
    mean_a: float | None = None
    mean_b: float | None = None

    def to_dict(self) -> dict:
        return {"delta": self.delta, "low": self.low, "high": self.high, "verdict": self.verdict, "n": self.n}


@dataclass(frozen=True, slots=True)
class MeanInterval:
    mean: float | None
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def verdict(low: float | None, high: float | None) -> str:
    """"better" when the whole interval is above 0, "worse" when below, otherwise "cant_tell"."""
    if low is None or high is None:
        return "cant_tell"
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "cant_tell"


def item_weight(weight: float | None) -> float:
    """A prompt's weight as every mean over prompts counts it: none is 1, below 0 is 0."""
    return 1.0 if weight is None else max(0.0, float(weight))


def _weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n)
    if isinstance(weights, np.ndarray) and weights.dtype.kind == "f":  # no None in it: the same, without a loop
        w = weights.astype(float)
    else:
        w = np.array([1.0 if x is None else float(x) for x in weights], dtype=float)
    return np.where(w > 0, w, 0.0)


@lru_cache(maxsize=8)
def resample_counts(n: int, *, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """``resamples`` x ``n``: how often each item is drawn in each bootstrap resample (rows sum to ``n``).

    The same ``(n, resamples, seed)`` always gives the same matrix, so it is kept (read-only) for the next
    request: a page of 1,000 prompts pays for drawing it once per process."""
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(0, n, size=(resamples, n), dtype=np.int64 if resamples * n >= 2**31 else np.int32)
    # One count over a block of rows at a time, each row's draws moved to a range of their own: blocks of about
    # 64k counts stay in the cache (one count over the whole matrix missed it, 14 times slower at 2,000 items) and
    # take a tenth of the calls of a count per row (0.037 -> 0.024 s at 2,000 items).
    counts = np.empty((resamples, n))
    rows = max(1, _COUNTS_PER_BLOCK // n)
    offsets = (np.arange(rows, dtype=np.int64) * n)[:, None]
    for start in range(0, resamples, rows):
        block = draws[start:start + rows]
        size = len(block)
        counts[start:start + size] = np.bincount((block + offsets[:size]).ravel(),
                                                 minlength=size * n).reshape(size, n)
    counts.flags.writeable = False
    return counts


_COUNTS_PER_BLOCK = 1 << 16


def bootstrap_means(values: np.ndarray, weights: np.ndarray, *, counts: np.ndarray | None = None,
                    confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED
                    ) -> list[tuple[float | None, float | None, float | None]]:
    """Weighted means of the columns of ``values`` (items x series) and their percentile bootstrap intervals.

    ``weights`` (items x series) is 0 where a series has no value for an item. The items are resampled once
    for every series (the same resamples: a paired bootstrap when a series is a difference).
    Returns ``(mean, low, high)`` per column; ``None`` where a column has no weight at all.
    """
    values = np.nan_to_num(np.asarray(values, dtype=float).reshape(len(values), -1))
    weights = np.asarray(weights, dtype=float).reshape(values.shape)
    n, series = values.shape
    out: list[tuple[float | None, float | None, float | None]] = []
    if n == 0:
        return [(None, None, None)] * series
    total = weights.sum(axis=0)
    means = np.divide((values * weights).sum(axis=0), total, out=np.full(series, np.nan), where=total > 0)
    if counts is None:
        counts = resample_counts(n, resamples=resamples, seed=seed)
    num, den = counts @ (values * weights), counts @ weights
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = num / den
    alpha = (1 - confidence) / 2
    for j in range(series):
        scored = int(np.count_nonzero(weights[:, j]))
        if scored == 0:
            out.append((None, None, None))
            continue
        if scored < 2:
            out.append((float(means[j]), None, None))
            continue
        column = boot[:, j][np.isfinite(boot[:, j])]  # a resample that drew none of its items says nothing
        tail = expanded_tail(alpha, scored)
        low, high = np.quantile(column, [tail, 1 - tail])
        out.append((float(means[j]), float(min(low, means[j])), float(max(high, means[j]))))
    return out


@functools.lru_cache(maxsize=1024)
def expanded_tail(alpha: float, n: int) -> float:
    """The tail share for an *expanded* percentile interval (Hesterberg, "What teachers should know about the
    bootstrap", 2015): the plain percentile interval is too narrow by about sqrt((n - 1) / n) and by using
    normal rather than t quantiles; taking the quantiles at Phi(-sqrt(n / (n - 1)) t(1 - alpha, n - 1))
    instead of alpha corrects both (it tends to alpha as n grows: 0.024 for 200 items, 0.0178 for 20)."""
    from scipy.special import ndtr, stdtrit  # norm.cdf and t.ppf, without scipy.stats's 0.6 s import

    return float(ndtr(-math.sqrt(n / (n - 1)) * stdtrit(n - 1, 1 - alpha)))


def paired(a: Sequence[float], b: Sequence[float], weights: Sequence[float | None] | None = None, *,
           confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED) -> Comparison:
    """``a`` against ``b``, item by item (the same prompts in the same order; both scored)."""
    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_.shape != b_.shape:
        raise ValueError("paired scores must be aligned item by item")
    n = len(a_)
    w = _weights(weights, n)
    if n == 0 or w.sum() == 0:
        return Comparison(None, None, None, n, "cant_tell")
    (delta, low, high), = bootstrap_means((a_ - b_)[:, None], w[:, None], confidence=confidence,
                                          resamples=resamples, seed=seed)
    binary = paired_binary_interval(a_, b_, w, confidence=confidence)
    if binary is not None:
        low, high = binary
    mean_a, mean_b = float(np.average(a_, weights=w)), float(np.average(b_, weights=w))
    return Comparison(delta, low, high, n, verdict(low, high), mean_a, mean_b)


def paired_binary_interval(a: np.ndarray, b: np.ndarray, weights: np.ndarray | None = None, *,
                           confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The interval for pass/fail scores: Newcombe's square-and-add score interval for the difference of two
    paired proportions (Newcombe 1998, Statistics in Medicine 17:2635, method 10), or None when it does not
    apply (a score other than 0 or 1, unequal prompt weights, fewer than two prompts).

    Each side's proportion gets its Wilson score interval; the two are combined with the estimated correlation
    of the pairs (``phi``, its numerator ``ad - bc`` less ``n / 2`` when above it, 0 up to it). It holds its
    coverage from 10 prompts on, where a bootstrap of 0/1 differences covers the truth far less often than it
    says (about 85% for pass rates of 0.85 against 0.75 over 10 prompts, tests/bench/bench_decisions.py)."""
    from scipy.special import ndtri

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    w = _weights(weights, len(a))
    keep = w > 0
    a, b, w = a[keep], b[keep], w[keep]
    n = len(a)
    if n < 2 or not np.all(w == w[0]) or not np.all((a == 0) | (a == 1)) or not np.all((b == 0) | (b == 1)):
        return None
    both, only_a = int(np.sum((a == 1) & (b == 1))), int(np.sum((a == 1) & (b == 0)))
    only_b = int(np.sum((a == 0) & (b == 1)))
    neither = n - both - only_a - only_b
    z = float(ndtri(1 - (1 - confidence) / 2))

    def wilson(x: int) -> tuple[float, float]:
        centre = (x + z * z / 2) / (n + z * z)
        half = z * math.sqrt(x * (n - x) / n + z * z / 4) / (n + z * z)
        return centre - half, centre + half

    p1, p2 = (both + only_a) / n, (both + only_b) / n
    (l1, u1), (l2, u2) = wilson(both + only_a), wilson(both + only_b)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    ad_bc = both * neither - only_a * only_b
    if margins == 0 or 0 <= ad_bc <= n / 2:
        phi = 0.0
    else:
        phi = (ad_bc - n / 2 if ad_bc > n / 2 else ad_bc) / math.sqrt(margins)
    delta = p1 - p2
    low = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 + (u2 - p2) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2)))
    high = delta + math.sqrt(max(0.0, (p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1)))
    return max(-1.0, low), min(1.0, high)


def mean_interval(scores: Sequence[float | None], weights: Sequence[float | None] | None = None, *,
                  confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED) -> MeanInterval:
    """One model's prompt-weighted mean over its scored cells, with its bootstrap interval."""
    pairs = [(s, w) for s, w in zip(scores, weights if weights is not None else [None] * len(scores))
             if s is not None]
    if not pairs:
        return MeanInterval(None, None, None, 0)
    values = np.array([s for s, _ in pairs], dtype=float)
    (mean, low, high), = bootstrap_means(values[:, None], _weights([w for _, w in pairs], len(pairs))[:, None],
                                         confidence=confidence, resamples=resamples, seed=seed)
    return MeanInterval(mean, low, high, len(pairs))


def mean_intervals(columns: Mapping[Hashable, Mapping[Hashable, float | None]],
                   weights: Mapping[Hashable, float | None] | None = None, *, items: Iterable[Hashable] | None = None,
                   **options) -> dict[Hashable, MeanInterval]:
    """Many models' means at once (the same resamples of the items): ``{model: {item: score}}``.

    ``items``: the items to resample (every prompt of a run, scored or not yet: the resamples stay the same
    while a run fills in); by default those with a score somewhere."""
    if items is None:
        items = sorted({i for col in columns.values() for i, s in col.items() if s is not None}, key=str)
    items = list(items)
    if not any(s is not None for col in columns.values() for s in col.values()):
        items = []
    keys = list(columns)
    if not items:
        return {k: MeanInterval(None, None, None, 0) for k in keys}
    values = np.zeros((len(items), len(keys)))
    w = np.zeros_like(values)
    for j, key in enumerate(keys):
        col = columns[key]
        for i, item in enumerate(items):
            score = col.get(item)
            if score is not None:
                values[i, j] = score
                weight = (weights or {}).get(item)
                w[i, j] = item_weight(weight)
    out = {}
    for j, (mean, low, high) in enumerate(bootstrap_means(values, w, **options)):
        out[keys[j]] = MeanInterval(mean, low, high, int(np.count_nonzero(w[:, j])))
    return out


def align(a: Mapping[Hashable, float | None], b: Mapping[Hashable, float | None],
          exclude: Iterable[Hashable] = ()) -> tuple[list[Hashable], list[float], list[float]]:
    """Items scored on both sides (by id, in a stable order), with their two scores."""
    left_out = set(exclude)
    ids = sorted((k for k in a if k in b and k not in left_out and a[k] is not None and b[k] is not None), key=str)
    return ids, [float(a[k]) for k in ids], [float(b[k]) for k in ids]


def compare_scores(a: Mapping[Hashable, float | None], b: Mapping[Hashable, float | None],
                   weights: Mapping[Hashable, float | None] | None = None, *, exclude: Iterable[Hashable] = (),
                   **options) -> Comparison:
    """``paired`` over the items two score maps have in common (``{prompt id: cell score}``)."""
    ids, xs, ys = align(a, b, exclude)
    return paired(xs, ys, [(weights or {}).get(k) for k in ids], **options)


# --- which of many items changed --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    key: Hashable
    delta: float
    p: float  # two-sided, against the spread of every item's change
    q: float  # Benjamini-Hochberg adjusted
    changed: bool  # q below the level


GRID_RESOLUTION = 1_000_000  # changes on a grid finer than a millionth count as on none


class Noise(NamedTuple):
    """How far items move by chance: ``scale`` about ``centre``, estimated with ``dof`` degrees of freedom from
    ``n`` changes."""

    centre: float
    scale: float
    dof: int
    n: int
    exact: bool = False  # the centre is 0 for certain: more than half the items did not move


CLIP = 2.5  # changes further than this many scales from the others' mean are left out of the yardstick


@functools.lru_cache(maxsize=8)
def _clipped_share(clip: float) -> float:
    """The variance of a standard normal kept within +-``clip`` (``scipy.stats.truncnorm.var(-clip, clip)``):
    what clipping leaves of a normal spread, to be divided out."""
    from scipy.special import ndtr

    density = math.exp(-clip * clip / 2) / math.sqrt(2 * math.pi)
    return 1 - 2 * clip * density / (2 * ndtr(clip) - 1)


MAD_NORMAL = 0.6744897501960817  # the standard normal's 0.75 quantile (scipy.special.ndtri(0.75))


def normal_mad(values: np.ndarray) -> float:
    """The median absolute deviation from the median, scaled to a normal's standard deviation: what
    ``scipy.stats.median_abs_deviation(values, scale="normal")`` gives (NaN in, NaN out), without importing
    ``scipy.stats`` (0.6 s) on the compare page's path. Held to SciPy's by tests/runs/test_stats_numpy.py."""
    values = np.asarray(values, dtype=float)
    return float(np.median(np.abs(values - np.median(values))) / MAD_NORMAL)


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given: the i-th smallest of m p-values times
    m / i, made non-decreasing from the largest down, at most 1. What ``scipy.stats.false_discovery_control(p,
    method="bh")`` gives (held to it by tests/runs/test_stats_numpy.py), without importing ``scipy.stats``. A
    p-value that is not a number from 0 to 1 (NaN, None) is refused with SciPy's message; one p-value or none is
    returned as it is."""
    p = np.asarray(p, dtype=float)
    if not bool(np.all((p >= 0) & (p <= 1))):
        raise ValueError("`ps` must include only numbers between 0 and 1.")
    m = len(p)
    if m <= 1:
        return p.copy()
    order = np.argsort(p, kind="stable")
    adjusted = p[order] * (m / np.arange(1, m + 1))
    np.minimum.accumulate(adjusted[::-1], out=adjusted[::-1])
    out = np.empty(m)
    out[order] = np.clip(adjusted, 0.0, 1.0)
    return out


def clipped_scale(values: np.ndarray, clip: float = CLIP) -> tuple[float, int]:
    """A spread that real changes do not inflate: iterated sigma clipping. Start from the median and the
    normal-scaled median absolute deviation; keep the values within ``clip`` scales of the centre; take the kept
    values' mean and standard deviation (``ddof=1``, divided by the square root of ``_clipped_share``, so a normal
    spread is estimated without bias); repeat until the kept values no longer change. Returns the scale and how
    many values it rests on (0, 0 with fewer than two)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return 0.0, len(values)
    centre = float(np.median(values))
    scale = normal_mad(values)
    if scale == 0:  # more than half alike: the spread of the others about them
        others = values[values != centre]
        scale = float(np.sqrt(np.mean((others - centre) ** 2))) if len(others) else 0.0
        if scale == 0:
            return 0.0, 0
    correction = math.sqrt(_clipped_share(clip))
    kept = None
    for _ in range(100):
        keep = np.abs(values - centre) <= clip * scale
        if int(keep.sum()) < 2:
            return 0.0, int(keep.sum())
        if kept is not None and np.array_equal(keep, kept):
            break
        kept = keep
        pool = values[keep]
        centre, scale = float(np.mean(pool)), float(np.std(pool, ddof=1)) / correction
        if scale == 0:
            return 0.0, int(keep.sum())
    return scale, int(kept.sum())


def noise_scale(deltas: np.ndarray) -> Noise:
    """How far items move by chance, measured on the items that moved.

    ``centre`` is the median of every change; it is exact (``exact``) when more than half did not move at all
    (cached responses, deterministic points): 0. ``scale`` is the sigma-clipped standard deviation of the
    changes that are not 0 (``clipped_scale``), with ``dof`` (the values it rests on, less one): a cell that did
    not move tells nothing about how far cells move by chance, and a real change is kept out of the yardstick
    however many cells did not move. On a grid (``_grid_step``) the zeros that noise alone would give are put back
    (a chance move of under half a step shows 0). Scale 0 when fewer than two moved (those that moved are certain
    changes).

    Before, with more than half unmoved the yardstick was the plain standard deviation of every moved cell, real
    changes included (25 drops of 0.4 among 150 re-judged and 325 cached cells were never listed); with fewer
    than half unmoved the unmoved cells' zeros shrank it (false alarms); and with none unmoved, cutting at 4
    median absolute deviations kept drops of 5 standard deviations inside the yardstick."""
    from scipy.special import ndtr

    deltas = np.asarray(deltas, dtype=float)
    if len(deltas) == 0:
        return Noise(0.0, 0.0, 0, 0)
    centre = float(np.median(deltas))
    zeros = int(np.count_nonzero(deltas == 0))
    exact = zeros * 2 > len(deltas)
    scale, n = clipped_scale(deltas[deltas != 0])
    if scale == 0:
        return Noise(centre, 0.0, 0, n, exact)
    step = _grid_step(deltas)
    if step > 0 and zeros:
        # Changes kept on a grid: a cell that moved by chance less than half a step shows 0 and is left out with
        # the unmoved, which leaves the spread about 3% too wide (noise 0.08, step 0.01). Put back as many zeros
        # as such noise gives (``share`` of the draws), never more than there are.
        share = 2 * float(ndtr(step / (2 * scale))) - 1
        hidden = min(float(zeros), n * share / (1 - share)) if share < 1 else float(zeros)
        scale *= math.sqrt((n - 1) / (n - 1 + hidden))
        n += int(round(hidden))
    return Noise(centre, scale, n - 1, n, exact)


def _grid_step(d: np.ndarray) -> float:
    """The step of the grid the changes lie on: the largest step that divides every change (their greatest
    common divisor, 0.01 or a multiple of it for scores kept to 2 places), or 0 when they lie on no grid of
    a millionth or coarser (unrounded scores). The smallest gap between the changes, as before, is not a
    divisor when the changes skip a step (0.6 and 1.0 lie on 0.2, their gap is 0.4)."""
    units = np.abs(np.asarray(d, dtype=float)) * GRID_RESOLUTION
    whole = np.round(units)
    if len(units) == 0 or not bool(np.all(np.abs(units - whole) < 1e-3)):
        return 0.0
    step = int(np.gcd.reduce(whole.astype(np.int64)))
    return step / GRID_RESOLUTION


def paired_many(pairs: list[tuple[dict, dict]], weights: dict, exclude=()) -> list[Comparison]:
    """Many paired comparisons over the same prompts, drawn from the same resamples (one matrix product)."""
    left_out = set(exclude)
    items = sorted({k for a, b in pairs for k in a if k in b and k not in left_out}, key=str)
    index = {k: i for i, k in enumerate(items)}
    sides = []
    for a, b in pairs:
        ids, xs, ys = align(a, b, left_out)
        sides.append((np.array([index[k] for k in ids], dtype=np.int64), np.array(xs, dtype=float),
                      np.array(ys, dtype=float), np.array([item_weight(weights.get(k)) for k in ids], dtype=float)))
    return paired_sides(len(items), sides)


def paired_sides(items: int, sides: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
                 ) -> list[Comparison]:
    """``paired_many`` over arrays: per pair ``(rows, xs, ys, ws)``, the items scored on both sides (``rows``: their
    places among the ``items`` resampled, in that order), their two scores and weights (None as 1, below 0 as 0)."""
    diffs, w = np.zeros((items, len(sides))), np.zeros((items, len(sides)))
    for j, (rows, xs, ys, ws) in enumerate(sides):
        diffs[rows, j] = xs - ys
        w[rows, j] = ws
    out = []
    results = bootstrap_means(diffs, w) if items else [(None, None, None)] * len(sides)
    for (rows, xs, ys, ws), (delta, low, high) in zip(sides, results):
        binary = paired_binary_interval(xs, ys, ws) if len(rows) else None
        if binary is not None:
            low, high = binary
        # Summed in order, one by one (``accumulate``), as ``sum`` over the items did: the same float to the bit.
        total = np.add.accumulate(ws)[-1] if len(ws) else 0
        mean_a = np.add.accumulate(xs * ws)[-1] / total if total else None
        mean_b = np.add.accumulate(ys * ws)[-1] / total if total else None
        out.append(Comparison(delta, low, high, len(rows), verdict(low, high), mean_a, mean_b))
    return out


def changed(deltas: Mapping[Hashable, float], *, level: float = FDR_LEVEL) -> list[Change]:
    """Every item's change with its p-value and BH-adjusted q-value, most significant first (then largest).

    An item's p-value is the chance, were it only noise like the others, of a change at least as far from
    their median: ``2 * t.sf(x, dof)`` with ``x = (|change - median| - step / 2) / (scale * sqrt(1 + pi / 2n))``
    (``noise_scale``: the sigma-clipped spread of the items that moved): Student's t because the scale is
    estimated (``dof`` its degrees of freedom), the factor under the root for the median's own error (its
    variance is pi / 2n of the scale's square at the normal; none when the median is 0 for certain, more than
    half unmoved), and half a grid step off because changes of scores kept to 2 places are themselves kept to 2
    places: a change shown as 0.38 is any from 0.375 up (``_grid_step``; 0 for unrounded scores).

    An item that did not move (change exactly 0: a cached response, deterministic points) cannot have changed:
    its p and q are 1 and Benjamini-Hochberg runs over the items that moved. Were the unmoved counted among the
    tests, caching would make every real change harder to list (BH's bar is rank x level / tests)."""
    keys = list(deltas)
    if not keys:
        return []
    d = np.array([deltas[k] for k in keys], dtype=float)
    p, q, listed = change_tests(d, level=level)
    out = [Change(k, float(x), float(pi), float(qi), bool(c)) for k, x, pi, qi, c in zip(keys, d, p, q, listed)]
    out.sort(key=lambda c: change_order(c.q, c.delta, c.key))
    return out


def change_order(q: float, delta: float, key) -> tuple:
    """Where a change is listed: most significant first, then the largest, then by its key."""
    return q, -abs(delta), str(key)


def change_tests(d: np.ndarray, *, level: float = FDR_LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``changed`` over an array of changes: each one's p-value, q-value and whether it changed, in the order given."""
    from scipy.special import stdtr  # Student's t CDF, without scipy.stats's 0.6 s import

    d = np.asarray(d, dtype=float)
    if len(d) == 0:
        return np.ones(0), np.ones(0), np.zeros(0, dtype=bool)
    noise = noise_scale(d)
    centre = noise.centre
    if noise.scale > 0:
        distance = np.maximum(np.abs(d - centre) - _grid_step(d) / 2, 0.0)
        x = distance / (noise.scale * (1.0 if noise.exact else math.sqrt(1 + math.pi / (2 * noise.n))))
        p = np.where(d != 0, np.minimum(1.0, 2 * stdtr(noise.dof, -x)), 1.0)
    else:  # nothing moved but (perhaps) a few: those few are certain changes, the rest certainly not
        p = np.where((d != centre) & (d != 0), 0.0, 1.0)
    moved = d != 0  # a cell that did not move cannot have changed: never listed, and not counted among the tests
    q = np.ones(len(p))
    if np.count_nonzero(moved) > 1:
        q[moved] = benjamini_hochberg(p[moved])
    else:
        q[moved] = p[moved]
    return p, q, (q < level) & (d != centre) & (d != 0)


class Movement(NamedTuple):
    """How the items moved as a whole, beside which of them changed (``changed``): ``tested`` items, ``moved`` of
    them not by 0, their median change, and ``alike``: the one change every item made when all moved by the same
    amount (then no item stands out from the others, however far they all went), else None."""

    tested: int
    moved: int
    median: float | None
    alike: float | None

    @property
    def all_moved(self) -> bool:
        return self.tested > 0 and self.moved == self.tested

    @property
    def unmoved(self) -> int:
        return self.tested - self.moved


def movement(deltas: Mapping[Hashable, float] | np.ndarray) -> Movement:
    """``deltas``: ``{item: change}``, or the changes as an array."""
    d = np.array(list(deltas.values()) if isinstance(deltas, Mapping) else deltas, dtype=float)
    if len(d) == 0:
        return Movement(0, 0, None, None)
    moved = int(np.count_nonzero(d))
    alike = float(d[0]) if moved == len(d) and np.allclose(d, d[0], rtol=0, atol=1e-9) else None
    return Movement(len(d), moved, float(np.median(d)), alike)


# --- the CI gate: is some variant worse than in the base, beyond doubt? -----------------------------------


GATE_LEVEL = 0.001  # the chance that a run with no true change fails the gate, all its variants together
GATE_RULE = (f"one-sided paired sign-flip test per variant, Holm over the variants compared, family-wise level "
             f"{GATE_LEVEL:g} ({1 - GATE_LEVEL:.1%})")
EXACT_SIGNS = 24  # up to this many prompts that moved, the gate's test counts every sign pattern


@dataclass(frozen=True, slots=True)
class GateTest:
    """One variant of a run against itself in the base, for the gate."""

    key: Hashable
    delta: float | None  # this run's mean minus the base's, prompt-weighted
    n: int
    p: float  # one-sided: the chance of a drop at least this large were the variant unchanged (``worse_p``)
    adjusted: float  # Holm-adjusted over the variants compared
    fails: bool  # adjusted below the level, and the shown verdict "worse"

    def to_dict(self) -> dict:
        return {"delta": self.delta, "n": self.n, "p": self.p, "pHolm": self.adjusted, "fails": self.fails}


def worse_p(a: Sequence[float], b: Sequence[float], weights: Sequence[float | None] | None = None) -> float:
    """One-sided p-value that ``a`` is below ``b`` (aligned item by item): the paired sign-flip (randomization)
    test. Were nothing changed, each prompt's two scores could as well have come the other way round, so each
    prompt's weighted difference ``w (a - b)`` is as likely to have either sign; ``p`` is the share of those
    sign patterns whose sum is at most the observed sum. It needs no normality, and prompts that did not move
    (a cached response) play no part. Counted exactly: when every prompt that moved moved by the same amount
    (pass/fail scores: the sign test, a binomial tail); when at most ``EXACT_SIGNS`` moved (every pattern
    counted, ``_sign_flip_share``); and when the moves lie on a grid (scores kept to 2 places, ``_grid_step``)
    small enough to count on (``_sign_flip_grid``: the sum's whole distribution on that grid). Only beyond
    that (``GRID_WORK``: over about 1,300 moves of a whole point) the normal approximation to that same
    distribution, corrected for continuity by half the spacing of the sums, ``ndtr((sum(w d) + h) /
    sqrt(sum((w d)^2)))``, ``h`` one grid step, or the common size when more than half the moves share it. The normal
    curve without the correction, as before, made the chance of a false fail up to 0.13% where 0.1% is
    promised, when the moves were nearly all alike (60 moves, all but one of the same size). 1 when no prompt
    moved."""
    from scipy.special import bdtr, ndtr  # binomial and normal CDFs, without scipy.stats's 0.6 s import

    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    x = _weights(weights, len(d)) * d
    x = x[x != 0]
    if len(x) == 0:
        return 1.0
    observed = float(x.sum())
    size = np.abs(x)
    if np.allclose(size, size[0], rtol=1e-9, atol=0):  # every move alike: the number that went up decides
        return float(bdtr(int(np.count_nonzero(x > 0)), len(x), 0.5))
    if len(x) <= EXACT_SIGNS:
        return _sign_flip_share(x, observed)
    step = _grid_step(x)
    if step > 0:
        exact = _sign_flip_grid(x, step)
        if exact is not None:
            return exact
    sizes, counts = np.unique(np.round(size, 9), return_counts=True)
    most = int(np.argmax(counts))
    # Half the spacing of the sums: one grid step, or, when more than half the moves are of one size m, m itself
    # (the sums then bunch 2m apart, the binomial's lattice): the normal curve is never left below the count.
    half = max(step, float(sizes[most])) if counts[most] * 2 > len(x) else step
    return float(min(1.0, ndtr((observed + half) / math.sqrt(float(np.dot(x, x))))))


GRID_WORK = 300_000  # distinct move sizes x frequencies counted: beyond it (about 30 ms), the normal approximation


def _sign_flip_grid(x: np.ndarray, step: float) -> float | None:
    """The share of the ``2^k`` sign patterns of ``|x|`` whose sum is at most ``sum(x)``, counted exactly on the
    grid the moves lie on: in units of ``step`` each move is a whole number ``u``, and the sum of ``c`` moves of
    size ``u`` with free signs has the generating function ``((z^u + z^-u) / 2)^c``. The product over the sizes,
    taken at the ``N``-th roots of unity (``cos(2 pi f u / N)^c``), is the discrete Fourier transform of the
    sum's distribution over ``[-U, U]`` (``U`` the sum of every ``u``, ``N > 2U``); one inverse transform gives
    every probability. None when that is more work than ``GRID_WORK``."""
    units = np.round(np.abs(x) / step).astype(np.int64)
    observed = int(np.sum(np.where(x > 0, units, -units)))
    total = int(units.sum())
    sizes, counts = np.unique(units, return_counts=True)
    n = 1 << (2 * total + 1).bit_length()
    if len(sizes) * (n // 2 + 1) > GRID_WORK:
        return None
    angle = 2 * np.pi * np.arange(n // 2 + 1) / n
    spectrum = np.ones(n // 2 + 1)
    for u, c in zip(sizes.tolist(), counts.tolist()):
        base = np.cos(angle * u)
        while c:  # cos^c by squaring: a few products instead of a power per frequency (ten times faster)
            if c & 1:
                spectrum *= base
            c >>= 1
            if c:
                base = base * base
    pmf = np.fft.irfft(spectrum, n)
    sums = np.arange(-total, observed + 1)
    return float(min(1.0, max(0.0, pmf[sums % n].sum())))


def _sign_flip_share(x: np.ndarray, observed: float) -> float:
    """The share of the ``2^k`` sign patterns of ``|x|`` whose sum is at most ``observed``, counted exactly by
    meeting in the middle (the sums of each half's ``2^(k/2)`` patterns, one side sorted and searched).
    ``scipy.stats.permutation_test`` does the same count by enumeration, at about 0.5 s for 16 prompts: too slow
    for a page that compares ten variants."""
    m = np.abs(x)
    half = len(m) // 2

    def sums(v: np.ndarray) -> np.ndarray:
        signs = 1 - 2 * ((np.arange(2 ** len(v))[:, None] >> np.arange(len(v))) & 1)
        return signs @ v

    left, right = sums(m[:half]), np.sort(sums(m[half:]))
    slack = 1e-9 * max(1.0, float(m.sum()))  # a pattern that ties the observed sum counts, rounding aside
    count = int(np.searchsorted(right, observed - left + slack, side="right").sum())
    return count / 2 ** len(m)


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment (family-wise): the i-th smallest of m p-values times m - i + 1, made
    non-decreasing, at most 1. (SciPy has Benjamini-Hochberg, ``false_discovery_control``, but not Holm.)"""
    p = np.asarray(p, dtype=float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def gate(pairs: Mapping[Hashable, tuple[Sequence[float], Sequence[float], Sequence[float | None] | None]],
         verdicts: Mapping[Hashable, str] | None = None, *, level: float = GATE_LEVEL) -> list[GateTest]:
    """The regression gate over a run's variants, each against itself in the base: ``{variant: (this run's
    scores, the base's, prompt weights or None)}``, aligned item by item (``align``).

    A variant fails when the chance of a drop at least as large as its own, were nothing changed (``worse_p``),
    is below ``level`` after Holm's adjustment over every variant compared (with two or more items): the chance
    that a run with no true change fails the gate is then at most ``level``, however many variants it has. The
    95% verdicts alone would fail such a run about 2.5% of the time per variant. With ``verdicts`` (the shown
    ones, ``{variant: verdict}``) a variant fails only where its verdict is "worse" as well, so the gate never
    fails on a variant shown as "can't tell". In the order given."""
    keys = list(pairs)
    tests, deltas, sizes = [], [], []
    for key in keys:
        a, b, weights = pairs[key]
        a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        w = _weights(weights, len(a_))
        sizes.append(int(np.count_nonzero(w)))
        deltas.append(float(np.average(a_ - b_, weights=w)) if w.sum() > 0 else None)
        tests.append(worse_p(a_, b_, weights))
    p = np.array(tests, dtype=float)
    tested = np.array([n >= 2 for n in sizes], dtype=bool)
    adjusted = np.ones(len(keys))
    adjusted[tested] = holm(p[tested])
    out = []
    for i, key in enumerate(keys):
        fails = bool(adjusted[i] < level and (verdicts is None or verdicts.get(key) == "worse"))
        out.append(GateTest(key, deltas[i], sizes[i], float(p[i]), float(adjusted[i]), fails))
    return out


# --- trials ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrialFigures:
    cells: int  # cells with two or more trials
    pass_at_k: float | None  # mean over those cells of the unbiased pass@k (``scoring.pass_at_k``)
    pass_hat_k: float | None  # mean unbiased pass^k: every one of k trials passes
    flaky: float | None  # share of those cells whose trials disagree
    flaky_cells: int = 0

    def to_dict(self) -> dict:
        return {"cells": self.cells, "passAtK": self.pass_at_k, "passHatK": self.pass_hat_k, "flaky": self.flaky,
                "flakyCells": self.flaky_cells}


def trials_disagree(outcome) -> bool:
    """A cell's trials disagree: their verdicts differ, or (without verdicts) their scores, as shown (2 places)."""
    verdicts = {t.verdict for t in outcome.trials if t.verdict is not None}
    if len(verdicts) > 1:
        return True
    if verdicts:
        return False
    shown = {round(t.score + 1e-9, 2) for t in outcome.trials if t.score is not None}
    return len(shown) > 1


def trial_figures(outcomes: Iterable) -> TrialFigures:
    """Over cell outcomes (``scoring.CellOutcome``) with more than one trial: pass@k, pass^k, flakiness."""
    many = [o for o in outcomes if o is not None and len(o.trials) > 1]
    if not many:
        return TrialFigures(0, None, None, None)
    at = [o.pass_at_k for o in many if o.pass_at_k is not None]
    hat = [o.pass_hat_k for o in many if o.pass_hat_k is not None]
    flaky = sum(1 for o in many if trials_disagree(o))
    return TrialFigures(len(many), float(np.mean(at)) if at else None, float(np.mean(hat)) if hat else None,
                        flaky / len(many), flaky)


def finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x
