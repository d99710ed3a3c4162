"""Benjamini-Hochberg and the normal-scaled MAD in NumPy (``runs.engine.stats``), held to SciPy's own: the compare
page no longer imports ``scipy.stats`` (0.6 s on a process's first comparison) for them."""

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from runs.engine import stats

CASES = [
    [0.5], [], [0.5, 0.6, 0.1, 0.001], [1.0, 1.0, 1.0], [0.0, 0.0, 1.0], [0.01, 0.01, 0.01, 0.02, 0.02],
    [0.04, 1.0, 0.03, 0.04, 0.5, 1.0, 0.0], [0.2, 0.2], [1e-300, 0.999999, 0.5],
]


@pytest.mark.parametrize("ps", CASES)
def test_benjamini_hochberg_is_scipys(ps):
    ours = stats.benjamini_hochberg(ps)
    theirs = np.atleast_1d(sps.false_discovery_control(np.asarray(ps, dtype=float), method="bh"))
    assert ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)


def test_benjamini_hochberg_random_with_ties_is_scipys():
    rng = np.random.default_rng(5)
    for n in (2, 3, 5, 17, 200, 5000):
        ps = np.round(rng.uniform(size=n) ** 3, 2)  # many ties, some 0 and some 1
        ps[: n // 10] = 1.0
        assert np.allclose(stats.benjamini_hochberg(ps), sps.false_discovery_control(ps, method="bh"),
                           rtol=0, atol=1e-15)


@pytest.mark.parametrize("bad", [[0.1, float("nan")], [0.1, None], [0.2, 1.5], [-0.1, 0.3]])
def test_benjamini_hochberg_refuses_what_scipy_refuses(bad):
    with pytest.raises(ValueError, match="between 0 and 1"):
        sps.false_discovery_control(np.asarray(bad, dtype=float))
    with pytest.raises(ValueError, match="between 0 and 1"):
        stats.benjamini_hochberg(bad)


def test_normal_mad_is_scipys():
    rng = np.random.default_rng(7)
    for values in ([1.0, 2.0], [0.0, 0.0, 0.0, 1.0], np.round(rng.normal(size=501), 2), rng.normal(size=1000) * 3,
                   [0.1, 0.2, float("nan")]):
        ours, theirs = stats.normal_mad(values), float(sps.median_abs_deviation(values, scale="normal"))
        assert ours == theirs or (np.isnan(ours) and np.isnan(theirs))


def test_changed_needs_no_scipy_stats():
    """``changed`` (and ``noise_scale``) on a fresh interpreter leave ``scipy.stats`` unimported."""
    code = ("import sys; from runs.engine import stats; "
            "r = stats.changed({i: (0.5 if i < 3 else 0.01 * (i % 7 - 3)) for i in range(60)}); "
            "assert any(c.changed for c in r); print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("n,resamples", [(1, 7), (2, 2000), (5, 33), (255, 2000), (256, 300), (300, 2000),
                                         (2000, 2000), (65537, 5), (70000, 3)])
def test_resample_counts_count_each_rows_draws(n, resamples):
    """Each row of ``resample_counts`` is how often each item was drawn in that resample, of the seeded draws:
    held to NumPy's count of each row on its own, at sizes around the block boundaries (one row a block
    past 65,536 items)."""
    from runs.engine import stats

    counts = stats.resample_counts.__wrapped__(n, resamples=resamples, seed=stats.SEED)
    rng = np.random.Generator(np.random.PCG64(stats.SEED))
    draws = rng.integers(0, n, size=(resamples, n), dtype=np.int64 if resamples * n >= 2**31 else np.int32)
    expected = np.array([np.bincount(row, minlength=n) for row in draws], dtype=float)
    assert counts.shape == (resamples, n) and counts.dtype == float and not counts.flags.writeable
    np.testing.assert_array_equal(counts, expected)
    assert (counts.sum(axis=1) == n).all()
