"""Every place a user-written regex meets text is time-limited: a catastrophic pattern leaves the point
not evaluated with the reason (never a pass or a fail), within about the limit (issue 12, item 1)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from blueprints.spec.files import validate_file
from runs.engine.config import EngineConfig
from blueprints.spec.limits import DEFAULT_LIMITS, Limits
from runs.engine.points import evaluate_point

CATASTROPHIC = r"^(a|a)+$"  # exponential backtracking, even for the `regex` package
TEXT = "a" * 40 + "b"
FAST = EngineConfig(limits=Limits(regex_timeout_s=0.1))
REASON = "took longer than 0.1 s on this response; simplify it or raise EVALSITE_REGEX_TIMEOUT_S"
SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"


def timed(fn, *args, **kwargs):
    """The result and the CPU time this thread spent on it: the `regex` package's timeout counts CPU time, so
    the figure holds on a loaded machine where the wall clock runs several times slower."""
    started = time.thread_time()
    result = fn(*args, **kwargs)
    return result, time.thread_time() - started


def assert_not_evaluated_for_time(result, elapsed, reason=REASON):
    assert result.score is None, result
    assert reason in (result.error or ""), result.error
    assert elapsed < 5.0  # generous: the limit is 0.1 s per match


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        ("matches", CATASTROPHIC),
        ("imatches", CATASTROPHIC),
        ("not_matches", CATASTROPHIC),
        ("not_imatches", CATASTROPHIC),
        ("matches_all_of", ["b", CATASTROPHIC]),
        ("imatch_all_of", [CATASTROPHIC]),
        ("matches_at_least_n_of", [1, ["b", CATASTROPHIC]]),
        ("imatch_at_least_n_of", [2, [CATASTROPHIC, "a"]]),
        ("$match", CATASTROPHIC),  # the idiomatic spelling the issue used
        ("$imatch", CATASTROPHIC),
        ("$match_all_of", [CATASTROPHIC]),
        ("$not_match", CATASTROPHIC),
    ],
)
def test_every_regex_text_function_is_not_evaluated_past_the_limit(fn, args):
    result, elapsed = timed(evaluate_point, fn, args, TEXT, config=FAST)
    assert_not_evaluated_for_time(result, elapsed)
    assert CATASTROPHIC in result.error  # the reason names the pattern


def test_the_default_limit_is_one_second_and_named_in_the_reason():
    assert DEFAULT_LIMITS.regex_timeout_s == 1.0
    result, elapsed = timed(evaluate_point, "matches", CATASTROPHIC, TEXT)
    assert_not_evaluated_for_time(result, elapsed, "took longer than 1 s on this response; simplify it or raise "
                                                   "EVALSITE_REGEX_TIMEOUT_S")
    assert 0.8 < elapsed


def test_the_issues_own_pattern_is_simply_a_fail_now():
    # `^(a+)+$` froze the server under Python's `re`; the `regex` package answers it at once.
    result, elapsed = timed(evaluate_point, "$match", "^(a+)+$", TEXT, config=FAST)
    assert (result.score, result.error) == (0.0, None)
    assert elapsed < 1.0


def test_ordinary_patterns_still_score_under_the_limit():
    assert evaluate_point("matches", r"\bParis\b", "It is Paris.", config=FAST).score == 1.0
    assert evaluate_point("matches_all_of", ["Par", "xyz"], "Paris", config=FAST).score == 0.5
    assert evaluate_point("matches", "(", "x", config=FAST).error.startswith("Invalid regex pattern for 'matches'")


def test_tool_argument_patterns_are_not_evaluated_past_the_limit():
    trace = [{"name": "search", "arguments": {"query": TEXT}}]
    args = {"expected": [{"name": "search", "args_match": {"query": f"regex:{CATASTROPHIC}"}}]}
    result, elapsed = timed(evaluate_point, "tool_calls_match", args, "", tool_calls=trace, config=FAST)
    assert_not_evaluated_for_time(result, elapsed)
    fine = {"expected": [{"name": "search", "args_match": {"query": "regex:^a+b$"}}]}
    assert evaluate_point("tool_calls_match", fine, "", tool_calls=trace, config=FAST).score == 1.0


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"v": {"type": "string", "pattern": CATASTROPHIC}}},
        {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}},
    ],
)
def test_json_schema_patterns_run_bounded_as_javascript_regexes(schema):
    response = json.dumps({"v": TEXT, TEXT: "x"})
    result, elapsed = timed(evaluate_point, "json_matches_schema", schema, response, config=FAST)
    assert_not_evaluated_for_time(result, elapsed)


def test_json_schema_patterns_still_validate():
    schema = {"type": "object", "properties": {"d": {"type": "string", "pattern": r"^\d{4}$"}}}
    assert evaluate_point("json_matches_schema", schema, '{"d": "2024"}', config=FAST).score == 1.0
    assert evaluate_point("json_matches_schema", schema, '{"d": "24"}', config=FAST).score == 0.0


def _points_of(result):
    return [point for prompt in result.blueprint.prompts for point in prompt.all_points() if point.fn]


def test_an_agentv_regex_check_is_not_evaluated_past_the_limit(tmp_path):
    suite = tmp_path / "EVAL.yaml"
    suite.write_text(
        "tests:\n  - id: t\n    input: hello\n    assert:\n"
        f"      - type: regex\n        value: {json.dumps(CATASTROPHIC)}\n"
    )
    result = validate_file(suite, root=tmp_path).result
    points = _points_of(result)
    assert [p.fn for p in points] == ["matches"]
    outcome, elapsed = timed(evaluate_point, points[0].fn, points[0].fn_args, TEXT, config=FAST)
    assert_not_evaluated_for_time(outcome, elapsed)


def test_ai_eval_regex_and_tool_call_patterns_are_not_evaluated_past_the_limit(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(SEEDS / "003" / "project", project)
    expected = project / "tests" / "expected.yaml"
    expected.write_text(expected.read_text().replace('"^\\\\\\\\d{4}-\\\\\\\\d{2}-\\\\\\\\d{2}$"',
                                                     json.dumps(CATASTROPHIC)))
    tools = project / "tests" / "tools.yaml"
    tools.write_text(tools.read_text().replace('"regex:^golang\\\\\\\\s+error\\\\\\\\s+wrapping"',
                                               json.dumps(f"regex:{CATASTROPHIC}")))
    regex_prompt = {p.id: p for p in validate_file(expected, root=project).result.blueprint.prompts}["regex"]
    point = regex_prompt.points[0]
    assert point.fn_args == [CATASTROPHIC]
    outcome, elapsed = timed(evaluate_point, point.fn, point.fn_args, TEXT, config=FAST)
    assert_not_evaluated_for_time(outcome, elapsed)

    search = {p.id: p for p in validate_file(tools, root=project).result.blueprint.prompts}["search"]
    point = next(p for p in search.all_points() if p.fn == "tool_calls_match")
    trace = [{"name": "search", "arguments": {"query": TEXT}}]
    outcome, elapsed = timed(evaluate_point, point.fn, point.fn_args, "", tool_calls=trace, config=FAST)
    assert_not_evaluated_for_time(outcome, elapsed)
