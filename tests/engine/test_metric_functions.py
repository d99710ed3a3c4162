"""Extension point functions: metric checks on what a run recorded, and structured-output checks."""

from __future__ import annotations

import pytest

from blueprints.spec import functions
from runs.engine.points import ResponseMetrics, evaluate_point

METRICS = ResponseMetrics(latency_ms=850.0, cost_usd=0.004, input_tokens=300, output_tokens=120, llm_calls=2)


@pytest.mark.parametrize(
    ("fn", "args", "metrics", "score", "error"),
    [
        ("latency_under", 1000, METRICS, 1.0, None),
        ("latency_under", 850, METRICS, 1.0, None),  # at the limit passes
        ("latency_under", 500, METRICS, 0.0, None),
        ("cost_under", 0.01, METRICS, 1.0, None),
        ("cost_under", 0.001, METRICS, 0.0, None),
        ("tokens_under", 420, METRICS, 1.0, None),
        ("tokens_under", 419, METRICS, 0.0, None),
        ("tokens_under", {"input": 300, "output": 100}, METRICS, 0.0, None),
        ("llm_calls_under", 2, METRICS, 1.0, None),
        ("llm_calls_under", 1, METRICS, 0.0, None),
        # What was not recorded is never a pass or a fail.
        ("latency_under", 1000, None, None, "no run metrics"),
        ("cost_under", 1, ResponseMetrics(latency_ms=1.0), None, "cost of this response is unknown"),
        ("latency_under", 1000, ResponseMetrics(latency_ms=3.0, cached=True), None, "cache"),
        ("tokens_under", 10, ResponseMetrics(input_tokens=3), None, "not recorded"),
        # AI Eval's efficiency: per budget 1 within it, else budget / used; the mean of the budgets given.
        ("efficiency", {"max_steps": 5, "max_tokens": 1000}, METRICS, 1.0, None),
        ("efficiency", {"max_steps": 1, "max_tokens": 1000}, METRICS, 0.75, None),  # (1/2 + 1) / 2
        ("efficiency", {"max_steps": 1, "max_tokens": 210}, METRICS, 0.5, None),  # (1/2 + 210/420) / 2
        ("efficiency", {"max_tokens": 105}, METRICS, 0.25, None),
        ("efficiency", {"max_steps": 2}, METRICS, 1.0, None),  # at the budget
        ("efficiency", {"max_steps": 5}, ResponseMetrics(input_tokens=3), None, "model calls of this response"),
    ],
)
def test_metric_checks(fn, args, metrics, score, error):
    assert functions.check_args(fn, args) is None
    result = evaluate_point(fn, args, "any text", metrics=metrics)
    assert result.score == score
    assert (result.error is None) if error is None else (error in result.error)


@pytest.mark.parametrize(
    ("args", "response", "score"),
    [
        ("DENIED", "  DENIED \n", 1.0),  # trimmed, as AgentV
        ("DENIED", "DENIED.", 0.0),
        ({"value": "Hello, world!", "trim": False}, "Hello, world!", 1.0),
        ({"value": "Hello, world!", "trim": False}, "Hello, world!\n", 0.0),  # AI Eval: untrimmed
    ],
)
def test_equals(args, response, score):
    assert evaluate_point("equals", args, response).score == score


SCHEMA = {"type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("response", "score", "explain"),
    [
        ('{"name": "Alice", "age": 30}', 1.0, "matches"),
        ('{"name": "Alice"}', 0.0, "'age' is a required property"),
        ('{"name": "Alice", "age": "30"}', 0.0, "age: '30' is not of type 'integer'"),
        ('```json\n{"name": "Alice", "age": 30}\n```', 0.0, "not JSON"),  # the whole response must be JSON
        ("Sure! {\"name\": \"A\", \"age\": 1}", 0.0, "not JSON"),
    ],
)
def test_json_matches_schema(response, score, explain):
    result = evaluate_point("json_matches_schema", SCHEMA, response)
    assert result.score == score and explain in result.explain


def test_an_invalid_schema_is_refused_by_the_validator_with_the_reason():
    problem = functions.check_args("json_matches_schema", {"type": "objekt"})
    assert problem.startswith("`$json_matches_schema` takes a valid JSON Schema") and "objekt" in problem


FIELDS = {
    "expected": {"invoice": {"total": 100.0, "date": "2024-03-05", "vendor": "ACME"}, "currency": "EUR"},
    "fields": [
        {"path": "invoice.total", "match": "numeric_tolerance", "tolerance": 0.5},
        {"path": "invoice.date", "match": "date"},
        {"path": "invoice.vendor", "weight": 2},
        {"path": "currency", "required": False},
    ],
}


@pytest.mark.parametrize(
    ("response", "score"),
    [
        ('{"invoice": {"total": 100.4, "date": "05-Mar-2024", "vendor": "ACME"}, "currency": "EUR"}', 1.0),
        ('Here: ```json\n{"invoice": {"total": "100.2", "date": "2024-03-05T10:00:00Z", "vendor": "ACME"}}\n```', 1.0),
        ('{"invoice": {"total": 102, "date": "2024-03-05", "vendor": "Acme"}, "currency": "EUR"}', 0.4),
        ("no json at all", 0.0),
    ],
)
def test_field_accuracy(response, score):
    result = evaluate_point("field_accuracy", FIELDS, response)
    assert result.score == pytest.approx(score), result.explain


