"""Bradley-Terry ratings of model variants from a reviewer's pairwise preferences, with bootstrap intervals.

A comparison says which of two models a person preferred for one prompt: ``a``, ``b`` or a tie. The
Bradley-Terry model gives each model a strength ``theta`` with P(i beats j) = 1 / (1 + exp(theta_j - theta_i)).
**A tie counts as half a win for each side** (not Davidson's tie parameter): simple, and it keeps every
figure a plain maximum-likelihood fit of win fractions.

The fit maximises the log-likelihood with a small ridge penalty (``PRIOR``, a Gaussian prior on each
strength): a model that won every one of its comparisons still gets a finite rating, models compared with
nobody stay at the middle, and the strengths come out centred on zero (the penalty removes the model's
one free shift). The likelihood depends only on, for each pair of models, how many times they met and how
many of those the first won, so a fit costs the same for ten judgements or ten thousand.

Intervals: the comparisons are resampled with replacement (``bootstrap`` times, from a fixed ``seed``, so a
page shows the same interval each time it is read) and refitted; the 2.5th and 97.5th percentiles of each
model's rating give its 95 % interval. A resample of n judgements is a multinomial draw over the distinct
(pair, outcome) kinds, and every resample is fitted at once as one separable problem by
``scipy.optimize.minimize`` (L-BFGS-B with the exact gradient).

Ranks: in every resample each model's rank is 1 + the number of models rated above it; the 2.5th and 97.5th
percentiles of those ranks give its **rank interval**, and the share of resamples in which it is first its
**chance of being first** (``p_first``; models level at the top share it). **Tied groups**: walking down the
table, a model joins the group above it while its rank interval overlaps that group's first model's; a new
group starts where it does not. Models in one group are not told apart by these judgements.

**Style control** (``style_ratings``), as Chatbot Arena does it: a logistic regression of each judgement's
outcome on the difference of the two models' indicator vectors plus the differences of their answers' style
(``STYLE_FEATURES``: characters, markdown headers, list items, bold spans; each as ``(a - b) / (a + b)``, 0 when
both are 0), fitted by maximum likelihood with the same ridge penalty on every coefficient and ties as half a
win. The model strengths are then what the judgements say beyond length and markdown; the style coefficients
(log-odds per unit of normalised difference) say how much each sways the judges. Its intervals, ranks and
groups come from the same bootstrap, the judgements (with their style) resampled; every resample is solved at
once by Newton's method (its Hessian scattered judgement by judgement), or by L-BFGS-B past ``NEWTON_WIDTH``
parameters.

Ratings are shown on an Elo-like scale: ``ELO_BASE + 400 * theta / ln 10``, so 400 points apart means the
higher one wins ten times in eleven. Pure Python and NumPy/SciPy: no Django here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import numpy as np

# SciPy is imported where it is used (its import costs every process's start-up otherwise).

PRIOR = 0.1  # ridge penalty on each strength: a N(0, 1/0.1) prior, about +-1,250 Elo points at 1 sd
ELO_BASE = 1000.0
ELO_PER_UNIT = 400.0 / math.log(10.0)
DEFAULT_BOOTSTRAP = 500
DEFAULT_SEED = 20_26
OUTCOMES = {"a": 1.0, "b": 0.0, "tie": 0.5}
STYLE_FEATURES = ("length", "headers", "lists", "bold")
STYLE_WORDS = {"length": "answer length (characters)", "headers": "markdown headers", "lists": "list items",
               "bold": "bold spans"}
STYLE_TEXT_CHARS = 1_000_000  # style is counted on at most this much of an answer (the length is its whole)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One judgement: model ``a`` against model ``b``; ``outcome`` is ``a``, ``b`` or ``tie``. ``style``: the
    normalised differences of the two answers' style (``style_difference``), a minus b; empty when unknown."""

    a: str
    b: str
    outcome: str
    style: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Rating:
    model: str
    strength: float  # theta, natural-log odds scale, centred on zero over the models rated
    rating: float  # Elo-like
    low: float  # 95 % bootstrap interval of ``rating``
    high: float
    judgements: int
    wins: int
    losses: int
    ties: int
    rank: int = 1  # 1 + the models with a higher fitted strength
    rank_low: int = 1  # 95 % bootstrap interval of the rank
    rank_high: int = 1
    p_first: float = 0.0  # share of bootstrap resamples in which this model is first
    group: int = 1  # its tied group (1 the top one): models in one group are not told apart


