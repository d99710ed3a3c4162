"""Loading the shared conformance records, and comparing values with their matcher objects.

The records live in ../shared/conformance beside the repository and are loaded,
never copied. Comparison follows shared/conformance/README.md: numbers within
1e-6, `true`/`false` equal to 1.0/0.0 where a score is compared, Jest
`toEqual` for objects (a key whose value is None counts as absent), and the
matcher objects `$undefined`, `$contains`, `$not_contains`, `$not_contains_any`,
`$regex`, `$not_regex`, `$type`, `gt`, `lt` (several in one object must all hold).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CONFORMANCE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"
TOLERANCE = 1e-6

ABSENT = type("Absent", (), {"__repr__": lambda self: "<absent>"})()

MATCHER_KEYS = frozenset(
    {"$undefined", "$contains", "$not_contains", "$not_contains_any", "$regex", "$not_regex", "$type", "gt", "lt"}
)
_TYPES = {
    "array": list,
    "object": dict,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def load_records(name: str) -> list[dict[str, Any]]:
    """The records of one conformance file, e.g. load_records("point_functions.json")."""
    return json.loads((CONFORMANCE_DIR / name).read_text(encoding="utf-8"))


def record_ids(records: list[dict[str, Any]]) -> list[str]:
    return [record["id"] for record in records]


def is_matcher(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= MATCHER_KEYS


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _matcher_mismatch(actual: object, matcher: dict, path: str) -> str | None:
    for key, wanted in matcher.items():
        if key == "$undefined":
            ok = actual is ABSENT or actual is None
        elif key == "$type":
            expected_type = _TYPES.get(wanted)
            if wanted == "number":
                ok = _is_number(actual)
            elif expected_type is None:
                raise AssertionError(f"unknown $type {wanted!r} in a conformance record")
            else:
                ok = isinstance(actual, expected_type)
        elif key in ("gt", "lt"):
            ok = _is_number(actual) and (actual > wanted if key == "gt" else actual < wanted)
        else:
            if not isinstance(actual, str):
                return f"{path}: expected a string for {key}, got {actual!r}"
            if key == "$contains":
                ok = wanted in actual
            elif key == "$not_contains":
                ok = wanted not in actual
            elif key == "$not_contains_any":
                ok = not any(item in actual for item in wanted)
            elif key == "$regex":
                ok = re.search(wanted, actual) is not None
            else:  # $not_regex
                ok = re.search(wanted, actual) is None
        if not ok:
            return f"{path}: {actual!r} does not satisfy {{{key!r}: {wanted!r}}}"
    return None


def mismatch(actual: object, expected: object, *, path: str = "value", partial: bool = False) -> str | None:
    """None when `actual` matches `expected`; otherwise a sentence saying where and how it differs.

    `partial=True` checks only the keys the expected object lists (at the top
    level), for records that give a partial result.
    """
    if is_matcher(expected):
        return _matcher_mismatch(actual, expected, path)
    if isinstance(expected, bool):
        if isinstance(actual, bool):
            return None if actual is expected else f"{path}: expected {expected}, got {actual}"
        if _is_number(actual) and abs(actual - (1.0 if expected else 0.0)) <= TOLERANCE:
            return None
        return f"{path}: expected {expected}, got {actual!r}"
    if _is_number(expected):
        if _is_number(actual) and abs(actual - expected) <= TOLERANCE:
            return None
        return f"{path}: expected {expected!r}, got {actual!r}"
    if expected is None:
        return None if actual is None or actual is ABSENT else f"{path}: expected null, got {actual!r}"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {actual!r}"
        if not partial:
            extra = sorted(key for key, value in actual.items() if key not in expected and value is not None)
            if extra:
                return f"{path}: unexpected keys {extra}"
        for key, wanted in expected.items():
            problem = mismatch(actual.get(key, ABSENT), wanted, path=f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, got {actual!r}"
        if len(actual) != len(expected):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        for index, (got, wanted) in enumerate(zip(actual, expected)):
            problem = mismatch(got, wanted, path=f"{path}[{index}]")
            if problem:
                return problem
        return None
    return None if actual == expected else f"{path}: expected {expected!r}, got {actual!r}"


def assert_matches(actual: object, expected: object, *, partial: bool = False) -> None:
    problem = mismatch(actual, expected, partial=partial)
    assert problem is None, problem
