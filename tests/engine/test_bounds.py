"""Deal-breaker bounds (runs/engine/bounds.py) against SciPy's exact one-sided Clopper-Pearson limits."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import binomtest

from runs.engine import bounds


def scipy_upper(k: int, n: int, confidence: float = 0.95) -> float:
    return binomtest(k, n, alternative="less").proportion_ci(confidence_level=confidence, method="exact").high


def test_bounds_equal_scipys_exact_clopper_pearson_upper_limit_on_every_n_up_to_500():
    """Every n up to 500: no failure (and, every tenth n, half failing) against ``binomtest``'s exact one-sided interval, and every
    number of failures up to n = 100 (and 16 spread over larger n) against the Beta quantile that interval is
    (``scipy.stats.beta.ppf``, vectorised)."""
    from scipy.stats import beta

    for n in range(1, 501):
        for k in ((0, n // 2) if n % 10 == 0 else (0,)):
            assert bounds.upper_bound(k, n) == pytest.approx(scipy_upper(k, n), rel=1e-9, abs=1e-12), (k, n)
        # every number of failures up to n = 100, then the few a deal-breaker meets (0-3) and a spread beyond:
        # every n, without 125,000 scalar calls (10 s of the fast tests) for the same check
        ks = np.arange(n) if n <= 100 else np.unique(np.r_[np.arange(4), np.linspace(4, n - 1, 12).astype(int)])
        expected = beta.ppf(0.95, ks + 1, n - ks)
        ours = np.array([bounds.upper_bound(int(k), n) for k in ks])
        assert np.allclose(ours, expected, rtol=1e-9, atol=1e-12), n
        assert bounds.upper_bound(n, n) == scipy_upper(n, n) == 1.0


def test_the_issue_example_and_the_rule_of_three():
    b = bounds.Bound("m", 0, 90, bounds.upper_bound(0, 90))
    assert b.text == "0 failures in 90 answers: failure rate at most 3.3% at 95%"
    assert bounds.upper_bound(0, 90) == pytest.approx(1 - 0.05 ** (1 / 90))
    for n in (30, 100, 300, 1000):  # 1 - 0.05^(1/n) is just under 3/n
        assert 0.9 * 3 / n < bounds.upper_bound(0, n) < 3 / n
    assert bounds.upper_bound(0, 0) is None and bounds.upper_bound(7, 7) == 1.0
    with pytest.raises(ValueError):
        bounds.upper_bound(8, 7)


def test_a_bound_too_wide_for_the_decision_says_how_many_answers_would_do():
    b = bounds.Bound("m", 0, 90, bounds.upper_bound(0, 90))
    assert b.too_wide
    assert b.finding == "too few answers to say it is under 1%: 299 answers with no further failure would (209 more)"
    assert scipy_upper(0, 299) < 0.01 <= scipy_upper(0, 298)
    assert not bounds.Bound("m", 0, 299, bounds.upper_bound(0, 299)).too_wide
    n = bounds.answers_needed(3, 0.01)
    assert scipy_upper(3, n) < 0.01 <= scipy_upper(3, n - 1)


def test_should_not_bounds_count_evaluated_answers_to_guarded_prompts_each_trial_once():
    point = lambda inverted: SimpleNamespace(inverted=inverted)  # noqa: E731
    prompts = [SimpleNamespace(all_points=lambda: [point(False), point(True)]),
               SimpleNamespace(all_points=lambda: [point(False)])]
    r = lambda i, v, score, bad=False: SimpleNamespace(prompt_index=i, variant_id=v, score=score,  # noqa: E731
                                                       violated_should_not=bad)
    records = [r(0, "a", 1.0), r(0, "a", 0.2, True), r(0, "a", None), r(1, "a", 0.0, True),
               r(0, "b", 1.0), r(0, "b", 0.9)]
    found = bounds.should_not_bounds(records, prompts, ["a", "b", "c"])
    assert (found["a"].failures, found["a"].n) == (1, 2)  # the unscored answer and the unguarded prompt left out
    assert (found["b"].failures, found["b"].n) == (0, 2)
    assert found["c"].upper is None
    assert found["c"].text == "no scored answer to a deal-breaker (should-not or critical) point yet"
    assert found["a"].upper == pytest.approx(scipy_upper(1, 2))
    assert bounds.should_not_bounds(records, prompts[1:], ["a"]) == {}
    assert not math.isnan(found["b"].upper)


def test_critical_points_count_as_deal_breakers_beside_should_not_points():
    """A prompt with a point marked ``critical: true`` is guarded too; an answer that failed a critical point (the
    caller names it by response id) is a failure, as one that met a should-not point is."""
    point = lambda inverted=False, critical=False: SimpleNamespace(inverted=inverted, critical=critical)  # noqa: E731
    prompts = [SimpleNamespace(all_points=lambda: [point(), point(critical=True)]),  # critical only
               SimpleNamespace(all_points=lambda: [point(inverted=True)]),  # should-not only
               SimpleNamespace(all_points=lambda: [point()])]  # neither: not counted
    r = lambda pk, i, v, score, bad=False: SimpleNamespace(  # noqa: E731
        response_id=pk, prompt_index=i, variant_id=v, score=score, violated_should_not=bad)
    records = [r(1, 0, "a", 0.9), r(2, 0, "a", 0.4), r(3, 1, "a", 1.0), r(4, 1, "a", 0.0, True), r(5, 2, "a", 0.0),
               r(6, 0, "b", 0.8), r(7, 0, "b", None)]
    assert bounds.deal_breaker_prompts(prompts) == {0, 1}
    assert bounds.critical_positions(prompts) == {0: [1]}
    found = bounds.should_not_bounds(records, prompts, ["a", "b"], critical_failed={2, 7})
    assert (found["a"].failures, found["a"].n) == (2, 4)  # response 2 (critical) and 4 (should-not)
    assert (found["b"].failures, found["b"].n) == (0, 1)  # 7 failed a critical point but has no score: not counted
    assert found["a"].upper == pytest.approx(scipy_upper(2, 4))
    # without the critical failures named, only the should-not one counts; critical prompts alone still guard
    plain = bounds.should_not_bounds(records, prompts, ["a"])
    assert (plain["a"].failures, plain["a"].n) == (1, 4)
    assert bounds.should_not_bounds(records, prompts[:1], ["a"])["a"].n == 2