@dataclass(frozen=True, slots=True)
class Coefficient:
    """A style feature's coefficient: log-odds of being preferred per unit of normalised difference."""

    feature: str
    value: float
    low: float
    high: float

    @property
    def words(self) -> str:
        return STYLE_WORDS.get(self.feature, self.feature)


@dataclass(frozen=True, slots=True)
class StyleFit:
    ratings: list[Rating]
    coefficients: list[Coefficient]
    judgements: int  # the judgements with style known (the ones fitted)


_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.M)
_LIST = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.M)
_BOLD = re.compile(r"\*\*(?=\S)[^*\n]{1,500}?(?<=\S)\*\*|__(?=\S)[^_\n]{1,500}?(?<=\S)__")


def style_of(text: str | None) -> tuple[int, int, int, int]:
    """An answer's style counts, in ``STYLE_FEATURES`` order: characters, headers, list items, bold spans."""
    text = text or ""
    head = text[:STYLE_TEXT_CHARS]
    return (len(text), len(_HEADER.findall(head)), len(_LIST.findall(head)), len(_BOLD.findall(head)))


def style_difference(a: Sequence[float], b: Sequence[float]) -> tuple[float, ...]:
    """``(a - b) / (a + b)`` for each feature (0 when both are 0): in [-1, 1] whatever the answers' size."""
    return tuple(0.0 if x + y <= 0 else (x - y) / (x + y) for x, y in zip(a, b))


def elo(theta):
    return ELO_BASE + ELO_PER_UNIT * np.asarray(theta, dtype=float)


def _pairs(k: int) -> np.ndarray:
    return np.array([(i, j) for i in range(k) for j in range(i + 1, k)], dtype=int).reshape(-1, 2)


def fit_strengths(met: np.ndarray, won: np.ndarray, k: int, *, prior: float = PRIOR) -> np.ndarray:
    """Strengths of ``k`` models for each of B independent data sets at once.

    ``met`` and ``won`` are (B, P) arrays over the P = k(k-1)/2 pairs (i < j, in ``_pairs`` order): how
    many times i and j met, and i's wins among them (a tie counts one half). Returns a (B, k) array.
    """
    met = np.atleast_2d(np.asarray(met, dtype=float))
    won = np.atleast_2d(np.asarray(won, dtype=float))
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    batches = met.shape[0]
    pairs = _pairs(k)
    if k < 2 or batches == 0:
        return np.zeros((batches, k))
    # incidence: d = theta @ incidence gives theta_i - theta_j for every pair
    incidence = np.zeros((k, len(pairs)))
    incidence[pairs[:, 0], np.arange(len(pairs))] = 1.0
    incidence[pairs[:, 1], np.arange(len(pairs))] = -1.0
    lost = met - won

    def objective(flat):
        theta = flat.reshape(batches, k)
        d = theta @ incidence
        value = -(won * log_expit(d) + lost * log_expit(-d)).sum() + 0.5 * prior * (theta ** 2).sum()
        slope = -(won - met * expit(d))  # d(value)/d(d)
        gradient = slope @ incidence.T + prior * theta
        return value, gradient.ravel()

    result = minimize(objective, np.zeros(batches * k), jac=True, method="L-BFGS-B",
                      options={"maxiter": 1000, "gtol": 1e-9, "ftol": 1e-14})
    return result.x.reshape(batches, k)


