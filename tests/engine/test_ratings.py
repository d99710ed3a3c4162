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


# --- ranks, the chance of being first, tied groups, style control (issue 35) ---------------------------------

from scipy.optimize import minimize  # noqa: E402

from runs.engine.ratings import (STYLE_FEATURES, fit_style, style_difference, style_of,  # noqa: E402
                                 style_ratings)


def test_rank_intervals_and_the_chance_of_being_first_come_from_the_bootstrap():
    planted = {"a": 1.2, "b": 1.15, "c": -1.0}
    rated = ratings(simulate(planted, 400, seed=2), bootstrap=300)
    top, second, last = rated
    assert {top.model, second.model} == {"a", "b"}
    # a and b are close: each is first in some resamples, and their rank intervals overlap; c is always third
    assert 0.0 < second.p_first <= top.p_first < 1.0
    assert top.p_first + second.p_first == pytest.approx(1.0)
    assert (top.rank_low, top.rank_high, second.rank_low, second.rank_high) == (1, 2, 1, 2)
    assert (last.rank, last.rank_low, last.rank_high, last.p_first) == (3, 3, 3, 0.0)
    assert [r.group for r in rated] == [1, 1, 2]


def test_tied_groups_follow_each_groups_first_model():
    from runs.engine.ratings import Rating, tied_groups

    def r(low, high):
        return Rating("m", 0.0, 1000.0, 1000.0, 1000.0, 0, 0, 0, 0, rank=low, rank_low=low, rank_high=high)

    # the third overlaps the second but not the first: it starts a group of its own
    assert tied_groups([r(1, 2), r(1, 3), r(3, 4), r(4, 4), r(5, 5)]) == [1, 1, 2, 2, 3]


def test_style_counts_and_their_normalised_difference():
    text = "# Title\n\nSome **bold** and __more__.\n\n- one\n- two\n1. three\n  * nested\n#not a header\n**unclosed"
    assert style_of(text) == (len(text), 1, 4, 2)
    assert style_of(None) == (0, 0, 0, 0)
    assert style_difference((300, 0, 2, 0), (100, 0, 0, 0)) == (0.5, 0.0, 1.0, 0.0)


def _reference_style_fit(comparisons, prior):
    """The penalised likelihood written out judgement by judgement, minimised by SciPy's BFGS on its own."""
    names = sorted({c.a for c in comparisons} | {c.b for c in comparisons})
    k, f = len(names), len(STYLE_FEATURES)
    idx = {m: i for i, m in enumerate(names)}

    def negative(params):
        total = 0.5 * prior * float(params @ params)
        for c in comparisons:
            d = params[idx[c.a]] - params[idx[c.b]] + float(np.dot(params[k:], c.style))
            y = {"a": 1.0, "b": 0.0, "tie": 0.5}[c.outcome]
            total -= y * np.log(expit(d)) + (1 - y) * np.log(expit(-d))
        return total

    found = minimize(negative, np.zeros(k + f), method="BFGS", options={"gtol": 1e-8})
    return dict(zip(names, found.x[:k])), found.x[k:]


