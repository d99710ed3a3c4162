"""scoring.round_to_fixed: ``parseFloat(x.toFixed(places))`` (the exact binary value, halves up), fast path held to the
exact decimal rounding it replaces."""

import math
from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given, settings, strategies as st

from runs.engine.scoring import round2, round_to_fixed


def exact(value: float, places: int) -> float:
    return float(Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)) + 0.0


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6), st.integers(0, 4))
def test_any_float_rounds_as_the_exact_decimal_rounding(value, places):
    got = round_to_fixed(value, places)
    assert got == exact(value, places) and math.copysign(1, got) == math.copysign(1, exact(value, places))


@pytest.mark.parametrize("value", [k / 8 for k in range(-40, 41)] + [k / 200 for k in range(-400, 401)]
                         + [0.585, 0.595, 0.005, 1.005, 2.675, -0.125, -0.0, 1e-9, 0.9999999])
def test_halves_and_near_halves(value):
    assert round2(value) == exact(value, 2)
    assert str(round2(value)) == str(exact(value, 2))  # -0.0 never shows


def test_upstream_examples():
    assert round2(0.585) == 0.58 and round2(0.595) == 0.59 and round2(0.125) == 0.13 and round2(-0.125) == -0.13
    assert math.isnan(round2(float("nan"))) and round2(float("inf")) == float("inf")
