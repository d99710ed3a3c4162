"""Bradley-Terry ratings (runs/engine/ratings.py): the fit, ties, the bootstrap interval, a planted order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import kendalltau

from runs.engine.ratings import (ELO_BASE, PRIOR, Comparison, _pairs, fit_strengths, ratings,
                                 win_probability)


def simulate(strengths: dict[str, float], n: int, seed: int, tie_band: float = 0.0) -> list[Comparison]:
    """``n`` judgements between random pairs; a tie when the draw lands within ``tie_band`` of the odds."""
    rng = np.random.default_rng(seed)
    names = list(strengths)
    out = []
    for _ in range(n):
        i, j = rng.choice(len(names), 2, replace=False)
        p = expit(strengths[names[i]] - strengths[names[j]])
        u = rng.random()
        out.append(Comparison(names[i], names[j], "tie" if abs(u - p) < tie_band else "a" if u < p else "b"))
    return out


@pytest.mark.parametrize("comparisons, expected", [
    ([], []),
    ([Comparison("x", "x", "a")], []),  # a model against itself says nothing
    ([Comparison("x", "y", "maybe")], []),
])
def test_nothing_to_rate(comparisons, expected):
    assert ratings(comparisons) == expected


def test_a_planted_order_of_six_models_is_recovered():
    planted = {"m1": 1.5, "m2": 0.9, "m3": 0.4, "m4": -0.1, "m5": -0.7, "m6": -1.4}
    rated = ratings(simulate(planted, 900, seed=7, tie_band=0.05), bootstrap=200)
    assert [r.model for r in rated] == list(planted)
    fitted = {r.model: r.strength for r in rated}
    tau = kendalltau([planted[m] for m in planted], [fitted[m] for m in planted]).statistic
    assert tau == pytest.approx(1.0)
    assert rated[0].low > rated[-1].high  # the best and the worst are told apart with confidence
    spread = (rated[0].strength - rated[-1].strength) / (1.5 - -1.4)
    assert 0.7 < spread < 1.3  # the scale is the planted one, give or take sampling and the ridge


def test_the_fit_solves_the_penalised_likelihood_equations():
    """At the optimum, each model's wins (ties one half) minus its expected wins equal PRIOR x its strength."""
    comparisons = simulate({"a": 1.0, "b": 0.0, "c": -0.5, "d": 0.3}, 120, seed=3, tie_band=0.1)
    rated = {r.model: r for r in ratings(comparisons, bootstrap=0)}
    surplus = {m: 0.0 for m in rated}
    for c in comparisons:
        p = expit(rated[c.a].strength - rated[c.b].strength)
        score = {"a": 1.0, "b": 0.0, "tie": 0.5}[c.outcome]
        surplus[c.a] += score - p
        surplus[c.b] -= score - p
    for m, r in rated.items():
        assert surplus[m] == pytest.approx(PRIOR * r.strength, abs=1e-5)
    assert sum(r.strength for r in rated.values()) == pytest.approx(0.0, abs=1e-6)


def test_a_tie_is_half_a_win_each():
    tied = ratings([Comparison("x", "y", "tie")] * 4, bootstrap=0)
    halves = ratings([Comparison("x", "y", "a"), Comparison("x", "y", "b")] * 2, bootstrap=0)
    assert [r.strength for r in tied] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert [r.strength for r in tied] == pytest.approx([r.strength for r in halves], abs=1e-9)
    assert (tied[0].ties, tied[0].judgements, halves[0].wins, halves[0].losses) == (4, 4, 2, 2)


def test_a_model_that_always_wins_gets_a_finite_rating_and_the_order_does_not_matter():
    one_way = ratings([Comparison("strong", "weak", "a")] * 5, bootstrap=0)
    other_way = ratings([Comparison("weak", "strong", "b")] * 5, bootstrap=0)
    assert [r.model for r in one_way] == ["strong", "weak"]
    assert np.isfinite(one_way[0].rating) and one_way[0].rating > ELO_BASE > one_way[1].rating
    assert [r.rating for r in one_way] == pytest.approx([r.rating for r in other_way])
    assert win_probability(one_way[0], one_way[1]) > 0.9


def test_the_interval_is_fixed_by_the_seed_and_narrows_with_more_judgements():
    planted = {"a": 0.8, "b": 0.0, "c": -0.8}
    few, many = simulate(planted, 60, seed=1), simulate(planted, 2000, seed=1)
    assert ratings(few, seed=5) == ratings(few, seed=5)
    assert ratings(few, seed=5) != ratings(few, seed=6)
    width = {len(cs): {r.model: r.high - r.low for r in ratings(cs)} for cs in (few, many)}
    assert all(width[2000][m] < width[60][m] / 2 for m in planted)
    for r in ratings(few):
        assert r.low <= r.rating <= r.high


def test_models_never_compared_with_each_other_are_each_centred():
    rated = {r.model: r for r in ratings([Comparison("a", "b", "a"), Comparison("c", "d", "b")], bootstrap=0,
                                         models=["e"])}
    assert rated["a"].strength == pytest.approx(rated["d"].strength)
    assert rated["e"].strength == pytest.approx(0.0) and rated["e"].judgements == 0


def test_every_bootstrap_sample_is_fitted_as_if_alone():
    """The batch fit of many data sets at once gives each the strengths its own fit gives."""
    rng = np.random.default_rng(0)
    k = 4
    met = rng.integers(0, 12, size=(5, len(_pairs(k)))).astype(float)
    won = np.floor(met * rng.random(met.shape) * 2) / 2
    together = fit_strengths(met, won, k)
    for b in range(5):
        assert fit_strengths(met[b:b + 1], won[b:b + 1], k)[0] == pytest.approx(together[b], abs=1e-5)
