"""Every record of shared/conformance/point_functions.json through evaluate_point.

No record here contradicts a deviation of DESIGN.md, so none is special-cased.
"""

from __future__ import annotations

import pytest

from runs.engine.points import evaluate_point

from .matchers import assert_matches, load_records, record_ids

RECORDS = load_records("point_functions.json")
DEFAULT_CONTEXT = {"modelId": "test-model", "messages": []}


@pytest.mark.parametrize("record", RECORDS, ids=record_ids(RECORDS))
def test_point_function_record(record: dict) -> None:
    context = record.get("context", DEFAULT_CONTEXT)
    result = evaluate_point(
        record["fn"],
        record["args"],
        record["response"],
        tool_calls=record.get("toolCalls"),
        messages=context.get("messages"),
        model_id=context.get("modelId"),
    )
    expect = record["expect"]
    if isinstance(expect, dict) and expect.get("error") is True:
        assert result.score is None, f"expected an error, got score {result.score}"
        assert result.error
        if "message" in expect:
            assert result.error == expect["message"]
        if "message_contains" in expect:
            assert expect["message_contains"] in result.error
        if "message_prefix" in expect:
            assert result.error.startswith(expect["message_prefix"])
        return
    assert result.error is None, result.error
    if isinstance(expect, dict):
        assert_matches(result.score, expect["score"])
        if "explain" in expect:
            assert result.explain == expect["explain"]
    else:
        assert_matches(result.score, expect)


def test_every_record_names_a_registered_function_or_an_alias() -> None:
    # Guards against records silently testing "Unknown point function".
    from blueprints.spec.functions import resolve

    assert all(resolve(record["fn"]) for record in RECORDS)
