"""Every record of shared/conformance/tool_trace.json through parse_tool_calls."""

from __future__ import annotations

import pytest

from runs.engine.points import parse_tool_calls

from .matchers import assert_matches, load_records, record_ids

RECORDS = load_records("tool_trace.json")


@pytest.mark.parametrize("record", RECORDS, ids=record_ids(RECORDS))
def test_tool_trace_record(record: dict) -> None:
    assert_matches(parse_tool_calls(record["text"]), record["expect"])
