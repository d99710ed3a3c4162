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
        _cell([1.0, 1.0, 1.0], ["pass", "pass", "pass"]),  # every trial passed: pass@3 = 1, pass^3 = 1, steady
        _cell([1.0, 0.0, 0.0], ["pass", "fail", "fail"]),  # one of 3: pass@3 = 1, pass^3 = 0 (unbiased), flaky
        _cell([0.5, 0.7]),  # no verdicts; scores differ: flaky
        _cell([0.4]),  # one trial: not counted
    ]
    f = stats.trial_figures(cells)
    assert f.cells == 3 and f.flaky_cells == 2 and f.flaky == pytest.approx(2 / 3)
    assert f.pass_at_k == pytest.approx(1.0)  # the plug-in said (1 + 1 - (2/3)^3) / 2 = 0.85
    assert f.pass_hat_k == pytest.approx(0.5)  # the plug-in said (1 + 1/27) / 2 = 0.52
    assert stats.trial_figures([_cell([0.4])]) == stats.TrialFigures(0, None, None, None)


# --- the changed-cell rule's calibration -------------------------------------------------------------------


def test_noise_scale_is_the_sigma_clipped_standard_deviation_of_the_cells_that_moved():
    rng = np.random.default_rng(8)
    d = rng.normal(0, 0.08, 4000)
    noise = stats.noise_scale(np.concatenate([d, [-0.9, 0.8, -0.7]]))  # three real changes, far out
    # The fixed point of the clipping: the kept values are those within 2.5 scales of their own mean, and the
    # scale is their standard deviation over a clipped normal's (scipy.stats.truncnorm's).
    values = np.concatenate([d, [-0.9, 0.8, -0.7]])
    kept = values[np.abs(values - noise_centre_of(values, noise)) <= stats.CLIP * noise.scale]
    assert noise.n == len(kept) and noise.dof == len(kept) - 1
    assert noise.scale == pytest.approx(np.std(kept, ddof=1) / np.sqrt(sps.truncnorm.var(-stats.CLIP, stats.CLIP)))
    assert not {-0.9, 0.8, -0.7} & set(kept.tolist())  # the far changes left out of the yardstick
    assert noise.scale == pytest.approx(0.08, rel=0.03)  # and a normal spread estimated without bias
    # Most did not move: the ones that moved are measured against each other, about a centre of 0 for certain.
    moved = stats.noise_scale(np.array([0.0] * 10 + [0.1, -0.1, 0.0512345]))  # unrounded: on no grid
    assert (moved.centre, moved.n, moved.dof, moved.exact) == (0.0, 3, 2, True)
    assert moved.scale == pytest.approx(np.std([0.1, -0.1, 0.0512345], ddof=1)
                                        / np.sqrt(sps.truncnorm.var(-2.5, 2.5)))
    assert stats.noise_scale(np.array([0.0, 0.0, 0.3])).scale == 0.0


@pytest.mark.parametrize("cached", [0, 350])
def test_the_noise_scale_of_rounded_changes_is_unbiased_with_or_without_cached_cells(cached):
    """Changes kept to 2 places: a cell that moved by chance less than half a step shows 0, like a cached one. Were
    every 0 left out, the scale would be about 3% too wide; the zeros such noise gives are put back."""
    scales = []
    for s in range(100):
        rng = np.random.Generator(np.random.PCG64(47_000 + s))
        d = np.zeros(500)
        d[cached:] = rng.normal(0, 0.08, 500 - cached)
        d = d.round(2)
        scales.append(stats.noise_scale(d).scale)
        assert stats.noise_scale(d).exact == (cached > 250)
    # The reference: the standard deviation of a normal of sd 0.08 rounded to 0.01 (Sheppard: + step^2 / 12).
    assert np.mean(scales) == pytest.approx(np.sqrt(0.08 ** 2 + 0.01 ** 2 / 12), rel=0.01)


