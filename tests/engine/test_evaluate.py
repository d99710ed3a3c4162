"""evaluate_point never raises, whatever it is given."""

from __future__ import annotations

import pytest

from blueprints.spec.functions import NAMES
from runs.engine.points import PointResult, evaluate_point

ODD_ARGUMENTS = [None, "", "x", 0, -1, 1.5, float("nan"), True, [], [None], [1, 2, 3], {}, {"name": 5}, [[1]], object()]
ODD_RESPONSES = ["", "TOOL_CALL {", "TOOL_CALL []\nTOOL_CALL {\"name\": 1}", None, 12, "[" * 100_000]


@pytest.mark.parametrize("name", sorted(NAMES - {"js", "call"}))
def test_no_input_makes_a_function_raise(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for args in ODD_ARGUMENTS:
        for response in ODD_RESPONSES:
            result = evaluate_point(name, args, response)  # type: ignore[arg-type]
            assert isinstance(result, PointResult)
            assert (result.score is None) == (result.error is not None)
            if result.score is not None:
                assert 0.0 <= result.score <= 1.0


def test_js_and_call_with_odd_arguments_are_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for args in ODD_ARGUMENTS:
        if not isinstance(args, str):
            assert evaluate_point("js", args, "x").error
        assert evaluate_point("call", args, "x").error


@pytest.mark.parametrize("fn", [None, 3, "", "$", "$$js", "js ", "JS"])
def test_names_that_are_no_function(fn: object) -> None:
    result = evaluate_point(fn, "x", "x")  # type: ignore[arg-type]
    assert result.score is None and result.error.startswith("Unknown point function")


def test_a_graded_negation_keeps_the_fraction() -> None:
    assert evaluate_point("not_contains_all_of", ["a", "b", "c"], "a").score == pytest.approx(2 / 3)


def test_results_are_frozen() -> None:
    result = evaluate_point("contains", "a", "a")
    with pytest.raises(AttributeError):
        result.score = 0.0  # type: ignore[misc]
    assert result.evaluated
