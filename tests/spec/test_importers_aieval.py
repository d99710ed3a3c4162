"""AI Eval suites: every example of seed 003, rebuilt under tests/fixtures/seeds/003/project, and the mapping
of docs/importing.md: templates filled per case, each check with AI Eval's pass rule as its minimum."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprints.spec import parse_any
from blueprints.spec.files import validate_file
from blueprints.spec.importers.aieval import go_regex_to_js, go_value

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "003" / "project"


def read(name: str):
    return validate_file(PROJECT / "tests" / name, root=PROJECT).result


def test_the_where_it_lives_example():
    result = read("hello-tests.yaml")
    assert result.ok and result.dialect == "aieval"
    prompt = result.blueprint.prompts[0]
    assert result.blueprint.title == "hello-tests"
    assert [m.content for m in prompt.messages] == ["You are a friendly assistant. Say hello\n"]
    assert [(c.kind, c.min_score) for c in prompt.checks] == [("llm_judge", 0.8), ("contains", 1.0)]
    assert [(p.fn, p.fn_args) for p in prompt.points] == [(None, None), ("contains_all_of", ["hello"])]
    assert (prompt.trial_aggregation, prompt.trial_threshold, prompt.verdicts.pass_at) == ("pass_at_k", 0.8, 0.0)
    assert result.import_report["filesUsed"] == ["../prompts/hello.yaml"]


def test_every_expected_assertion():
    result = read("expected.yaml")
    assert result.ok
    by_id = {p.id: p for p in result.blueprint.prompts}
    assert by_id["exact"].points[0].fn_args == {"value": "Hello, world!", "trim": False}
    assert by_id["contains"].points[0].fn_args == ["hello", "world"]
    assert (by_id["not-contains"].points[0].fn, by_id["not-contains"].checks[0].min_score) == \
        ("not_contains_all_of", 1.0)
    assert by_id["regex"].points[0].fn_args == ["^\\\\d{4}-\\\\d{2}-\\\\d{2}$"]
    # The literal {{CITY}} form of a template variable is filled too.
    assert "for Paris in the format" in by_id["exact"].messages[0].content


def test_json_schema_and_tool_calls():
    schema = read("json.yaml").blueprint.prompts[0]
    assert schema.points[0].fn == "json_matches_schema" and schema.points[0].fn_args["required"] == ["name", "age"]
    tools = read("tools.yaml")
    weather, search = tools.blueprint.prompts
    assert weather.system.startswith("You are a weather assistant")
    assert [m.content for m in weather.messages] == ["What's the weather in San Francisco?"]
    assert [p.fn for p in weather.points] == ["tool_calls_match", "tool_calls_match"]
    assert weather.points[1].fn_args["only_required"] is True and weather.points[1].min_score == 1.0
    # a `tool_call` evaluator's threshold replaces the required rule
    assert len(search.points) == 1 and search.checks[0].min_score == 0.8
    assert search.points[0].fn_args["expected"][0]["args_match"] == {"query": "regex:^golang\\\\s+error\\\\s+wrapping"}
    assert [t["name"] for t in tools.blueprint.tools] == ["get_weather", "search"]


def test_every_evaluator_type():
    result = read("evaluators.yaml")
    assert result.ok
    by_id = {p.id: p for p in result.blueprint.prompts}
    minimums = {case: [(c.kind, c.min_score) for c in p.checks] for case, p in by_id.items()}
    assert minimums == {
        "judge": [("llm_judge", 0.8)], "similarity": [("similarity", 0.8)], "factuality": [("factuality", 0.8)],
        "faithfulness": [("faithfulness", 0.8)], "relevancy": [("relevancy", 0.8)], "precision": [("contains", 1.0)],
        "task": [("task_completion", 0.7)], "tools": [("tool_selection", 0.8)], "efficiency": [("efficiency", 0.8)],
        "hallucination": [("hallucination", 0.9)], "toxicity": [("toxicity", 0.9)], "bias": [("bias", 0.9)],
    }
    assert "Accuracy; Clarity" in by_id["judge"].points[0].text
    assert len(by_id["task"].points) == 3
    assert [p.fn_args for p in by_id["tools"].points] == ["search", "calculate"]
    assert by_id["similarity"].ideal_response == "The capital of France is Paris."
    precision = next(t for t in result.import_report["tests"] if t["id"] == "precision")
    assert precision["unsupported"] == [{"what": "precision", "why": "it scores the retrieved context, not the response"}]


@pytest.mark.parametrize(
    ("name", "line", "column", "words"),
    [
        ("missing-prompt.yaml", 2, 9, ["no prompt file named 'nowhere'"]),
        ("no-checks.yaml", 4, 9, ["at least one `expected` assertion or one evaluator"]),
    ],
)
def test_seed_rules_that_fail(name, line, column, words):
    result = read(name)
    error = result.errors[0]
    assert (error.line, error.column) == (line, column)
    assert all(w in error.message for w in words) and error.hint


def suite(cases: str, template: str = "Hi {{.name}}") -> object:
    files = {"../prompts/p.yaml": f"name: p\ntemplate: \"{template}\"\nvariables:\n  - name: name\n    required: true\n"}
    return parse_any("suite: s\nprompt: p\ncases:\n" + cases, path="tests/s.yaml", files=files)


@pytest.mark.parametrize(
    ("cases", "template", "line", "words"),
    [
        ("  - id: a\n    input: {other: 1}\n    expected: {contains: [x]}\n", "Hi {{.name}}", 5,
         ["needs the variable `name`"]),
        ("  - id: a\n    input: {name: x}\n    expected: {contains: [x]}\n", "{{range .x}}y{{end}}", 5,
         ["Go template actions"]),
        ("  - id: a\n    input: {name: x}\n    expected: {contains: [x]}\n", "Hi {{.name}} }}", 5,
         ["do not pair up"]),
        ("  - id: a\n    input: {name: x}\n    expected: {regex: ['(']}\n", "Hi", 6, ["does not compile"]),
        ("  - id: a\n    input: {name: x}\n    evaluators: [{type: judgy}]\n", "Hi", 6, ["unknown evaluator type"]),
        ("  - id: a\n    input: {name: x}\n    evaluators: [{type: llm_judge}]\n", "Hi", 6,
         ["needs `criteria`"]),
        ("  - id: a\n    input: {name: x}\n    expected:\n      tool_calls: [{name: a, order: 1}, {name: b, order: 1}]\n",
         "Hi", 7, ["two expected calls have `order: 1`"]),
        ("  - id: a\n    expected: {contains: [x]}\n", "Hi", 4, ["`input` is required"]),
    ],
)
def test_located_case_errors(cases, template, line, words):
    result = suite(cases, template)
    assert not result.ok
    assert result.errors[0].line == line, result.errors[0].format()
    assert all(w in result.errors[0].message for w in words), result.errors[0].message


def test_an_expected_block_inside_an_evaluator_is_flagged():
    result = suite("  - id: a\n    input: {name: x}\n    evaluators:\n      - type: contains\n"
                   "        expected: [x]\n    expected: {contains: [x]}\n")
    assert result.ok
    assert any("ignored by AI Eval" in w.message and w.line == 8 for w in result.warnings)


@pytest.mark.parametrize(("value", "text"), [(3, "3"), (2.5, "2.5"), (2.0, "2"), (True, "true"), ([1, "a"], "[1 a]"),
                                             ({"b": 1, "a": 2}, "map[a:2 b:1]"), (None, "<nil>")])
def test_values_are_printed_as_go_prints_them(value, text):
    assert go_value(value) == text


def test_go_regex_spellings_become_javascript():
    assert go_regex_to_js(r"(?P<y>\d+)\z") == r"(?<y>\d+)$"
