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

Ratings are shown on an Elo-like scale: ``ELO_BASE + 400 * theta / ln 10``, so 400 points apart means the
higher one wins ten times in eleven. Pure Python and NumPy/SciPy: no Django here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

# SciPy is imported where it is used (its import costs every process's start-up otherwise).

PRIOR = 0.1  # ridge penalty on each strength: a N(0, 1/0.1) prior, about +-1,250 Elo points at 1 sd
ELO_BASE = 1000.0
ELO_PER_UNIT = 400.0 / math.log(10.0)
DEFAULT_BOOTSTRAP = 500
DEFAULT_SEED = 20_26
OUTCOMES = {"a": 1.0, "b": 0.0, "tie": 0.5}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One judgement: model ``a`` against model ``b``; ``outcome`` is ``a``, ``b`` or ``tie``."""

    a: str
    b: str
    outcome: str


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
    if n and bootstrap > 0 and pair_of:
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(n, kinds[:3 * len(pair_of)] / n, size=bootstrap)
        samples = elo(fit_strengths(*to_pairs(draws), k, prior=prior))
        low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    else:
        low = high = elo(theta)
    out = [Rating(model=name, strength=float(theta[i]), rating=float(elo(theta[i])), low=float(low[i]),
                  high=float(high[i]), judgements=int(tally[i].sum()), wins=int(tally[i, 0]),
                  losses=int(tally[i, 1]), ties=int(tally[i, 2]))
           for i, name in enumerate(names)]
    return sorted(out, key=lambda r: (-r.strength, r.model))


def win_probability(a: Rating, b: Rating) -> float:
    """The fitted chance that ``a`` is preferred to ``b`` (a tie counting one half)."""
    from scipy.special import expit

    return float(expit(a.strength - b.strength))
