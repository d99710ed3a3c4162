"""AgentV 4's per-test `vars` (v4.42's templating) and its ignored top-level `defaults`, read as AgentV 4 reads them;
v5 files, which have `vars` without an input and `defaults` of their own shape, stay refused."""

from __future__ import annotations

import json

import pytest

from blueprints.spec import parse_any
from blueprints.spec.dialects import detect_dialect
from blueprints.spec.limits import Limits


def suite(tests: str, head: str = "name: t\n", **kwargs):
    return parse_any(head + "tests:\n" + tests, path="EVAL.yaml", **kwargs)


def test_text_values_fill_placeholders_with_or_without_spaces_and_through_dotted_names():
    result = suite("  - id: a\n    vars: {q: Why?, who: {name: Ada}}\n"
                   "    criteria: 'Answers {{ q }} for {{who.name}}'\n    input: 'Q: {{q}}'\n"
                   "    expected_outcome: unused\n")
    assert result.ok, [e.message for e in result.errors]
    prompt = result.blueprint.prompts[0]
    assert prompt.messages[0].content == "Q: Why?"
    assert prompt.points[0].text == "Answers Why? for Ada"
    report = result.import_report["tests"][0]
    assert any("vars" in m for m in report["mapped"])


def test_a_missing_name_is_left_as_written_and_filled_values_are_not_filled_again():
    result = suite("  - id: a\n    vars: {q: '{{ other }}', other: no}\n"
                   "    input: '{{q}} and {{ nope }} and {{ a.b }}'\n    criteria: c\n")
    assert result.ok, [e.message for e in result.errors]
    assert result.blueprint.prompts[0].messages[0].content == "{{ other }} and {{ nope }} and {{ a.b }}"


def test_inside_text_other_values_are_compact_json_and_a_whole_placeholder_keeps_the_value():
    result = suite("  - id: a\n    vars: {n: 2.0, ok: true, list: [1, 'x'], answer: {total: 3}}\n"
                   "    input: 'n={{n}} ok={{ok}} list={{list}}'\n    expected_output: '{{ answer }}'\n"
                   "    assertions:\n      - type: field_accuracy\n        fields: [{path: total}]\n")
    assert result.ok, [e.message for e in result.errors]
    prompt = result.blueprint.prompts[0]
    assert prompt.messages[0].content == 'n=2 ok=true list=[1,"x"]'
    assert json.loads(prompt.ideal_response) == {"total": 3}  # a mapping, as AgentV keeps it: field_accuracy reads it


def test_the_suite_input_is_filled_with_each_tests_vars():
    result = suite("  - id: a\n    vars: {topic: maths}\n    input: hi\n    criteria: c\n"
                   "  - id: b\n    input: hello\n    criteria: c\n",
                   head="name: t\ninput:\n  - role: system\n    content: 'You teach {{ topic }}.'\n")
    assert result.ok, [e.message for e in result.errors]
    a, b = result.blueprint.prompts
    assert a.messages[0].content == "You teach maths." and b.messages[0].content == "You teach {{ topic }}."


def test_a_filled_field_is_checked_where_it_is_written():
    result = suite("  - id: a\n    vars: {n: 5}\n    input: '{{ n }}'\n    criteria: c\n")
    error = next(e for e in result.errors if "`input` must be text" in e.message)
    assert (error.line, error.column) == (5, 12)


def test_vars_that_are_not_a_mapping_are_ignored_with_a_warning():
    result = suite("  - id: a\n    vars: [1, 2]\n    input: '{{ q }}'\n    criteria: c\n")
    assert result.ok and result.blueprint.prompts[0].messages[0].content == "{{ q }}"
    assert any(w.code == "vars" and w.line == 4 for w in result.warnings)


def test_filling_in_is_bounded():
    big = "x" * 1000
    placeholders = "{{v}}" * 50
    result = suite(f"  - id: a\n    vars: {{v: {big}}}\n    input: '{placeholders}'\n    criteria: c\n",
                   limits=Limits(max_expanded_chars=20_000))
    assert any(e.code == "limit" and "`vars`" in e.message for e in result.errors)


def test_rows_with_vars_and_an_input_are_agentv_4_rows():
    assert detect_dialect("- id: a\n  vars: {q: x}\n  input: '{{q}}'\n  criteria: c\n") == "agentv-tests"
    result = parse_any('{"id": "a", "vars": {"q": "hi"}, "input": "{{ q }}", "criteria": "c"}\n', path="x.jsonl")
    assert result.ok and result.dialect == "agentv", [e.message for e in result.errors]
    assert result.blueprint.prompts[0].messages[0].content == "hi"


def test_an_ignored_defaults_is_a_warning_and_kept_aside():
    result = suite("  - id: a\n    input: hi\n    criteria: c\n", head="name: t\ndefaults:\n  system: &s Be brief.\n")
    assert result.ok and result.dialect == "agentv", [e.message for e in result.errors]
    assert any(w.code == "ignored" and "`defaults`" in w.message for w in result.warnings)
    assert result.extras["defaults"] == {"system": "Be brief."}


@pytest.mark.parametrize(("text", "reason"), [
    ("tests:\n  - id: a\n    vars: {q: x}\n    assert: [{type: contains, value: x}]\n", "tests with `vars:`"),
    ("defaults: {target: llm}\ntests:\n  - id: a\n    input: hi\n    criteria: c\n", "`defaults:`"),
    ("defaults: file://defaults.yaml\ntests:\n  - id: a\n    input: hi\n    criteria: c\n", "`defaults:`"),
])
def test_v5_vars_and_defaults_stay_refused(text, reason):
    assert detect_dialect(text) == "agentv-v5"
    result = parse_any(text, path="suite.yaml")
    assert not result.ok and reason in result.errors[0].message