def test_the_style_fit_is_the_maximum_likelihood_one():
    rng = np.random.default_rng(4)
    names = ["a", "b", "c"]
    comparisons = []
    for _ in range(60):
        i, j = rng.choice(3, 2, replace=False)
        sa, sb = style_of("x" * int(rng.integers(50, 900)) + "\n- l" * int(rng.integers(0, 3))), \
            style_of("y" * int(rng.integers(50, 900)) + "\n# h" * int(rng.integers(0, 2)))
        comparisons.append(Comparison(names[i], names[j], str(rng.choice(["a", "b", "tie"], p=[0.45, 0.4, 0.15])),
                                      style_difference(sa, sb)))
    strengths, coefficients = _reference_style_fit(comparisons, PRIOR)
    fit = style_ratings(comparisons, bootstrap=0)
    assert {r.model: r.strength for r in fit.ratings} == pytest.approx(strengths, abs=1e-5)
    assert [c.value for c in fit.coefficients] == pytest.approx(coefficients, abs=1e-5)
    assert [c.feature for c in fit.coefficients] == list(STYLE_FEATURES) and fit.judgements == 60
    # Newton (few models) and L-BFGS (many) solve the same problem
    first = np.array([names.index(c.a) for c in comparisons])
    second = np.array([names.index(c.b) for c in comparisons])
    y = np.array([{"a": 1.0, "b": 0.0, "tie": 0.5}[c.outcome] for c in comparisons])
    style = np.array([c.style for c in comparisons])
    import runs.engine.ratings as module
    newton = fit_style(y, first, second, style, 3, np.ones((1, 60)))
    old, module.NEWTON_WIDTH = module.NEWTON_WIDTH, 0
    try:
        lbfgs = fit_style(y, first, second, style, 3, np.ones((1, 60)))
    finally:
        module.NEWTON_WIDTH = old
    assert newton == pytest.approx(lbfgs, abs=1e-5)


def simulate_length_bias(n: int, seed: int, gamma: float = 3.0) -> tuple[list[str], list[Comparison]]:
    """Six models, the better ones writing shorter answers; judges prefer the longer answer by ``gamma``."""
    rng = np.random.default_rng(seed)
    names = [f"m{i + 1}" for i in range(6)]
    theta = np.linspace(0.0, -1.7, 6)
    length = 400 * 1.5 ** np.arange(6)
    out = []
    for _ in range(n):
        i, j = rng.choice(6, 2, replace=False)
        s = style_difference(style_of("w" * int(length[i] * rng.lognormal(0, 0.4))),
                             style_of("w" * int(length[j] * rng.lognormal(0, 0.4))))
        p = expit(theta[i] - theta[j] + gamma * s[0])
        out.append(Comparison(names[i], names[j], "a" if rng.random() < p else "b", s))
    return names, out


def test_style_control_recovers_a_planted_order_that_length_bias_hides():
    names, comparisons = simulate_length_bias(900, seed=11)
    planted = list(range(6, 0, -1))
    raw = {r.model: r.strength for r in ratings(comparisons, bootstrap=0)}
    fit = style_ratings(comparisons, bootstrap=100)
    controlled = {r.model: r.strength for r in fit.ratings}
    tau_raw = kendalltau(planted, [raw[m] for m in names]).statistic
    tau_style = kendalltau(planted, [controlled[m] for m in names]).statistic
    assert tau_style >= 0.9 > tau_raw
    length = fit.coefficients[0]
    assert length.feature == "length" and 1.0 < length.low < length.value < length.high  # the judges' taste, found
    assert all(c.value == 0.0 for c in fit.coefficients[1:])  # no markdown in these answers: nothing to find


def test_judgements_without_style_are_left_out_of_the_style_fit():
    fit = style_ratings([Comparison("a", "b", "a"), Comparison("a", "b", "b", (0.1, 0.0, 0.0, 0.0))],
                        bootstrap=0)
    assert fit.judgements == 1 and [r.judgements for r in fit.ratings] == [1, 1]
    assert style_ratings([Comparison("a", "b", "a")]).ratings == []


def test_the_scattered_hessian_is_the_dense_one():
    from runs.engine.ratings import _hessian

    rng = np.random.default_rng(1)
    k, n = 7, 90
    first = rng.integers(0, k, n)
    second = (first + 1 + rng.integers(0, k - 1, n)) % k
    style = rng.uniform(-1, 1, (n, len(STYLE_FEATURES)))
    design = np.vstack([np.eye(k)[first].T - np.eye(k)[second].T, style.T])
    curvature = rng.random((3, n))
    dense = np.einsum("bn,in,jn->bij", curvature, design, design)
    assert _hessian(curvature, first, second, style, k) == pytest.approx(dense, abs=1e-10)