def ratings(comparisons: Iterable[Comparison], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = DEFAULT_SEED,
            prior: float = PRIOR, models: Sequence[str] | None = None) -> list[Rating]:
    """Every model's rating and 95 % interval, best first (``models``: also list these, unjudged ones too)."""
    comparisons = [c for c in comparisons if c.a != c.b and c.outcome in OUTCOMES]
    names = sorted({*(models or ()), *(c.a for c in comparisons), *(c.b for c in comparisons)})
    k = len(names)
    if k == 0:
        return []
    index = {name: i for i, name in enumerate(names)}
    pair_of = {tuple(p): n for n, p in enumerate(_pairs(k).tolist())}

    # Each judgement is one of 3 kinds per pair: the lower-indexed model won, lost, or tied.
    kinds = np.zeros(max(1, 3 * len(pair_of)))
    tally = np.zeros((k, 3), dtype=int)  # wins, losses, ties
    for c in comparisons:
        i, j, score = index[c.a], index[c.b], OUTCOMES[c.outcome]
        if i > j:
            i, j, score = j, i, 1.0 - score
        kinds[3 * pair_of[(i, j)] + (0 if score == 1.0 else 1 if score == 0.0 else 2)] += 1
        column = 2 if score == 0.5 else 0 if score == 1.0 else 1
        tally[i, column] += 1
        tally[j, column if column == 2 else 1 - column] += 1

    def to_pairs(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = counts.reshape(counts.shape[0], -1, 3)
        return counts.sum(axis=2), counts[:, :, 0] + 0.5 * counts[:, :, 2]

    n = len(comparisons)
    theta = fit_strengths(*to_pairs(kinds[None, :3 * len(pair_of)]), k, prior=prior)[0] if pair_of else np.zeros(k)
    samples = None
    if n and bootstrap > 0 and pair_of:
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(n, kinds[:3 * len(pair_of)] / n, size=bootstrap)
        samples = fit_strengths(*to_pairs(draws), k, prior=prior)
    return _rated(names, theta, samples, tally)


def _ranks(strengths: np.ndarray) -> np.ndarray:
    """1 + how many models are strictly stronger, for each row of a (B, k) array."""
    return 1 + (strengths[:, None, :] > strengths[:, :, None]).sum(axis=2)


def _rated(names: list[str], theta: np.ndarray, samples: np.ndarray | None, tally: np.ndarray) -> list[Rating]:
    """The table: ratings, intervals, ranks and their intervals, chance of being first, tied groups."""
    k = len(names)
    rank = _ranks(theta[None, :])[0]
    if samples is not None:
        low, high = np.percentile(elo(samples), [2.5, 97.5], axis=0)
        ranks = _ranks(samples)
        rank_low = np.floor(np.percentile(ranks, 2.5, axis=0)).astype(int)
        rank_high = np.ceil(np.percentile(ranks, 97.5, axis=0)).astype(int)
        top = samples >= samples.max(axis=1, keepdims=True) - 1e-12
        p_first = (top / top.sum(axis=1, keepdims=True)).mean(axis=0)
    else:
        low = high = elo(theta)
        rank_low = rank_high = rank
        top = theta >= theta.max() - 1e-12
        p_first = top / top.sum()
    out = [Rating(model=name, strength=float(theta[i]), rating=float(elo(theta[i])), low=float(low[i]),
                  high=float(high[i]), judgements=int(tally[i].sum()), wins=int(tally[i, 0]),
                  losses=int(tally[i, 1]), ties=int(tally[i, 2]), rank=int(rank[i]),
                  rank_low=int(min(rank_low[i], rank[i])), rank_high=int(max(rank_high[i], rank[i])),
                  p_first=float(p_first[i]))
           for i, name in enumerate(names)]
    out.sort(key=lambda r: (-r.strength, r.model))
    return [replace(r, group=g) for r, g in zip(out, tied_groups(out))]


def tied_groups(rated: Sequence[Rating]) -> list[int]:
    """Group numbers for ratings listed best first: a model joins the group above it while its rank interval
    overlaps the interval of that group's first model; otherwise it starts the next group."""
    groups: list[int] = []
    leader = None
    for r in rated:
        if leader is None or r.rank_low > leader.rank_high:
            leader = r
            groups.append((groups[-1] if groups else 0) + 1)
        else:
            groups.append(groups[-1])
    return groups


def fit_style(y: np.ndarray, first: np.ndarray, second: np.ndarray, style: np.ndarray, k: int,
              weights: np.ndarray, *, prior: float = PRIOR) -> np.ndarray:
    """Maximum-likelihood strengths and style coefficients for B weightings of the same n judgements at once.

    ``y``: each judgement's score for ``first`` (1, 0, or 0.5 for a tie); ``first``/``second``: model indices;
    ``style``: (n, F) normalised style differences, first minus second; ``weights``: (B, n), how often each
    judgement counts in each data set. Maximises sum w (y log s(d) + (1 - y) log s(-d)) - prior/2 |params|^2
    with d = theta_first - theta_second + style . beta. Returns (B, k + F): strengths then coefficients."""
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    batches, n = weights.shape
    features = style.shape[1]
    width = k + features
    incidence = np.zeros((k, n))
    incidence[first, np.arange(n)] += 1.0
    incidence[second, np.arange(n)] -= 1.0
    design = np.vstack([incidence, style.T])  # (k + F, n): d = params @ design

    if width <= NEWTON_WIDTH:
        return _newton(y, design, weights, prior, first, second, style, k)

    def objective(flat):
        params = flat.reshape(batches, width)
        d = params @ design
        value = -(weights * (y * log_expit(d) + (1.0 - y) * log_expit(-d))).sum() + 0.5 * prior * (params ** 2).sum()
        slope = -weights * (y - expit(d))
        gradient = slope @ design.T + prior * params
        return value, gradient.ravel()

    result = minimize(objective, np.zeros(batches * width), jac=True, method="L-BFGS-B",
                      options={"maxiter": 2000, "gtol": 1e-9, "ftol": 1e-14})
    return result.x.reshape(batches, width)


NEWTON_WIDTH = 130  # up to this many parameters, every data set is solved by Newton's method at once
DENSE_WIDTH = 24  # up to this many, its Hessian is a dense product; beyond, scattered (``_hessian``)


def _hessian(curvature: np.ndarray, first: np.ndarray, second: np.ndarray, style: np.ndarray, k: int
             ) -> np.ndarray:
    """sum_n curvature[b, n] x_n x_n^T for every data set b, with x_n = e_first - e_second (+) style_n, built
    by scattering each judgement into its few cells: O(B n F^2), not O(B n (k + F)^2)."""
    batches, n = curvature.shape
    features = style.shape[1]
    width = k + features
    base = (np.arange(batches) * width * width)[:, None]
    cells, values = [], []

    def put(rows, columns, value):
        cells.append((base + rows * width + columns).ravel())
        values.append(np.broadcast_to(value, (batches, n)).ravel())

    put(first, first, curvature)
    put(second, second, curvature)
    put(first, second, -curvature)
    put(second, first, -curvature)
    for f in range(features):
        crossed = curvature * style[:, f]
        put(first, k + f, crossed)
        put(k + f, first, crossed)
        put(second, k + f, -crossed)
        put(k + f, second, -crossed)
    hessian = np.bincount(np.concatenate(cells), np.concatenate(values),
                          minlength=batches * width * width).reshape(batches, width, width)
    hessian[:, k:, k:] += np.einsum("bn,nf,ng->bfg", curvature, style, style, optimize=True)
    return hessian


def _newton(y: np.ndarray, design: np.ndarray, weights: np.ndarray, prior: float, first: np.ndarray,
            second: np.ndarray, style: np.ndarray, k: int) -> np.ndarray:
    """The same penalised fit by Newton-Raphson, all data sets at once (the objective is strictly convex; a step
    that would not lower a data set's objective is halved)."""
    from scipy.special import expit, log_expit

    batches = weights.shape[0]
    width = design.shape[0]
    params = np.zeros((batches, width))
    ridge = prior * np.eye(width)

    def value(p):
        d = p @ design
        # y log s(d) + (1 - y) log s(-d) = log s(d) - (1 - y) d, as log s(-d) = log s(d) - d: one log_expit
        return -(weights * (log_expit(d) - (1.0 - y) * d)).sum(axis=1) + 0.5 * prior * (p ** 2).sum(axis=1)

    current = value(params)
    for _ in range(100):
        d = params @ design
        probability = expit(d)
        gradient = -(weights * (y - probability)) @ design.T + prior * params
        curvature = weights * probability * (1.0 - probability)
        if width <= DENSE_WIDTH:  # a dense product is quicker for a few parameters
            hessian = np.matmul(design[None] * curvature[:, None, :], design.T) + ridge
        else:
            hessian = _hessian(curvature, first, second, style, k) + ridge
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        scale = np.ones(batches)
        for _ in range(30):
            trial = value(params - scale[:, None] * step)
            worse = trial > current + 1e-12 * (1.0 + np.abs(current))
            if not worse.any():
                break
            scale[worse] *= 0.5
        params = params - scale[:, None] * step
        current = value(params)
        if np.abs(scale[:, None] * step).max() < 1e-10:
            break
    return params


def style_ratings(comparisons: Iterable[Comparison], *, bootstrap: int = DEFAULT_BOOTSTRAP,
                  seed: int = DEFAULT_SEED, prior: float = PRIOR,
                  models: Sequence[str] | None = None) -> StyleFit:
    """Ratings controlled for style, from the judgements whose style is known (``Comparison.style``), with
    the style coefficients; the same table as ``ratings`` otherwise."""
    width = len(STYLE_FEATURES)
    comparisons = [c for c in comparisons if c.a != c.b and c.outcome in OUTCOMES and len(c.style) == width
                   and all(math.isfinite(x) for x in c.style)]
    names = sorted({*(models or ()), *(c.a for c in comparisons), *(c.b for c in comparisons)})
    k, n = len(names), len(comparisons)
    if k == 0:
        return StyleFit([], [], 0)
    index = {name: i for i, name in enumerate(names)}
    first = np.array([index[c.a] for c in comparisons], dtype=int)
    second = np.array([index[c.b] for c in comparisons], dtype=int)
    y = np.array([OUTCOMES[c.outcome] for c in comparisons], dtype=float)
    style = np.array([c.style for c in comparisons], dtype=float).reshape(n, width)
    tally = np.zeros((k, 3), dtype=int)
    for i, j, score in zip(first, second, y):
        column = 2 if score == 0.5 else 0 if score == 1.0 else 1
        tally[i, column] += 1
        tally[j, column if column == 2 else 1 - column] += 1
    if n == 0:
        return StyleFit(_rated(names, np.zeros(k), None, tally), [], 0)
    fitted = fit_style(y, first, second, style, k, np.ones((1, n)), prior=prior)[0]
    samples = None
    coefficient_low = coefficient_high = fitted[k:]
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=bootstrap)
        drawn = fit_style(y, first, second, style, k, weights, prior=prior)
        samples = drawn[:, :k]
        coefficient_low, coefficient_high = np.percentile(drawn[:, k:], [2.5, 97.5], axis=0)
    coefficients = [Coefficient(feature, float(fitted[k + f]), float(coefficient_low[f]), float(coefficient_high[f]))
                    for f, feature in enumerate(STYLE_FEATURES)]
    return StyleFit(_rated(names, fitted[:k], samples, tally), coefficients, n)


