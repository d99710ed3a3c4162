"""Anytime-valid decisions for a follow-up run, and how large a follow-up would settle a "can't tell".

A follow-up asks the two models again, on the prompts where they disagreed most, and is looked at as its
answers arrive: after every batch it may stop because the verdict is clear. A fixed-sample interval looked at
again and again would declare a winner by chance far more often than 5%. The interval here is a **confidence
sequence**: with probability at least 95% it holds the true mean difference *at every moment at once*, so
looking after every answer, or stopping as soon as it excludes 0, does not inflate false wins.

The sequence is the predictable plug-in empirical-Bernstein confidence sequence of Waudby-Smith & Ramdas,
"Estimating means of bounded random variables by betting" (JRSS B, 2023), Theorem 2 with eqs. (13)-(15), for
observations in [0, 1]; a paired difference d in [-1, 1] is observed as x = (d + 1) / 2 and the interval mapped
back. With mu_0 = 1/2, sigma2_0 = 1/4::

    mu_t     = (1/2 + sum_{i<=t} x_i) / (t + 1)
    sigma2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)
    lambda_t = min( sqrt(2 log(2/alpha) / (sigma2_{t-1} t log(1 + t))), c )        c = 1/2
    v_t      = 4 (x_t - mu_{t-1})^2,   psi_E(l) = (-log(1 - l) - l) / 4
    C_t      = sum lambda_i x_i / sum lambda_i  +-  (log(2/alpha) + sum v_i psi_E(lambda_i)) / sum lambda_i

intersected with [0, 1] and with every earlier C_s (the running intersection is still a confidence sequence).
Its guarantee is for observations whose conditional mean is one number: under "no difference on any chosen
prompt" (every paired difference has mean 0) a false "better" or "worse" happens at most 5% of the time,
however often it is looked at (tests/bench/bench_followup.py: 200 seeded null follow-ups, looked at after every
10 answers).

``plan``: from the original run's per-prompt paired differences, the prompts where the two disagree most and how
many answers the sequence would need to decide when the true difference is the one observed, at about 84%
power.

Pure NumPy: no Django here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

ALPHA = 0.05
CAP = 0.5  # c in lambda_t: the paper suggests 1/2 or 3/4
METHOD = ("anytime-valid 95% confidence sequence (predictable plug-in empirical Bernstein, Waudby-Smith & Ramdas "
          "2023) over the paired differences")
PROMPTS_MAX = 20  # the follow-up asks at most this many prompts again
TRIALS_MAX = 100  # and each at most this many times per model
POWER_Z = 1.0  # the planned size decides at about Phi(1.0) = 84% when the observed difference is the true one


@dataclass(frozen=True, slots=True)
class Sequential:
    """The confidence sequence after ``n`` paired differences."""

    n: int
    mean: float | None  # the plain mean of the differences
    low: float | None  # the sequence's interval for the mean difference, in [-1, 1]
    high: float | None
    verdict: str  # better (a above b), worse, cant_tell

    def to_dict(self) -> dict:
        return {"n": self.n, "mean": self.mean, "low": self.low, "high": self.high, "verdict": self.verdict,
                "method": METHOD}


def _lambdas(x: np.ndarray, alpha: float, cap: float) -> tuple[np.ndarray, np.ndarray]:
    """lambda_t and v_t of the sequence for observations ``x`` in [0, 1] (t = 1..n)."""
    n = len(x)
    t = np.arange(1, n + 1, dtype=float)
    mu = (0.5 + np.cumsum(x)) / (t + 1)  # mu_1..mu_n
    mu_prev = np.concatenate(([0.5], mu[:-1]))  # mu_0..mu_{n-1}
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)  # sigma2_1..sigma2_n
    sigma2_prev = np.concatenate(([0.25], sigma2[:-1]))
    lam = np.minimum(np.sqrt(2 * math.log(2 / alpha) / (sigma2_prev * t * np.log1p(t))), cap)
    v = 4 * (x - mu_prev) ** 2
    return lam, v


def sequence(diffs: Sequence[float], *, alpha: float = ALPHA, cap: float = CAP) -> tuple[np.ndarray, np.ndarray]:
    """The running-intersection interval (low, high) for the mean paired difference after each of ``diffs``
    (each in [-1, 1]), mapped back to [-1, 1]."""
    d = np.clip(np.asarray(diffs, dtype=float), -1.0, 1.0)
    if len(d) == 0:
        return np.array([]), np.array([])
    x = (d + 1) / 2
    lam, v = _lambdas(x, alpha, cap)
    psi = (-np.log1p(-lam) - lam) / 4
    total = np.cumsum(lam)
    centre = np.cumsum(lam * x) / total
    margin = (math.log(2 / alpha) + np.cumsum(v * psi)) / total
    low = np.maximum.accumulate(np.maximum(centre - margin, 0.0))
    high = np.minimum.accumulate(np.minimum(centre + margin, 1.0))
    return 2 * low - 1, 2 * high - 1


def decide(diffs: Sequence[float], *, alpha: float = ALPHA) -> Sequential:
    """The sequence's interval and verdict after all of ``diffs`` (in the order they came)."""
    if not len(diffs):
        return Sequential(0, None, None, None, "cant_tell")
    low, high = sequence(diffs, alpha=alpha)
    lo, hi = float(low[-1]), float(high[-1])
    verdict = "better" if lo > 0 else "worse" if hi < 0 else "cant_tell"
    return Sequential(len(diffs), float(np.mean(diffs)), lo, hi, verdict)