def noise_centre_of(values, noise):
    kept = values[values != 0]
    for _ in range(100):  # the mean the clipping settled on
        inner = kept[np.abs(kept - np.mean(kept)) <= stats.CLIP * noise.scale]
        if len(inner) == len(kept):
            return float(np.mean(kept))
        kept = inner
    return float(np.mean(kept))


def _cached_drops(seed: int, cached: int, cells: int = 500, drops: int = 25, drop: float = 0.4, noise: float = 0.08):
    """The issue's data set: ``drops`` cells re-judged 0.4 lower, the other moving cells re-judged with noise, and
    ``cached`` cells that did not move at all (the same response, its cached judgement); rounded to 2 places."""
    rng = np.random.Generator(np.random.PCG64(seed))
    d = np.zeros(cells)
    d[:cells - cached] = rng.normal(0, noise, cells - cached)
    d[:drops] -= drop
    return d.round(2)


def _true_noise_share(d: np.ndarray, drops: int = 25, noise: float = 0.08) -> float:
    """The reference: Benjamini-Hochberg (SciPy) over the cells that moved, with the true noise known."""
    moved = d != 0
    p = 2 * sps.norm.sf(np.maximum(np.abs(d[moved]) - 0.005, 0) / noise)
    listed = np.flatnonzero(moved)[sps.false_discovery_control(p) < stats.FDR_LEVEL]
    return float(np.mean(listed < drops) * len(listed) / drops) if len(listed) else 0.0


def test_cached_cells_never_hide_a_regression():
    """25 drops of 0.4 among 150 re-judged and 325 cached cells: the old yardstick (the plain standard deviation
    of every moved cell, the drops included) listed none of them; now they are found as often as with nothing
    cached, and about as often as Benjamini-Hochberg with the true noise would."""
    found = {0: [], 325: []}
    reference = []
    for s in range(40):
        for cached in found:
            d = _cached_drops(41_000 + s, cached)
            listed = {c.key for c in stats.changed(dict(enumerate(d))) if c.changed}
            found[cached].append(len(listed & set(range(25))) / 25)
            assert len(listed - set(range(25))) <= 2  # few false alarms beside them
        reference.append(_true_noise_share(_cached_drops(41_000 + s, 325)))
    assert np.mean(found[325]) >= np.mean(found[0]) >= 0.75
    assert np.mean(found[325]) >= np.mean(reference) - 0.05


def test_cells_that_did_not_move_neither_shrink_the_yardstick_nor_get_listed():
    """A third of the cells cached, nothing changed: the old yardstick counted the cached zeros as noise and,
    a third too small, listed 2 or 3 false changes per run; now a false alarm stays as rare as the level."""
    with_any = 0
    for s in range(100):
        d = _cached_drops(43_000 + s, 150, drops=0)
        found = stats.changed(dict(enumerate(d)))
        with_any += any(c.changed for c in found)
        assert all(c.q == 1.0 and not c.changed for c in found if c.delta == 0)
    assert with_any <= 2


@pytest.mark.parametrize("deltas, step", [
    ([0.6, -1.0, 0.0], 0.2),  # the smallest gap (0.4) divides neither: the common step does
    ([0.25, -0.75], 0.25),  # a Likert change of one step and of three
    ([0.17, 0.33, -0.5], 0.01),  # a seven-point scale kept to 2 places
    ([0.5, -0.5, 0.5], 0.5),
    ([0.0, 0.0], 0.0),
    ([0.123456789, 0.2], 0.0),  # unrounded: on no grid
])
def test_the_grid_step_divides_every_change(deltas, step):
    assert stats._grid_step(np.array(deltas)) == pytest.approx(step)


