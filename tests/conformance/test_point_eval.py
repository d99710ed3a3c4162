"""The function-point records of shared/conformance/point_eval.json.

Records whose point is judged text (a string, or an object without a function)
belong to the judging issue and are skipped here by FUNCTION_RECORDS' filter;
today that is one record, `pe-eval-should-not-llm`.
"""

from __future__ import annotations

import pytest

from runs.engine.points import InvalidPoint, assess_function_point

from .matchers import assert_matches, load_records, record_ids

ALL_RECORDS = load_records("point_eval.json")


def is_function_point(point: object) -> bool:
    return isinstance(point, dict) and (
        bool(point.get("fn")) or any(isinstance(key, str) and key.startswith("$") for key in point)
    )


FUNCTION_RECORDS = [record for record in ALL_RECORDS if is_function_point(record["point"])]
JUDGED_RECORDS = [record for record in ALL_RECORDS if not is_function_point(record["point"])]

# The record keys of an assessment and where our FunctionAssessment keeps them.
FIELDS = {
    "keyPointText": "key_point_text",
    "coverageExtent": "coverage_extent",
    "isInverted": "is_inverted",
    "multiplier": "multiplier",
    "citation": "citation",
    "error": "error",
}


def test_the_skipped_records_are_the_judged_ones() -> None:
    assert [record["id"] for record in JUDGED_RECORDS] == ["pe-eval-should-not-llm"]
    assert len(FUNCTION_RECORDS) == len(ALL_RECORDS) - 1


@pytest.mark.parametrize("record", FUNCTION_RECORDS, ids=record_ids(FUNCTION_RECORDS))
def test_function_point_record(record: dict) -> None:
    expect = record["expect"]
    assess = lambda: assess_function_point(  # noqa: E731
        record["point"],
        record["response"],
        inverted=record["block"] == "should_not",
        prompt_id=record.get("promptId"),
    )
    if "$throws" in expect:
        with pytest.raises(InvalidPoint) as raised:
            assess()
        assert expect["$throws"] in str(raised.value)
        return
    assessment = assess()
    unknown = set(expect) - set(FIELDS)
    assert not unknown, f"record keys without a field here: {unknown}"
    actual = {key: getattr(assessment, field) for key, field in FIELDS.items()}
    assert_matches(actual, expect, partial=True)
