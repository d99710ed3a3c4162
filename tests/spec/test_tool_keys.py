"""`tools` with our mock keys and `toolUse` (issue 36): each problem is an error at its line and column, naming
the fix; the corpus's `mode: auto` is read without the old "not supported" warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprints.spec.parse import parse_blueprint

CORPUS = Path("/work/shared/corpus/weval-configs/blueprints/tool-use-native-test.yml")

GOOD = """title: t
models: [openai:gpt-4o-mini]
toolUse: {mode: native, maxSteps: 3}
tools:
  - name: search
    description: Search.
    schema: {type: object, properties: {query: {type: string}}, required: [query]}
    mocks:
      - when: {query: {matches: '^Art'}}
        result: [{id: '42'}]
      - when: {query: offline}
        error: the index is offline
    default: {result: []}
  - name: clock
    default: '12:00'
---
- prompt: hi
  should: [$tool_called: search]
"""


def _problems(text: str):
    result = parse_blueprint(text, path="t.yml")
    return result, [(d.severity, d.line, d.column, d.path, d.message) for d in result.errors + result.warnings]


def test_tools_with_mocks_and_a_default_read_cleanly():
    result, problems = _problems(GOOD)
    assert problems == []
    assert result.blueprint.tools[0]["mocks"][1]["error"] == "the index is offline"
    assert result.blueprint.tool_use == {"mode": "native", "maxSteps": 3}


@pytest.mark.parametrize("old,new,line,column,path,words", [
    ("maxSteps: 3", "maxSteps: 0", 3, 35, "toolUse.maxSteps", "from 1 to 50"),
    ("maxSteps: 3", "maxSteps: 51", 3, 35, "toolUse.maxSteps", "from 1 to 50"),
    ("mode: native", "mode: agentic", 3, 17, "toolUse.mode", "must be one of trace-only, native, auto"),
    ("{query: {type: string}}", "{query: {type: strnig}}", 7, 13, "tools[0].schema",
     "not a valid JSON Schema"),
    ("{type: object, properties: {query", "{type: array, properties: {query", 7, 13, "tools[0].schema",
     "must describe an object"),
    ("{matches: '^Art'}", "{matches: '(Art'}", 9, 23, "tools[0].mocks[0].when.query", "the regex cannot be used"),
    ("        error: the index is offline\n", "", 11, 9, "tools[0].mocks[1]", "give exactly one of `result`"),
    ("        result: [{id: '42'}]\n", "        result: [{id: '42'}]\n        error: x\n", 9, 9,
     "tools[0].mocks[0]", "give exactly one of `result`"),
    ("  - name: clock", "  - name: 'clock time'", 14, 11, "tools[1].name", "cannot be sent to providers"),
    ("  - name: clock", "  - name: search", 14, 11, "tools[1].name", "declared twice"),
    ("    mocks:\n      - when: {query: {matches: '^Art'}}", "    mocks:\n      - when: [query]", 9, 15,
     "tools[0].mocks[0].when", "`when` must map argument names"),
])
def test_each_problem_is_a_located_error_naming_the_fix(old, new, line, column, path, words):
    assert old in GOOD
    result, problems = _problems(GOOD.replace(old, new, 1))
    errors = [p for p in problems if p[0] == "error"]
    assert len(errors) == 1, problems
    assert errors[0][1:4] == (line, column, path), errors
    assert words in errors[0][4]


def test_a_tool_no_mock_can_answer_is_a_warning_at_its_name_under_native_or_auto():
    text = GOOD.replace("  - name: clock\n    default: '12:00'\n", "  - name: clock\n")
    _, problems = _problems(text)
    assert [p[:4] for p in problems] == [("warning", 14, 11, "tools[1].name")]
    assert "has no `mocks` and no `default`" in problems[0][4]
    _, problems = _problems(text.replace("mode: native", "mode: trace-only"))
    assert problems == []  # trace-only calls nothing


def test_the_corpus_auto_blueprint_reads_without_the_not_supported_warning():
    result = parse_blueprint(CORPUS.read_text(encoding="utf-8"), path=str(CORPUS))
    assert not result.errors
    messages = [w.message for w in result.warnings]
    assert not any("is not supported" in m for m in messages)
    assert sum("has no `mocks` and no `default`" in m for m in messages) == 3


def test_a_trace_only_tool_name_is_never_sent_so_any_name_reads():
    text = GOOD.replace("mode: native", "mode: trace-only").replace("  - name: clock", "  - name: 'clock time'")
    _, problems = _problems(text)
    assert problems == []


def test_a_trace_only_schema_problem_is_a_warning_never_a_refusal():
    text = GOOD.replace("mode: native", "mode: trace-only").replace("{query: {type: string}}", "{query: {type: strnig}}")
    result, problems = _problems(text)
    assert [p[:4] for p in problems] == [("warning", 7, 13, "tools[0].schema")]
    assert result.blueprint is not None and not result.errors