def test_the_grid_step_is_found_on_likert_data_sets():
    """Seven-point Likert cell scores kept to 2 places (0, 0.17, 0.33, ...): the changes lie on the 0.01 grid. The
    smallest gap between them, the old step, missed it in about half the data sets (no half-step correction)."""
    rng = np.random.Generator(np.random.PCG64(7))
    missed = 0
    for _ in range(200):
        a = np.round(rng.integers(0, 7, 24) / 6, 2)
        b = a.copy()
        moved = rng.random(24) < 0.3
        b[moved] = np.round(rng.integers(0, 7, int(moved.sum())) / 6, 2)
        d = b - a
        if np.any(d != 0):
            units = np.round(np.abs(d) / 0.01).astype(int)
            expected = np.gcd.reduce(units) * 0.01  # the reference: the greatest common divisor, in hundredths
            missed += stats._grid_step(d) != pytest.approx(expected)
    assert missed == 0


def test_changed_p_values_are_students_t_and_count_a_rounded_change_from_half_a_step_below():
    rng = np.random.default_rng(9)
    d = rng.normal(0, 0.08, 500).round(2)
    found = {c.key: c for c in stats.changed(dict(enumerate(d)))}
    noise = stats.noise_scale(d)
    x = (np.abs(d - noise.centre) - 0.005) / (noise.scale * np.sqrt(1 + np.pi / (2 * noise.n)))
    expected = np.minimum(1, 2 * sps.t.sf(np.maximum(x, 0), noise.dof))
    assert np.allclose([found[i].p for i in range(len(d))], expected)
    # The normal tail at the shown change, as before, was smaller: too small in the far tail.
    far = int(np.argmax(np.abs(d)))
    assert found[far].p > 1.2 * 2 * sps.norm.sf(abs(d[far] - noise.centre) / noise.scale)
    # Unrounded changes lie on no grid: nothing is taken off.
    raw = rng.normal(0, 0.08, 300)
    noise = stats.noise_scale(raw)
    top = stats.changed(dict(enumerate(raw)))[0]
    x = abs(top.delta - noise.centre) / (noise.scale * np.sqrt(1 + np.pi / (2 * noise.n)))
    assert top.p == pytest.approx(2 * sps.t.sf(x, noise.dof))


def test_changed_on_seeded_nulls_lists_about_as_often_as_the_level_and_still_finds_planted_drops():
    """Rounded normal changes of 500 cells with nothing planted: Benjamini-Hochberg at 1% lists anything in about
    1% of such runs (0.7% with the rounding counted; tests/bench/bench_decisions.py measures it over 10,000)."""
    seeds_with_any = 0
    for s in range(500):
        d = np.random.Generator(np.random.PCG64(26_000 + s)).normal(0, 0.08, 500).round(2)
        seeds_with_any += any(c.changed for c in stats.changed(dict(enumerate(d))))
    assert seeds_with_any <= 5  # at most 1% of 500
    for s in range(30):
        rng = np.random.Generator(np.random.PCG64(27_000 + s))
        d = rng.normal(0, 0.08, 500).round(2)
        planted = rng.choice(500, 3, replace=False)
        d[planted] = (d[planted] - 0.6).round(2)
        assert set(planted.tolist()) <= {c.key for c in stats.changed(dict(enumerate(d))) if c.changed}


# --- the gate ---------------------------------------------------------------------------------------------


