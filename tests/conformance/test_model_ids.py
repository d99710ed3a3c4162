"""Conformance: every record of shared/conformance/model_ids.json.

The vectors are loaded from the shared folder beside the repository (never
copied here), so a record added upstream is tested without touching this
file.  Field names in the vectors are camelCase; ``_FIELD_MAP`` maps them to
our attributes.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from blueprints.spec.model_ids import (
    display_label,
    effective_id,
    extract_maker,
    parse_for_api_call,
    parse_for_display,
)

VECTORS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "model_ids.json"
RECORDS: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))

_FIELD_MAP = {
    "baseId": "base_id",
    "temperature": "temperature",
    "systemPromptIndex": "system_prompt_index",
    "systemPromptHash": "system_prompt_hash",
    "fullId": "full_id",
    "maker": "maker",
    "originalModelId": "original_model_id",
    "effectiveModelId": "effective_model_id",
}

_MISSING = object()


# -- matcher (private; README "Common comparison rules") --------------------

_MATCHER_KEYS = {
    "$undefined", "$contains", "$not_contains", "$not_contains_any",
    "$regex", "$not_regex", "$type", "gt", "lt",
}


def _is_matcher(expected: Any) -> bool:
    return isinstance(expected, dict) and bool(expected) and set(expected) <= _MATCHER_KEYS


def _check(actual: Any, expected: Any, where: str) -> None:
    """Assert ``actual`` satisfies ``expected`` (value or matcher object)."""
    if _is_matcher(expected):
        for key, arg in expected.items():
            if key == "$undefined":
                assert (actual is _MISSING or actual is None) == bool(arg), f"{where}: {actual!r} vs $undefined={arg}"
            elif key == "$contains":
                assert isinstance(actual, str) and arg in actual, f"{where}: {actual!r} lacks {arg!r}"
            elif key == "$not_contains":
                assert isinstance(actual, str) and arg not in actual, f"{where}: {actual!r} has {arg!r}"
            elif key == "$not_contains_any":
                assert isinstance(actual, str) and not any(a in actual for a in arg), f"{where}: {actual!r}"
            elif key == "$regex":
                assert isinstance(actual, str) and re.search(arg, actual), f"{where}: {actual!r} !~ {arg!r}"
            elif key == "$not_regex":
                assert isinstance(actual, str) and not re.search(arg, actual), f"{where}: {actual!r} =~ {arg!r}"
            elif key == "$type":
                assert arg == "array" and isinstance(actual, list), f"{where}: {actual!r} not {arg}"
            elif key == "gt":
                assert _is_number(actual) and actual > arg, f"{where}: {actual!r} <= {arg}"
            elif key == "lt":
                assert _is_number(actual) and actual < arg, f"{where}: {actual!r} >= {arg}"
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected a mapping, got {actual!r}"
        for key, sub in expected.items():
            _check(actual.get(key, _MISSING), sub, f"{where}.{key}")
        return
    if _is_number(expected) and _is_number(actual):
        assert math.isclose(actual, expected, rel_tol=0, abs_tol=1e-6), f"{where}: {actual!r} != {expected!r}"
        return
    assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# -- running one record -----------------------------------------------------


def _resolved_temperature(spec: dict[str, Any]) -> float:
    """Reference 5.3: list value, then prompt, then global, then default."""
    temps = spec.get("temperatures") or [spec.get("config_temperature")]
    for candidate in (temps[0], spec.get("prompt_temperature"), spec.get("config_temperature")):
        if candidate is not None:
            return candidate
    return spec["default_temperature"]


def _run(record: dict[str, Any]) -> Any:
    fn, value, options = record["fn"], record["input"], record.get("options") or {}
    if fn == "parse_for_display":
        return parse_for_display(value)
    if fn == "parse_for_api_call":
        return parse_for_api_call(value)
    if fn == "extract_maker":
        return extract_maker(value)
    if fn == "display_label":
        if record.get("input_kind") == "parsed":
            value = parse_for_display(value)
        return display_label(
            value,
            hide_provider=bool(options.get("hideProvider")),
            hide_model_maker=bool(options.get("hideModelMaker")),
        )
    if fn == "effective_id":
        systems = value.get("systems") or [None]
        return effective_id(
            value["modelId"],
            temperature=_resolved_temperature(value),
            system_index=0,
            system_count=len(systems),
        )
    raise AssertionError(f"unknown fn {fn!r} in record {record['id']}")


def test_vectors_present() -> None:
    assert RECORDS, f"no records in {VECTORS}"
    assert len({r["id"] for r in RECORDS}) == len(RECORDS), "duplicate record ids"


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_model_id_record(record: dict[str, Any]) -> None:
    result = _run(record)
    expected = record["expect"]
    if isinstance(expected, dict) and not _is_matcher(expected):
        for camel, sub in expected.items():
            assert camel in _FIELD_MAP, f"{record['id']}: unmapped field {camel!r}"
            actual = getattr(result, _FIELD_MAP[camel], _MISSING)
            _check(actual, sub, f"{record['id']}.{camel}")
    else:
        _check(result, expected, record["id"])
