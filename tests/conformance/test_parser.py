"""Every record of conformance/parser.json and prompt_validation.json, loaded from ../shared.

Deviations are named here with the record id they contradict (DESIGN.md,
"Scoring semantics").
"""

import json
import re
from pathlib import Path

import pytest

from blueprints.spec.parse import parse_blueprint

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance"
_MISSING = object()


def _records(name):
    return json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))


def resolve(obj, path):
    """Follow a conformance path such as ``prompts[0].points[1].fnArgs`` or ``prompts.length``."""
    tokens = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    for token in tokens:
        if token == "length" and isinstance(obj, list):
            obj = len(obj)
        elif token.startswith("["):
            index = int(token[1:-1])
            obj = obj[index] if isinstance(obj, list) and index < len(obj) else _MISSING
        else:
            obj = obj.get(token, _MISSING) if isinstance(obj, dict) else _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def matches(actual, expected) -> bool:
    if isinstance(expected, dict) and expected and all(k.startswith("$") for k in expected):
        for key, value in expected.items():
            if key == "$undefined":
                if actual not in (_MISSING, None):
                    return False
            elif key == "$contains":
                if not (isinstance(actual, str) and value in actual):
                    return False
            elif key == "$type":
                if value == "array" and not isinstance(actual, list):
                    return False
            else:
                raise AssertionError(f"unknown matcher {key}")
        return True
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        extra = {k for k, v in actual.items() if k not in expected and v is not None}
        return not extra and all(matches(actual.get(k, _MISSING), v) for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(matches(a, e) for a, e in zip(actual, expected)))
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return isinstance(actual, (int, float)) and abs(actual - expected) < 1e-6
    return actual == expected


PARSER_RECORDS = _records("parser.json")


@pytest.mark.parametrize("record", PARSER_RECORDS, ids=[r["id"] for r in PARSER_RECORDS])
def test_parser_record(record):
    fmt = record.get("format", "yaml")
    text = record["input_json"] if fmt == "json" else record["input_yaml"]
    result = parse_blueprint(text, fmt=fmt)
    expect = record["expect"]
    if "$throws" in expect:
        assert any(expect["$throws"] in e.message for e in result.errors), [e.message for e in result.errors]
        return
    assert result.ok, [e.format() for e in result.errors]
    normalised = result.blueprint.to_upstream()
    for path, expected in expect.items():
        actual = resolve(normalised, path)
        assert matches(actual, expected), f"{path}: expected {expected!r}, got {actual!r}"


VALIDATION_RECORDS = _records("prompt_validation.json")
DEVIATIONS = {
    # Deviation 14: a conversation may end with an authored assistant message, which is then the
    # response that gets scored; the upstream's run checks reject it.
    "prompts-last-not-user": "deviation 14",
}
# Consecutive turns of one role are a warning, not an error: every provider we call accepts them and a
# real blueprint in Weval's repository sends five user turns in a row (issue 14; to be listed in DESIGN.md).
CONSECUTIVE_ROLES_WARN = {"roles-two-user", "roles-two-assistant"}


def _as_blueprint(record) -> dict:
    if record["fn"] == "validate_role_alternation":
        data = record["input"]
        return {"prompts": [{"id": data["promptId"], "messages": data["messages"]}]}
    return {"prompts": record["input"]["prompts"]}


@pytest.mark.parametrize("record", VALIDATION_RECORDS, ids=[r["id"] for r in VALIDATION_RECORDS])
def test_prompt_validation_record(record):
    result = parse_blueprint(json.dumps(_as_blueprint(record)), fmt="json")
    expect = record["expect"]
    if record["id"] in DEVIATIONS:
        assert result.ok, [e.message for e in result.errors]
        prompt = result.blueprint.prompts[0]
        assert prompt.messages[-1].role == "assistant" and prompt.messages[-1].content == "Hi there"
        return
    if record["id"] in CONSECUTIVE_ROLES_WARN:
        assert result.ok, [e.message for e in result.errors]
        upstream_words = expect["$throws"].replace("Invalid sequence. ", "")
        assert any(upstream_words in w.message and "sent as written" in w.message for w in result.warnings), \
            [w.message for w in result.warnings]
        return
    if "$throws" in expect:
        assert any(expect["$throws"] in e.message for e in result.errors), [e.message for e in result.errors]
        return
    assert result.ok, [e.message for e in result.errors]
    normalised = result.blueprint.to_upstream()
    for path, expected in expect.items():
        if path == "ok":
            continue
        assert matches(resolve(normalised, path), expected), path


def test_the_matcher_rejects_what_it_should():
    assert not matches({"text": "a", "multiplier": 2.0}, {"text": "a", "multiplier": 1.0})
    assert not matches({"text": "a", "multiplier": 1.0, "citation": "c"}, {"text": "a", "multiplier": 1.0})
    assert not matches("x", {"$undefined": True})
    assert matches([1], {"$type": "array"}) and not matches("x", {"$type": "array"})
    assert resolve({"a": [1, 2]}, "a.length") == 2
    assert resolve({"a": [1]}, "a[3]") is _MISSING
