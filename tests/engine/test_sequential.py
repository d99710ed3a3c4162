"""The follow-up's anytime-valid confidence sequence (runs/engine/sequential.py), held to the paper's definition
(Waudby-Smith & Ramdas 2023, Theorem 2, eqs. 13-15) written out term by term, and to its time-uniform coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runs.engine import sequential


def paper(xs, alpha=0.05, c=0.5):
    """The PrPl-EB confidence sequence for observations in [0, 1], one step at a time, as the paper writes it."""
    mu_prev, sigma2_prev = 0.5, 0.25
    s_x = s_sq = 0.0
    num = den = pen = 0.0
    low, high, out = 0.0, 1.0, []
    for t, x in enumerate(xs, start=1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (sigma2_prev * t * math.log(1 + t))), c)
        v = 4 * (x - mu_prev) ** 2
        psi = (-math.log(1 - lam) - lam) / 4
        num, den, pen = num + lam * x, den + lam, pen + v * psi
        centre, margin = num / den, (math.log(2 / alpha) + pen) / den
        low, high = max(low, centre - margin, 0.0), min(high, centre + margin, 1.0)
        out.append((low, high))
        s_x += x
        mu = (0.5 + s_x) / (t + 1)
        s_sq += (x - mu) ** 2
        mu_prev, sigma2_prev = mu, (0.25 + s_sq) / (t + 1)
    return out


def test_the_sequence_is_the_papers_term_by_term():
    rng = np.random.default_rng(3)
    for draw in (rng.uniform(-1, 1, 300), rng.choice([-1.0, 0.0, 1.0], 200), np.round(rng.normal(0.1, 0.3, 250)
                                                                                        .clip(-1, 1) * 4) / 4):
        low, high = sequential.sequence(draw)
        expected = paper((draw + 1) / 2)
        assert np.allclose(low, [2 * lo - 1 for lo, _ in expected], atol=1e-12)
        assert np.allclose(high, [2 * hi - 1 for _, hi in expected], atol=1e-12)


def test_it_covers_the_true_mean_at_every_moment_at_once_at_least_95_percent_of_the_time():
    """1,000 sequences of 500 differences of known mean 0.075: the share whose interval ever leaves it out."""
    rng = np.random.default_rng(35)
    values, p = np.array([-0.5, 0.0, 0.25, 0.5]), np.array([0.2, 0.3, 0.3, 0.2])
    true = float(values @ p)
    missed = 0
    for _ in range(1000):
        low, high = sequential.sequence(rng.choice(values, 500, p=p))
        missed += bool(np.any((low > true) | (high < true)))
    assert missed / 1000 <= 0.05


def test_the_verdict_and_the_first_decision_with_looks_every_ten():
    assert sequential.decide([]).verdict == "cant_tell"
    assert sequential.decide([1.0] * 40).verdict == "better"
    assert sequential.decide([-1.0] * 40).verdict == "worse"
    assert sequential.decide([1.0, -1.0] * 40).verdict == "cant_tell"
    n, verdict = sequential.first_decision([1.0] * 100, every=10)
    low, _ = sequential.sequence([1.0] * 100)
    first = int(np.argmax(low > 0)) + 1
    assert verdict == "better" and n == math.ceil(first / 10) * 10


def test_the_plan_takes_the_prompts_that_disagree_most_and_enough_answers():
    diffs = {f"p{i}": d for i, d in enumerate([0.0, 0.5, -0.25, 0.25, 0.75, 0.0, -0.5])}
    plan = sequential.plan(diffs, 0.3, prompts_max=4)
    assert plan.prompts == ["p4", "p1", "p6", "p2"]
    sd = float(np.std([0.75, 0.5, -0.5, -0.25], ddof=1))
    n = plan.needed
    margin = sequential.expected_margin(sd, n)
    assert margin[-1] + sd / math.sqrt(n) <= 0.3 < margin[-2] + sd / math.sqrt(n - 1)
    assert plan.trials == math.ceil(n / 4) and plan.answers >= n
    alike = sequential.plan({"p0": 0.0, "p1": 0.0}, 0.0)
    assert alike.prompts == [] and "alike" in alike.problem
    tiny = sequential.plan(diffs, 0.001, prompts_max=2, trials_max=3)
    assert tiny.needed is None and tiny.trials == 3 and "may still end can't tell" in tiny.problem