def win_probability(a: Rating, b: Rating) -> float:
    """The fitted chance that ``a`` is preferred to ``b`` (a tie counting one half)."""
    from scipy.special import expit

    return float(expit(a.strength - b.strength))


VERDICT_BOOTSTRAP = 200  # resamples behind a style verdict: one alternative among many, kept quick (bench_robustness)


def style_verdicts(comparisons: Iterable[Comparison], pairs: Iterable[tuple[str, str]], *,
                   bootstrap: int = VERDICT_BOOTSTRAP, seed: int = DEFAULT_SEED, prior: float = PRIOR
                   ) -> dict[tuple[str, str], str]:
    """For each ``(a, b)``, the verdict of the style-controlled fit (``style_ratings``'s model and bootstrap):
    ``better`` when the 95 % bootstrap interval of ``theta_a - theta_b`` lies above 0 (``a`` is preferred beyond
    what length and markdown explain), ``worse`` when below, else ``cant_tell``. Only pairs whose two models both
    have a judgement with known style get a verdict (a model nobody judged has no say); no bootstrap, no verdict
    but "can't tell". The robustness study's "style" alternative (runs/engine/robustness.py)."""
    width = len(STYLE_FEATURES)
    comparisons = [c for c in comparisons if c.a != c.b and c.outcome in OUTCOMES and len(c.style) == width
                   and all(math.isfinite(x) for x in c.style)]
    judged = {m for c in comparisons for m in (c.a, c.b)}
    wanted = [(a, b) for a, b in pairs if a in judged and b in judged and a != b]
    if not wanted:
        return {}
    names = sorted(judged)
    index = {name: i for i, name in enumerate(names)}
    k, n = len(names), len(comparisons)
    if bootstrap <= 0:
        return {pair: "cant_tell" for pair in wanted}
    # Equal judgements (the same two models, outcome and style) are one row with a count: a resample of the n
    # judgements is then a multinomial draw over the distinct rows (each with its share of n), the same
    # distribution in fewer columns.
    kinds: dict[tuple, int] = {}
    for c in comparisons:
        key = (index[c.a], index[c.b], OUTCOMES[c.outcome], tuple(c.style))
        kinds[key] = kinds.get(key, 0) + 1
    rows = list(kinds)
    first = np.array([r[0] for r in rows], dtype=int)
    second = np.array([r[1] for r in rows], dtype=int)
    y = np.array([r[2] for r in rows], dtype=float)
    style = np.array([r[3] for r in rows], dtype=float).reshape(len(rows), width)
    shares = np.array([kinds[r] for r in rows], dtype=float) / n
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, shares, size=bootstrap)
    drawn = fit_style(y, first, second, style, k, weights, prior=prior)[:, :k]
    out = {}
    for a, b in wanted:
        low, high = np.percentile(drawn[:, index[a]] - drawn[:, index[b]], [2.5, 97.5])
        out[(a, b)] = "better" if low > 0 else "worse" if high < 0 else "cant_tell"
    return out
