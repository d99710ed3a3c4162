"""runs.engine.stats: paired comparisons, a mean's interval, which items changed (BH), trials' figures."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from runs.engine import stats
from runs.engine.scoring import TrialOutcome, aggregate_trials


@pytest.mark.parametrize("low, high, expected", [
    (0.01, 0.2, "better"), (-0.2, -0.01, "worse"), (-0.1, 0.1, "cant_tell"), (0.0, 0.1, "cant_tell"),
    (-0.1, 0.0, "cant_tell"), (None, None, "cant_tell"),
])
def test_the_verdict_is_whether_the_interval_excludes_zero(low, high, expected):
    assert stats.verdict(low, high) == expected


@pytest.mark.parametrize("a, b, weights, delta, n, verdict", [
    ([], [], None, None, 0, "cant_tell"),
    ([1.0], [0.0], None, 1.0, 1, "cant_tell"),  # one item: no interval, no verdict
    ([1.0] * 10, [0.0] * 10, None, 1.0, 10, "better"),
    ([0.0] * 10, [1.0] * 10, None, -1.0, 10, "worse"),
    ([0.5] * 10, [0.5] * 10, None, 0.0, 10, "cant_tell"),
    ([1, 0, 1, 0], [0, 1, 0, 1], None, 0.0, 4, "cant_tell"),
    ([1.0, 0.0], [0.0, 0.0], [3, 1], 0.75, 2, "cant_tell"),  # weighted: (3 x 1 + 1 x 0) / 4
])
def test_paired_table(a, b, weights, delta, n, verdict):
    c = stats.paired(a, b, weights)
    assert (c.delta if c.delta is None else pytest.approx(delta)) == delta
    assert c.n == n and c.verdict == verdict
    if c.low is not None:
        assert c.low <= c.delta <= c.high


def test_paired_is_reproducible_and_matches_the_mean_difference():
    rng = np.random.default_rng(3)
    a = rng.random(200)
    b = np.clip(a - 0.05 + rng.normal(0, 0.1, 200), 0, 1)
    first, again = stats.paired(a, b), stats.paired(a, b)
    assert first == again  # the seed is fixed
    assert first.delta == pytest.approx(float(np.mean(a - b)))
    assert first.mean_a - first.mean_b == pytest.approx(first.delta)
    assert first.verdict == "better" and first.low > 0
    # The interval is about as wide as the t interval of the paired differences.
    t_low, t_high = sps.ttest_1samp(a - b, 0).confidence_interval(0.95)
    assert first.low == pytest.approx(t_low, abs=0.005) and first.high == pytest.approx(t_high, abs=0.005)


def test_paired_rejects_unaligned_vectors():
    with pytest.raises(ValueError):
        stats.paired([1.0, 0.0], [1.0])


def test_compare_scores_aligns_by_id_and_leaves_out_unscored_and_excluded_items():
    a = {"p1": 1.0, "p2": 0.5, "p3": None, "p4": 1.0, "only-a": 1.0}
    b = {"p1": 0.0, "p2": 0.5, "p3": 1.0, "p4": 0.0, "only-b": 0.0}
    assert stats.align(a, b) == (["p1", "p2", "p4"], [1.0, 0.5, 1.0], [0.0, 0.5, 0.0])
    c = stats.compare_scores(a, b, exclude=["p4"])
    assert c.n == 2 and c.delta == pytest.approx(0.5)


@pytest.mark.parametrize("scores, weights, mean, n", [
    ([], None, None, 0),
    ([None, None], None, None, 0),
    ([0.4], None, 0.4, 1),
    ([1.0, 0.0, None], [3, 1, 5], 0.75, 2),
    ([0.2, 0.4, 0.6, 0.8], None, 0.5, 4),
])
def test_mean_interval_table(scores, weights, mean, n):
    m = stats.mean_interval(scores, weights)
    assert m.n == n
    assert (m.mean if m.mean is None else pytest.approx(mean)) == mean
    if n >= 2:
        assert m.low <= m.mean <= m.high
    else:
        assert m.low is None and m.high is None


def test_mean_intervals_of_many_models_equal_each_ones_own():
    rng = np.random.default_rng(5)
    columns = {"x": {f"p{i:02d}": float(v) for i, v in enumerate(rng.random(50))},
               "y": {f"p{i:02d}": (float(v) if i % 5 else None) for i, v in enumerate(rng.random(50))}}
    together = stats.mean_intervals(columns)
    alone = stats.mean_interval(list(columns["x"].values()))
    assert (together["x"].mean, together["x"].low, together["x"].high) == pytest.approx((alone.mean, alone.low, alone.high))
    assert together["y"].n == 40 and together["y"].mean == pytest.approx(
        np.mean([v for v in columns["y"].values() if v is not None]))


def test_the_expanded_tail_tends_to_alpha():
    assert stats.expanded_tail(0.025, 20) < stats.expanded_tail(0.025, 200) < 0.025
    assert stats.expanded_tail(0.025, 100_000) == pytest.approx(0.025, abs=1e-4)


def test_changed_finds_planted_changes_and_uses_benjamini_hochberg():
    rng = np.random.default_rng(11)
    deltas = {f"p{i}": float(x) for i, x in enumerate(rng.normal(0, 0.05, 300))}
    deltas.update({"bad1": -0.6, "bad2": -0.5, "good": 0.55})
    found = stats.changed(deltas)
    assert {c.key for c in found if c.changed} == {"bad1", "bad2", "good"}
    assert [c.key for c in found[:3]] == ["bad1", "good", "bad2"]  # most certain first
    p = np.array([c.p for c in found])
    assert np.allclose([c.q for c in found], sps.false_discovery_control(p))


@pytest.mark.parametrize("deltas, listed", [
    ({}, set()),
    ({"a": 0.0, "b": 0.0, "c": 0.0}, set()),  # nothing moved
    ({"a": 0.0, "b": 0.0, "c": 0.0, "d": -1.0}, {"d"}),  # only d moved: certain
    ({"a": 0.1, "b": -0.1, "c": 0.05, "d": -0.05}, set()),  # all noise alike
])
def test_changed_edges(deltas, listed):
    assert {c.key for c in stats.changed(deltas) if c.changed} == listed


def _cell(scores, verdicts=None, rule="mean"):
    verdicts = verdicts or [None] * len(scores)
    return aggregate_trials([TrialOutcome(i, s, v) for i, (s, v) in enumerate(zip(scores, verdicts))], rule)


def test_trial_figures_aggregate_pass_at_k_pass_hat_k_and_flakiness():
    cells = [
        _cell([1.0, 1.0, 1.0], ["pass", "pass", "pass"]),  # p = 1: pass@3 = 1, pass^3 = 1, steady
        _cell([1.0, 0.0, 0.0], ["pass", "fail", "fail"]),  # p = 1/3: pass@3 = 1 - (2/3)^3, pass^3 = 1/27, flaky
        _cell([0.5, 0.7]),  # no verdicts; scores differ: flaky
        _cell([0.4]),  # one trial: not counted
    ]
    f = stats.trial_figures(cells)
    assert f.cells == 3 and f.flaky_cells == 2 and f.flaky == pytest.approx(2 / 3)
    assert f.pass_at_k == pytest.approx((1 + 1 - (2 / 3) ** 3) / 2)
    assert f.pass_hat_k == pytest.approx((1 + 1 / 27) / 2)
    assert stats.trial_figures([_cell([0.4])]) == stats.TrialFigures(0, None, None, None)