def first_decision(diffs: Sequence[float], *, every: int = 1, alpha: float = ALPHA) -> tuple[int, str]:
    """Looking after every ``every`` differences (and at the end): when the sequence first decided, and what;
    ``(len(diffs), "cant_tell")`` when it never did. What a follow-up that stops once decided ends with."""
    if not len(diffs):
        return 0, "cant_tell"
    low, high = sequence(diffs, alpha=alpha)
    looks = list(range(every - 1, len(diffs), every))
    if not looks or looks[-1] != len(diffs) - 1:
        looks.append(len(diffs) - 1)
    for i in looks:
        if low[i] > 0:
            return i + 1, "better"
        if high[i] < 0:
            return i + 1, "worse"
    return len(diffs), "cant_tell"


def expected_margin(sd: float, n: int, *, alpha: float = ALPHA, cap: float = CAP) -> np.ndarray:
    """The sequence's half-width (in the difference's units) after 1..n observations whose differences have
    standard deviation ``sd``, with the plug-in variance at its expected value."""
    t = np.arange(1, n + 1, dtype=float)
    sigma2 = max((sd / 2) ** 2, 1e-6)  # x = (d + 1) / 2
    sigma2_prev = np.concatenate(([0.25], np.full(n - 1, sigma2)))
    lam = np.minimum(np.sqrt(2 * math.log(2 / alpha) / (sigma2_prev * t * np.log1p(t))), cap)
    psi = (-np.log1p(-lam) - lam) / 4
    return 2 * (math.log(2 / alpha) + np.cumsum(4 * sigma2 * psi)) / np.cumsum(lam)


def answers_needed(delta: float, sd: float, *, limit: int, alpha: float = ALPHA) -> int | None:
    """The fewest paired answers after which the sequence would exclude 0 at about 84% power when the true mean
    difference is ``delta`` and the differences' standard deviation ``sd``; None beyond ``limit``."""
    delta = abs(delta)
    if delta <= 0 or limit <= 0:
        return None
    n = np.arange(1, limit + 1, dtype=float)
    enough = expected_margin(sd, limit, alpha=alpha) + POWER_Z * max(sd, 1e-6) / np.sqrt(n) <= delta
    if not enough.any():
        return None
    return int(np.argmax(enough)) + 1


@dataclass
class Plan:
    """What would settle a "can't tell": which prompts to ask again, how often, and how many answers in all."""

    prompts: list[str]  # ids, most disagreement first
    trials: int  # per prompt and model
    delta: float | None  # the difference the plan is sized for (the observed one)
    sd: float | None  # the observed standard deviation of the paired differences on those prompts
    needed: int | None  # paired answers the sequence would need; None: more than the follow-up can ask
    problem: str | None = None  # why no follow-up is suggested
    disagreement: dict[str, float] = field(default_factory=dict)  # prompt id -> observed a - b

    @property
    def answers(self) -> int:
        """Paired answers the follow-up asks for (each is one answer of each model)."""
        return len(self.prompts) * self.trials

    def to_dict(self) -> dict:
        return {"prompts": self.prompts, "trials": self.trials, "answers": self.answers, "delta": self.delta,
                "sd": self.sd, "needed": self.needed, "problem": self.problem,
                "disagreement": {k: self.disagreement[k] for k in self.prompts}}


def plan(differences: Mapping[str, float], delta: float | None, *, prompts_max: int = PROMPTS_MAX,
         trials_max: int = TRIALS_MAX, alpha: float = ALPHA) -> Plan:
    """A follow-up for a pair: ``differences`` per prompt id (the original run's cell score of a minus b, both
    scored), ``delta`` the pair's observed mean difference. The prompts where the two disagree most (largest
    |a - b|, both ways round: the others say little about which is better); answers enough for the sequence to
    decide at about 84% power if ``delta`` is the true difference, with the observed spread of the
    differences on those prompts; at most ``trials_max`` trials each."""
    moved = sorted(((k, float(d)) for k, d in differences.items() if d is not None and d != 0),
                   key=lambda kd: (-abs(kd[1]), str(kd[0])))
    if not moved:
        return Plan([], 0, delta, None, None, "the two answered every prompt alike: there is nothing a follow-up "
                    "on these prompts could tell apart")
    chosen = moved[:prompts_max]
    values = np.array([d for _, d in chosen])
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else float(abs(values[0]))
    limit = len(chosen) * trials_max
    size = delta if delta else float(np.mean(values))
    needed = answers_needed(size, sd, limit=limit, alpha=alpha) if size else None
    problem = None
    if needed is None:
        needed_text = "no difference was observed" if not size else \
            f"a difference of {abs(size):.2f} with a spread of {sd:.2f} needs more than {limit:,} answers"
        problem = f"{needed_text}; the follow-up asks the most it may ({limit:,}) and may still end can't tell"
        trials = trials_max
    else:
        trials = max(1, math.ceil(needed / len(chosen)))
    return Plan([k for k, _ in chosen], trials, size, sd, needed, problem, dict(chosen))
