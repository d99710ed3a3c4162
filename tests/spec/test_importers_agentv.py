"""AgentV suites: every example of seeds 001, 002 and 004, rebuilt under tests/fixtures/seeds, parses or fails
exactly where the seed says, and maps as docs/importing.md says."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprints.spec.files import validate_file

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"


def read(relative: str):
    report = validate_file(SEEDS / relative, root=SEEDS)
    return report.result


def problems(result):
    return [d for d in result.diagnostics if "CORE" not in d.message]


VALID = [
    "001/expected-outcome.yaml", "001/outcome-alias.yaml", "001/inline-rubrics.yaml",
    "001/explicit-rubric-evaluator.yaml", "001/expected-messages-tool-calls.yaml",
    "001/tool-calls-without-input.yaml", "001/trajectory-minimums.yaml", "001/trajectory-in-order.yaml",
    "001/weight.yaml", "001/code-judge-argv/EVAL.yaml", "001/code-judge-string/EVAL.yaml", "001/input-string.yaml",
    "001/input-array.yaml", "001/input-canonical-wins.yaml", "001/expected-output-string.yaml",
    "001/expected-output-object.yaml", "001/expected-output-tool-calls.yaml", "001/expected-canonical-wins.yaml",
    "002/metadata.yaml", "002/assert-placement.yaml", "002/assert-types/EVAL.yaml", "002/rubrics-group.yaml",
    "002/composite/EVAL.yaml", "002/gates/EVAL.yaml", "002/inheritance.yaml", "002/external-jsonl/EVAL.yaml",
    "002/external-csv/EVAL.yaml", "002/external-inline/EVAL.yaml", "002/file-refs/EVAL.yaml",
    "002/execution.yaml", "002/complete/EVAL.yaml", "004/fields.yaml", "004/rubrics.yaml",
    "004/execution/EVAL.yaml", "004/conversation.yaml", "004/description-note.yaml", "004/basic.yaml",
    "004/complex/EVAL.yaml",
]


@pytest.mark.parametrize("relative", VALID)
def test_every_seed_example_parses(relative):
    result = read(relative)
    assert result.ok, [d.format(relative) for d in result.errors]
    assert result.dialect == "agentv" and result.blueprint.prompts
    assert not [d for d in problems(result) if d.code in ("unknown-key", "missing-file")], \
        [d.format(relative) for d in problems(result)]


@pytest.mark.parametrize(
    ("relative", "line", "column", "path", "words"),
    [
        # seed 001: "the error message SHALL mention the supported modes (any_order, in_order, exact)"
        ("001/trajectory-invalid-mode.yaml", 7, 15, "tests[0].evaluators[0].mode", ["any_order", "in_order", "exact"]),
        # seed 001: "the error message SHALL mention that `weight` must be `>= 0`"
        ("001/weight-negative.yaml", 8, 17, "tests[0].evaluators[0].weight", ["`weight`", ">= 0"]),
        ("001/weight-non-numeric.yaml", 8, 17, "tests[0].evaluators[0].weight", ["`weight`", "not high"]),
        ("002/external-missing/EVAL.yaml", 1, 8, "tests", ["datasets/not-there.jsonl", "did not come with"]),
        # a problem inside an external file names the file, its line and column, at the line that names it
        ("002/external-bad-row/EVAL.yaml", 1, 8, "'datasets/cases.jsonl'[1].assert[0].weight",
         ["in datasets/cases.jsonl, line 2, column", ">= 0"]),
    ],
)
def test_seed_examples_that_must_fail_fail_there(relative, line, column, path, words):
    result = read(relative)
    assert not result.ok and len(result.errors) == 1
    error = result.errors[0]
    assert (error.line, error.column, error.path) == (line, column, path)
    assert all(w in error.message for w in words), error.message
    assert error.hint


def only_prompt(relative):
    result = read(relative)
    assert result.ok, [d.format() for d in result.errors]
    return result, result.blueprint.prompts[0]


@pytest.mark.parametrize("relative", ["001/expected-outcome.yaml", "001/outcome-alias.yaml"])
def test_expected_outcome_and_its_alias_become_the_criteria(relative):
    result, prompt = only_prompt(relative)
    assert [p.text for p in prompt.points] == ["Goal"]
    assert any(a["what"] == "criteria" for a in result.import_report["tests"][0]["approximated"])


def test_inline_and_explicit_rubrics_are_judged_points():
    _, inline = only_prompt("001/inline-rubrics.yaml")
    result, explicit = only_prompt("001/explicit-rubric-evaluator.yaml")
    assert [p.text for p in inline.points] == [p.text for p in explicit.points] == ["Must be polite"]
    assert any(a["what"] == "rubric judge model" for a in result.import_report["tests"][0]["approximated"])


def test_expected_messages_keep_tool_calls_and_the_last_assistant_message_is_the_ideal():
    result, prompt = only_prompt("001/expected-messages-tool-calls.yaml")
    assert prompt.ideal_response == "Based on the search results..."
    assert prompt.messages[0].content == "Research branch deactivation"
    _, bare = only_prompt("001/tool-calls-without-input.yaml")
    assert '"tool": "knowledgeSearch"' in bare.ideal_response  # no content: the tool calls are the reference


def test_trajectories_keep_minimums_and_the_expected_sequence():
    _, minimums = only_prompt("001/trajectory-minimums.yaml")
    _, in_order = only_prompt("001/trajectory-in-order.yaml")
    assert minimums.points[0].fn_args == {"mode": "any_order", "minimums": {"knowledgeSearch": 3}}
    assert in_order.points[0].fn_args["expected"] == [{"tool": "knowledgeSearch"}] * 3
    assert in_order.checks[0].id == "expected_search_pattern"


def test_weight_three_and_the_named_judge():
    _, prompt = only_prompt("001/weight.yaml")
    assert prompt.points[0].multiplier == 3 and prompt.points[0].label == "safety"


def test_code_judge_argv_is_kept_and_a_string_is_split_without_a_shell():
    _, argv = only_prompt("001/code-judge-argv/EVAL.yaml")
    result, text = only_prompt("001/code-judge-string/EVAL.yaml")
    assert argv.points[0].fn == "code_judge"
    assert argv.points[0].fn_args["command"] == text.points[0].fn_args["command"] == \
        ["bun", "run", "validate_risk_output.ts"]
    assert "validate_risk_output.ts" in result.import_report["filesUsed"]


def test_input_forms_and_the_canonical_name_wins():
    _, string = only_prompt("001/input-string.yaml")
    _, array = only_prompt("001/input-array.yaml")
    result, both = only_prompt("001/input-canonical-wins.yaml")
    assert [(m.role, m.content) for m in string.messages] == [("user", "What is 2+2?")]
    assert [(m.role, m.content) for m in array.messages] == [("system", "You are a calculator"),
                                                             ("user", "What is 2+2?")]
    assert [m.content for m in both.messages] == ["Canonical query"]
    assert any("`input_messages` (the canonical name) is used" in w.message for w in result.warnings)


def test_expected_output_forms_and_the_canonical_name_wins():
    assert only_prompt("001/expected-output-string.yaml")[1].ideal_response == "The answer is 4"
    assert only_prompt("001/expected-output-object.yaml")[1].ideal_response == \
        '{"riskLevel": "High", "reasoning": "Explanation"}'
    assert only_prompt("001/expected-output-tool-calls.yaml")[1].ideal_response == '{"status": "done"}'
    result, prompt = only_prompt("001/expected-canonical-wins.yaml")
    assert prompt.ideal_response == "Canonical answer"
    assert any("`expected_messages` (the canonical name) is used" in w.message for w in result.warnings)


def test_metadata_becomes_the_header_and_the_rest_is_kept_aside():
    result = read("002/metadata.yaml")
    bp = result.blueprint
    assert (bp.title, bp.author, bp.tags) == ("export-screening", "acme-compliance", ["compliance", "agents", "safety"])
    assert result.extras["version"] == "1.0" and result.extras["license"] == "Apache-2.0"
    assert result.extras["requires"] == {"agentv": ">=0.6.0"}


def test_gates_and_weights_of_the_assert_placement_example():
    result, prompt = only_prompt("002/assert-placement.yaml")
    contains, rubric = prompt.points
    assert (contains.fn, contains.fn_args) == ("contains", "DENIED")
    assert prompt.check(contains.check_id).gate == 0.8
    assert rubric.text == "Correctly identifies denied entity" and rubric.multiplier == 1.0
    test = result.import_report["tests"][0]
    assert {"what": "execution.targets", "why": "a per-test choice of target: every test runs on the run's models"} \
        in test["unsupported"]


def test_every_assert_type_of_the_seed():
    result, prompt = only_prompt("002/assert-types/EVAL.yaml")
    kinds = [(p.fn or "judged") for p in prompt.points]
    assert kinds == ["contains", "judged", "judged", "code_judge"]
    judge = prompt.points[2].text
    assert "Screen: Huawei" in judge and "Denies the transaction" in judge and "[the response]" in judge
    assert prompt.points[3].fn_args["command"] == ["bun", "run", "./scripts/verify.ts"]
    assert set(result.import_report["filesUsed"]) == {"judges/compliance.md", "scripts/verify.ts"}


def test_rubric_weights_are_normalised_inside_the_evaluator_weight():
    _, prompt = only_prompt("002/rubrics-group.yaml")
    assert [round(p.multiplier, 6) for p in prompt.points] == [round(4 * w / 11, 6) for w in (5, 3, 2, 1)]
    assert prompt.points[0].min_score == 0.8 and prompt.points[1].min_score is None


def test_composite_weights_split_its_weight_between_its_children():
    _, prompt = only_prompt("002/composite/EVAL.yaml")
    assert [round(p.multiplier, 6) for p in prompt.points] == [2.1, 0.9]
    assert {p.check_id for p in prompt.points} == {"composite"} and prompt.points[0].label == "safety"


def test_gates_true_and_a_custom_minimum():
    _, prompt = only_prompt("002/gates/EVAL.yaml")
    assert [c.gate for c in prompt.checks] == [0.8, 0.8, 0.6]
    assert prompt.points[1].fn == "tool_trajectory"


def test_suite_assertions_are_inherited_unless_skip_defaults():
    result = read("002/inheritance.yaml")
    first, second = result.blueprint.prompts
    assert [p.fn for p in first.points] == ["contains", "latency_under"]  # the test's own, then the suite's
    assert [p.fn for p in second.points] == ["contains"]


@pytest.mark.parametrize("relative", ["002/external-jsonl/EVAL.yaml", "002/external-csv/EVAL.yaml",
                                      "002/file-refs/EVAL.yaml"])
def test_external_tests_are_read_from_the_companion_files(relative):
    result = read(relative)
    ids = [p.id for p in result.blueprint.prompts]
    assert len(ids) == 2 and ids[0] == "huawei"
    assert result.import_report["filesUsed"]


def test_csv_rows_carry_their_expected_output():
    result = read("002/external-csv/EVAL.yaml")
    assert [p.ideal_response for p in result.blueprint.prompts] == ["DENIED", "APPROVED"]


def test_execution_trials_targets_and_cache():
    result = read("002/execution.yaml")
    prompt = result.blueprint.prompts[0]
    assert (prompt.trials, prompt.trial_aggregation) == (3, "best")
    assert result.blueprint.no_cache is False
    assert result.extras["targets"] == ["claude-agent", "gpt-agent"]
    assert "choose the models when you start a run" in result.import_report["suite"]["approximated"][0]["how"]


def test_the_complete_example_reports_what_needs_an_agent_or_a_workspace():
    result = read("002/complete/EVAL.yaml")
    sanctioned, clean, ambiguous = result.blueprint.prompts
    assert [p.fn or "judged" for p in sanctioned.points] == [
        "contains", "tool_trajectory", "judged", "judged", "judged", "judged", "code_judge", "judged", "judged",
        "latency_under", "cost_under"]
    assert [p.fn or "judged" for p in ambiguous.points] == ["matches", "judged", "judged", "judged", "code_judge"]
    for test in result.import_report["tests"]:
        assert {"what": "workspace", "why": "evalsite runs language models, not agent targets, and has no "
                                           "workspace for an agent to work in"} in test["unsupported"]
    assert result.extras["workspace"]["template"] == "./workspace-template"
    assert result.extras["tests"]["sanctioned-entity"]["metadata"] == {"category": "denial", "jurisdiction": "US"}


def test_seed_004_fields_rubrics_bands_and_context():
    fields = read("004/fields.yaml").blueprint.prompts
    assert fields[2].ideal_response == '{"name": "Alice", "age": 30, "verified": true}'
    structured = read("004/rubrics.yaml").blueprint.prompts[1]
    name, greeting = structured.points
    assert (name.label, name.multiplier, name.min_score) == ("name-mention", 2 / 3, 0.8)
    assert [(b.low, b.high, b.text) for b in greeting.score_ranges] == [
        (0, 4, "No greeting present"), (5, 9, "Generic greeting"), (10, 10, "Personalized greeting")]
    turn2 = read("004/conversation.yaml").blueprint.prompts[1]
    assert [m.role for m in turn2.messages] == ["user", "assistant", "user"]
    notes = read("004/description-note.yaml")
    assert notes.blueprint.prompts[0].description.startswith("Tests handling of null")
    assert "DD/MM/YYYY" in notes.extras["tests"]["regional-date"]["note"]


def test_seed_004_complex_inlines_the_file_blocks():
    result, prompt = only_prompt("004/complex/EVAL.yaml")
    system, user = prompt.messages
    assert system.role == "system" and "security reviewer" in system.content
    assert "Review this code for security issues:" in user.content and "SELECT * FROM users" in user.content
    assert prompt.ideal_response.startswith("Security Issue: SQL Injection")
    assert prompt.points[-1].fn_args["command"] == ["python", "./judges/security_check.py"]
    assert set(result.import_report["filesUsed"]) == {"prompts/security-reviewer.md", "fixtures/vulnerable.py",
                                                      "judges/security_check.py"}


def test_seed_004_execution_override_is_reported():
    result, _ = only_prompt("004/execution/EVAL.yaml")
    unsupported = {u["what"] for u in result.import_report["tests"][0]["unsupported"]}
    assert {"execution.target", "execution.timeout_seconds"} <= unsupported


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("tests:\n  - id: a\n    input: hi\n    assert:\n      - type: contains\n        value: x\n        required: 2\n",
         7, 19, ["`required` must be true or a minimum score"]),
        ("tests:\n  - id: a\n    input: hi\n    assert:\n      - value: x\n", 5, 9, ["needs a `type`"]),
        ("tests:\n  - id: a\n    criteria: c\n", 2, 5, ["needs a non-empty `input`"]),
        ("tests:\n  - input: hi\n    criteria: c\n", 2, 5, ["needs an `id`"]),
        ("tests:\n  - id: a\n    input: hi\n", 2, 9, ["needs `criteria`, `expected_output` or `assert`"]),
        ("tests:\n  - {id: a, input: hi, criteria: c}\n  - {id: a, input: ho, criteria: c}\n", 3, 10,
         ["duplicate test id 'a'"]),
        ("tests:\n  - id: a\n    input: hi\n    assert:\n      - type: llm_judge\n        prompt: ./judges/x.md\n",
         6, 17, ["judge prompt file './judges/x.md' did not come with the suite"]),
        ("tests:\n  - id: a\n    input: hi\n    assert:\n      - type: field_accuracy\n        fields: [{path: a}]\n",
         5, 15, ["structured `expected_output`"]),
        ("tests:\n  - id: a\n    input: hi\n    criteria: c\n    rubrics:\n      - id: r\n        outcome: o\n"
         "        score_ranges: {3: low, 10: high}\n", 8, 23, ["must start at 0"]),
    ],
)
def test_located_errors(text, line, column, words):
    from blueprints.spec import parse_any

    result = parse_any(text, path="EVAL.yaml")
    assert not result.ok
    error = result.errors[0]
    assert (error.line, error.column) == (line, column), error.format()
    assert all(w in error.message for w in words), error.message


def _suite(tests: str):
    from blueprints.spec import parse_any

    return parse_any("name: t\ntests:\n" + tests, path="EVAL.yaml")


def test_plain_strings_among_assertions_are_one_rubric_weighted_by_their_count():
    result = _suite("  - id: a\n    input: Hi\n    assertions:\n      - Greets back\n      - Is polite\n"
                    "      - type: contains\n        value: hello\n")
    assert result.ok, [e.message for e in result.errors]
    points = result.blueprint.prompts[0].all_points()
    judged = [p for p in points if p.fn is None]
    assert [p.text for p in judged] == ["Greets back", "Is polite"]
    assert sum(p.multiplier for p in judged) == pytest.approx(2.0)  # the evaluator's weight: two strings


def test_required_zero_and_a_number_as_input_are_refused_as_upstream_does():
    zero = _suite("  - id: a\n    input: Hi\n    assertions:\n      - type: contains\n        value: x\n"
                  "        required: 0\n")
    assert any("`required` must be true or a minimum score above 0" in e.message for e in zero.errors)
    number = _suite("  - id: a\n    input: 123\n    criteria: Says a number\n")
    assert any("`input` must be text or a list" in e.message for e in number.errors)


def test_a_rubric_item_with_score_ranges_needs_no_outcome():
    result = _suite("  - id: a\n    input: Hi\n    assertions:\n      - type: rubrics\n        criteria:\n"
                    "          - id: tone\n            score_ranges:\n              - {score_range: [0, 5], "
                    "outcome: rude}\n              - {score_range: [6, 10], outcome: kind}\n")
    assert not [e.message for e in result.errors if "needs `outcome:`" in e.message], [e.message for e in result.errors]


@pytest.mark.parametrize("text", ["suite", "rubrics-field", "own", "suite-plain"])
def test_a_plain_string_assertion_that_reads_like_an_internal_label_is_a_rubric(text):
    """Regression: the test's own assertion entries carry their kind, so the plain string `suite` (or
    `rubrics-field`) is one rubric like any other text, never an internal error."""
    result = _suite(f"  - id: a\n    input: Hi\n    assertions:\n      - {text}\n      - Is polite\n")
    assert result.ok, [e.message for e in result.errors]
    assert not [d for d in result.diagnostics if d.code == "internal"]
    judged = [p for p in result.blueprint.prompts[0].all_points() if p.fn is None]
    assert [p.text for p in judged] == [text, "Is polite"]
    assert sum(p.multiplier for p in judged) == pytest.approx(2.0)


def test_a_suite_assertion_written_as_the_text_suite_is_a_rubric_too():
    from blueprints.spec import parse_any

    result = parse_any("name: t\nassertions:\n  - suite\ntests:\n  - id: a\n    input: Hi\n"
                       "    assertions:\n      - rubrics-field\n", path="EVAL.yaml")
    assert result.ok, [e.message for e in result.errors]
    judged = [p for p in result.blueprint.prompts[0].all_points() if p.fn is None]
    assert [p.text for p in judged] == ["rubrics-field", "suite"]