def _drop(z: float, n: int = 100, spread: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Scores ``a`` below ``b`` on every one of ``n`` prompts but by two amounts (differences -m +- spread,
    alternating), so that the sign-flip statistic sum(d) / sqrt(sum(d^2)) is exactly ``-z``."""
    m = z * spread / np.sqrt(n - z * z)
    return 0.5 - m + spread * np.array([1.0, -1.0] * (n // 2)), np.full(n, 0.5)


def _all_signs(x: np.ndarray) -> float:
    """The sign-flip p-value by brute force: every one of the 2^k sign patterns."""
    signs = 1 - 2 * ((np.arange(2 ** len(x))[:, None] >> np.arange(len(x))) & 1)
    return float(np.mean(signs @ np.abs(x) <= x.sum() + 1e-12))


def test_worse_p_is_the_paired_sign_flip_test():
    rng = np.random.default_rng(4)
    a = rng.random(40)
    b = a.copy()
    b[:14] = np.clip(a[:14] + rng.normal(0.1, 0.15, 14), 0, 1)  # 14 prompts moved, mostly down for a
    d = (a - b)[:14]
    exact = stats.worse_p(a, b)
    assert exact == pytest.approx(_all_signs(d)) and exact < 0.05
    assert exact == pytest.approx(sps.permutation_test(
        (d,), lambda v, axis: np.sum(v, axis=axis), permutation_type="samples", alternative="less",
        vectorized=True, n_resamples=np.inf).pvalue)
    assert stats.worse_p(a, b, [2.0] * 40) == pytest.approx(exact)  # equal weights change nothing
    assert stats.worse_p(a, b, [0.0] + [1.0] * 39) == pytest.approx(_all_signs(d[1:]))  # weight 0: left out
    # Pass/fail scores: every move alike, the sign test (a binomial tail) at any size.
    assert stats.worse_p([0.0] * 8 + [1.0] * 4, [1.0] * 12) == pytest.approx(2 ** -8)
    assert stats.worse_p([0.0] * 32 + [1.0] * 8, [1.0] * 32 + [0.0] * 8) == pytest.approx(sps.binom.cdf(8, 40, 0.5))
    # Many unequal moves: the normal approximation to the same distribution.
    big_a, big_b = rng.random(300), rng.random(300)
    x = big_a - big_b
    assert stats.worse_p(big_a, big_b) == pytest.approx(sps.norm.cdf(x.sum() / np.sqrt(x @ x)))
    assert stats.worse_p([0.5] * 5, [0.5] * 5) == 1.0 and stats.worse_p([0.6], [0.5]) == 1.0


def test_holm_table():
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5]) == pytest.approx([0.5]) and len(stats.holm([])) == 0


def test_the_gate_ignores_a_worse_verdict_that_is_not_significant_at_the_gate_level():
    a, b = _drop(2.5)  # one-sided p about 0.006: "worse" at 95%, not beyond 99.9%
    assert stats.paired(a, b).verdict == "worse"
    (test,) = stats.gate({"v": (a, b, None)}, {"v": "worse"})
    assert 0.001 < test.p < 0.01 and not test.fails


def test_the_gate_fails_a_planted_regression_and_only_it():
    rng = np.random.Generator(np.random.PCG64(26))
    difficulty = rng.uniform(0.1, 0.9, 200)
    base = [np.clip(difficulty + rng.normal(0, 0.25, 200), 0, 1).round(2) for _ in range(3)]
    rerun = [np.where(rng.random(200) < 0.2, np.clip(x + rng.normal(0, 0.05, 200), 0, 1).round(2), x) for x in base]
    rerun[1] = np.clip(rerun[1] - 0.10, 0, 1).round(2)  # variant 1 lost 10 points on every prompt
    pairs = {i: (r, x, None) for i, (r, x) in enumerate(zip(rerun, base))}
    verdicts = {i: stats.paired(r, x).verdict for i, (r, x) in enumerate(zip(rerun, base))}
    tests = stats.gate(pairs, verdicts)
    assert [t.key for t in tests if t.fails] == [1]
    assert tests[1].delta == pytest.approx(float(np.mean(rerun[1] - base[1]))) and tests[1].n == 200


def test_the_gate_adjusts_over_the_variants_compared_holm():
    a, b = _drop(3.3)  # one-sided p about 0.0005: beyond 99.9% alone, not among three variants
    alone = stats.gate({"v": (a, b, None)}, {"v": "worse"})
    assert alone[0].p < stats.GATE_LEVEL and alone[0].fails
    same = np.full(100, 0.5)
    three = stats.gate({"v": (a, b, None), "w": (same, same, None), "x": (same, same, None)},
                       {"v": "worse", "w": "cant_tell", "x": "cant_tell"})
    assert three[0].adjusted == pytest.approx(3 * three[0].p) and not any(t.fails for t in three)


def test_the_gate_never_fails_a_variant_shown_as_cant_tell():
    a, b = _drop(8.0)
    assert stats.gate({"v": (a, b, None)})[0].fails  # without verdicts: the test alone
    assert not stats.gate({"v": (a, b, None)}, {"v": "cant_tell"})[0].fails
    assert not stats.gate({"v": ([0.0], [1.0], None)})[0].fails  # one prompt: nothing to test


# --- the gate counts exactly on the score grid -------------------------------------------------------------


def _sign_flip_reference(units: list[int]) -> dict[int, float]:
    """The sign-flip distribution of sum(+-u) by plain convolution, one move at a time (the reference)."""
    dist = {0: 1.0}
    for u in units:
        nxt: dict[int, float] = {}
        for s, pr in dist.items():
            nxt[s + u] = nxt.get(s + u, 0.0) + pr / 2
            nxt[s - u] = nxt.get(s - u, 0.0) + pr / 2
        dist = nxt
    return dist


@pytest.mark.parametrize("seed", range(4))
def test_worse_p_counts_exactly_on_the_grid_beyond_24_moves(seed):
    rng = np.random.default_rng(seed)
    units = rng.integers(1, 30, 60)
    signs = np.where(rng.random(60) < 0.3, 1, -1)
    x = signs * units * 0.01
    dist = _sign_flip_reference(units.tolist())
    observed = int((signs * units).sum())
    expected = sum(pr for s, pr in dist.items() if s <= observed)
    assert stats.worse_p(x, np.zeros(60)) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    # Weights are part of the move: a prompt of weight 2 moves twice as far.
    w = np.where(np.arange(60) % 2 == 0, 2.0, 1.0)
    dist = _sign_flip_reference((units * w).astype(int).tolist())
    observed = int((signs * units * w).sum())
    assert stats.worse_p(x, np.zeros(60), w) == pytest.approx(sum(pr for s, pr in dist.items() if s <= observed))


def _false_fail_rate(groups: list[tuple[float, int]]) -> float:
    """With no true change, the chance that the gate's test is below its level: over every count of moves that went
    up in each group of alike moves (binomial, SciPy), each pattern's p-value from ``worse_p``."""
    import itertools

    total = 0.0
    for ups in itertools.product(*[range(c + 1) for _, c in groups]):
        x = np.concatenate([np.r_[[m] * u, [-m] * (c - u)] for (m, c), u in zip(groups, ups)])
        chance = float(np.prod([sps.binom.pmf(u, c, 0.5) for (_, c), u in zip(groups, ups)]))
        total += chance * (stats.worse_p(x, np.zeros(len(x))) < stats.GATE_LEVEL)
    return total


@pytest.mark.parametrize("groups", [
    [(1.0, 59), (0.99, 1)],  # 60 moves, all alike but one: the normal curve said 0.134%
    [(1.0, 52), (0.99, 3)],
    [(1.0, 81), (0.9, 1)],
])
def test_the_gates_false_fail_rate_holds_its_bound_when_moves_are_nearly_all_alike(groups):
    assert _false_fail_rate(groups) <= stats.GATE_LEVEL


@pytest.mark.parametrize("groups", [[(1.0, 59), (0.99, 1)], [(1.0, 199), (0.99, 1)], [(1.0, 38), (0.5, 2)]])
def test_beyond_what_it_can_count_the_gates_normal_curve_still_holds_the_bound(groups, monkeypatch):
    """Too much work to count (forced here): the normal curve, corrected for continuity by the common move size
    when most moves share one, never fails an unchanged run more often than the level."""
    monkeypatch.setattr(stats, "GRID_WORK", 0)
    assert _false_fail_rate(groups) <= stats.GATE_LEVEL


# --- pass/fail scores: a score interval for paired proportions ------------------------------------------------


def _pairs(both: int, only_a: int, only_b: int, neither: int) -> tuple[list[float], list[float]]:
    a = [1.0] * both + [1.0] * only_a + [0.0] * only_b + [0.0] * neither
    b = [1.0] * both + [0.0] * only_a + [1.0] * only_b + [0.0] * neither
    return a, b


def test_pass_fail_scores_get_newcombes_interval_for_paired_proportions():
    """The published worked example: Cavo et al. 2012 (59, 6, 16, 80), Newcombe's square-and-add interval -0.1186 to
    -0.0046 (Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables, 2017, chapter 8; the
    `contingencytables` R package's Newcombe_square_and_add_CI_paired_2x2)."""
    a, b = _pairs(59, 6, 16, 80)
    c = stats.paired(a, b)
    assert c.delta == pytest.approx(-0.0621, abs=5e-5)
    assert (round(c.low, 4), round(c.high, 4)) == (-0.1186, -0.0046) and c.verdict == "worse"
    (many,) = stats.paired_many([(dict(enumerate(a)), dict(enumerate(b)))], {})
    assert (many.low, many.high) == (c.low, c.high)
    # Not pass/fail, or prompts of unequal weight: the bootstrap, as before.
    assert stats.paired_binary_interval(np.array([1.0, 0.5]), np.array([0.0, 0.0])) is None
    assert stats.paired_binary_interval(np.array(a), np.array(b), np.r_[2.0, [1.0] * 160]) is None
    assert stats.paired_binary_interval(np.array([1.0]), np.array([0.0])) is None


@pytest.mark.parametrize("pass_a, pass_b", [(0.85, 0.75), (0.55, 0.45), (0.15, 0.05)])
def test_pass_fail_intervals_cover_the_true_difference_from_ten_prompts(pass_a, pass_b):
    """Ten pass/fail prompts a side, 400 seeded samples: the 95% interval holds the true difference 93% to 98% of
    the time (a bootstrap of the 0/1 differences: about 85% for 0.85 against 0.75)."""
    covered = 0
    for s in range(400):
        rng = np.random.Generator(np.random.PCG64(61_000 + s))
        a, b = (rng.random(10) < pass_a).astype(float), (rng.random(10) < pass_b).astype(float)
        c = stats.paired(a, b)
        covered += c.low <= pass_a - pass_b <= c.high
    assert 0.93 <= covered / 400 <= 0.995


# --- pass@k and pass^k: the unbiased estimators --------------------------------------------------------------


def _chen_pass_at_k(n: int, c: int, k: int) -> float:
    """The numerically stable form published with the estimator (Chen et al. 2021, figure 3)."""
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@pytest.mark.parametrize("n, k", [(3, 3), (10, 1), (10, 3), (10, 10), (20, 5)])
def test_pass_at_k_and_pass_hat_k_are_chens_unbiased_estimators(n, k):
    from scipy.special import comb

    from runs.engine.scoring import pass_at_k, pass_hat_k

    for c in range(n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(_chen_pass_at_k(n, c, k))
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k, exact=True) / comb(n, k, exact=True))
        assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k, exact=True) / comb(n, k, exact=True))
    for p in (0.1, 0.3, 0.8):  # unbiased: their mean over c ~ Binomial(n, p) is the true chance
        chance = sps.binom.pmf(np.arange(n + 1), n, p)
        assert sum(w * pass_at_k(n, c, k) for c, w in enumerate(chance)) == pytest.approx(1 - (1 - p) ** k)
        assert sum(w * pass_hat_k(n, c, k) for c, w in enumerate(chance)) == pytest.approx(p ** k)


def test_the_plug_in_formula_was_biased_and_fewer_trials_than_k_give_no_figure():
    from runs.engine.scoring import pass_at_k

    chance = sps.binom.pmf(np.arange(11), 10, 0.1)
    plug_in = sum(w * (1 - (1 - c / 10) ** 10) for c, w in enumerate(chance))
    assert (1 - 0.9 ** 10) - plug_in == pytest.approx(0.16, abs=0.01)  # the bias at k = 10, p = 0.1
    assert pass_at_k(2, 1, 3) is None  # 2 judged trials cannot estimate pass@3 without bias
    cell = _cell([1.0, None, 0.0], ["pass", None, "fail"])  # a trial the judge could not score
    assert (cell.pass_at_k, cell.pass_hat_k) == (None, None)