def test_field_accuracy_all_or_nothing():
    args = {**FIELDS, "aggregation": "all_or_nothing"}
    almost = '{"invoice": {"total": 100, "date": "2024-03-05", "vendor": "ACME!"}, "currency": "EUR"}'
    assert evaluate_point("field_accuracy", args, almost).score == 0.0


def trace(*calls):
    import json

    return "\n".join(f"TOOL_CALL {json.dumps({'name': n, 'arguments': a})}" for n, a in calls)


@pytest.mark.parametrize(
    ("args", "calls", "score"),
    [
        ({"mode": "any_order", "minimums": {"knowledgeSearch": 3}}, [("knowledgeSearch", {})] * 3, 1.0),
        ({"mode": "any_order", "minimums": {"knowledgeSearch": 3, "x": 1}}, [("knowledgeSearch", {})] * 2, 0.0),
        ({"mode": "in_order", "expected": [{"tool": "a"}, {"tool": "b"}, {"tool": "c"}]},
         [("a", {}), ("z", {}), ("b", {}), ("c", {})], 1.0),
        ({"mode": "in_order", "expected": [{"tool": "a"}, {"tool": "b"}]}, [("b", {}), ("a", {})], 0.5),
        # a call with other arguments is consumed and missed (AgentV)
        ({"mode": "in_order", "expected": [{"tool": "s", "args": {"q": "Huawei"}}, {"tool": "r"}]},
         [("s", {"q": "ZTE"}), ("r", {})], 0.5),
        ({"mode": "in_order", "expected": [{"tool": "s", "args": {"q": "Huawei"}, "args_match": "superset"}]},
         [("s", {"q": "Huawei", "limit": 3})], 1.0),
        ({"mode": "exact", "expected": [{"tool": "a"}, {"tool": "b"}]}, [("a", {}), ("b", {})], 1.0),
        ({"mode": "exact", "expected": [{"tool": "a"}, {"tool": "b"}]}, [("a", {}), ("b", {}), ("c", {})], 2 / 3),
        ({"mode": "superset", "expected": [{"tool": "a"}, {"tool": "a"}]}, [("a", {})], 0.5),
        ({"mode": "subset", "expected": [{"tool": "a"}]}, [("a", {}), ("b", {})], 0.5),
    ],
)
def test_tool_trajectory(args, calls, score):
    assert functions.check_args("tool_trajectory", args) is None
    assert evaluate_point("tool_trajectory", args, trace(*calls)).score == pytest.approx(score)


def test_tool_trajectory_mode_is_checked_by_the_validator():
    assert functions.check_args("tool_trajectory", {"mode": "sometimes", "expected": [{"tool": "a"}]})


@pytest.mark.parametrize(
    ("expected", "calls", "score"),
    [
        ([{"name": "get_weather", "args_match": {"location": "San Francisco"}, "order": 1}],
         [("get_weather", {"location": "San Francisco", "unit": "c"})], 1.0),
        ([{"name": "get_weather", "order": 2}], [("get_weather", {})], 0.0),  # exactly the 2nd call
        ([{"name": "search", "args_match": {"query": "regex:^golang\\s+error\\s+wrapping"}}],
         [("search", {"query": "golang  error wrapping tips"})], 1.0),
        ([{"name": "calc", "args_match": {"n": 2}}], [("calc", {"n": 2.0})], 1.0),  # numbers as numbers
        ([{"name": "a"}, {"name": "a"}], [("a", {})], 0.5),  # each call serves one expectation
    ],
)
def test_tool_calls_match(expected, calls, score):
    assert evaluate_point("tool_calls_match", {"expected": expected}, trace(*calls)).score == score


def test_tool_calls_match_only_required():
    expected = [{"name": "a", "required": True}, {"name": "b"}]
    assert evaluate_point("tool_calls_match", {"expected": expected, "only_required": True}, trace(("a", {}))).score == 1
    assert evaluate_point("tool_calls_match", {"expected": expected, "only_required": True}, trace(("b", {}))).score == 0


@pytest.mark.parametrize("args", [{}, {"max_steps": 0}, {"max_tokens": -1}, {"max_steps": 5, "other": 1}, 5,
                                  {"max_steps": True}])
def test_efficiency_refuses_what_is_not_a_budget(args):
    assert functions.check_args("efficiency", args) is not None
    assert evaluate_point("efficiency", args, "any text", metrics=METRICS).score is None


def test_ai_eval_mock_matching_takes_maps_as_subsets_and_never_as_patterns():
    from runs.engine.tools import matches

    arguments = {"city": "Paris", "units": {"temp": "c", "wind": "kmh"}, "days": [1, 2], "n": 3,
                 "q": {"matches": "x"}}
    assert matches({"units": {"temp": "c"}, "n": 3.0}, arguments, subset=True)
    assert not matches({"units": {"temp": "c"}}, arguments)  # a blueprint's `when`: a mapping is compared whole
    assert not matches({"days": [1]}, arguments, subset=True)  # lists exactly
    assert matches({"q": {"matches": "x"}}, arguments, subset=True)  # AI Eval has no regex: a literal sub-map
    assert not matches({"city": {"matches": "^P"}}, arguments, subset=True)
    assert matches({"city": {"matches": "^P"}}, arguments)  # ours: a regex
