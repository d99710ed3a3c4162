"""Tool-trace parsing and the tool point functions, including the three we score that upstream ignores."""

from __future__ import annotations

import pytest

from runs.engine.points import evaluate_point, parse_tool_trace

TRACE = "\n".join(
    [
        "Let me look that up.",
        'TOOL_CALL {"name":"search","arguments":{"query":"climate  change","filters":{"year":2024,"tags":["a","b"]}}}',
        '   TOOL_CALL {"name":"retrieve","arguments":{"docId":"41","options":{"snippet":true}}}  ',
        "TOOL_CALL {not json}",
        'TOOL_CALL {"arguments":{}}',
        'TOOL_CALL ["search"]',
        'TOOL_CALL {"name":"calculator","arguments":{"expression":"(312*49)-777"}}',
        'TOOL_CALL{"name":"nospace","arguments":{}}',
        'TOOL_CALL {"name":"search","arguments":{"query":"sea level"}}',
        "Done.",
    ]
)


def test_the_trace_keeps_good_lines_in_order_and_reports_bad_ones() -> None:
    trace = parse_tool_trace(TRACE)
    assert [call["name"] for call in trace.calls] == ["search", "retrieve", "calculator", "search"]
    assert trace.problems == [
        "Line 4: the text after TOOL_CALL is not valid JSON.",
        'Line 5: TOOL_CALL needs a JSON object with a string "name".',
        'Line 6: TOOL_CALL needs a JSON object with a string "name".',
    ]


def test_windows_line_ends_and_missing_arguments() -> None:
    trace = parse_tool_trace('TOOL_CALL {"name":"a"}\r\nTOOL_CALL {"name":"b","arguments":[1]}\r\n')
    assert trace.calls == [{"name": "a", "arguments": None}, {"name": "b", "arguments": [1]}]


@pytest.mark.parametrize(
    ("fn", "args", "expected"),
    [
        ("tool_called", "search", 1.0),
        ("tool_called", "nospace", 0.0),
        ("tool_called", "", None),
        ("tool_called", ["search"], None),
        ("tool_call_count_between", [2, 2, "search"], 1.0),
        ("tool_call_count_between", [4, 4], 1.0),
        ("tool_call_count_between", [5], 0.0),
        ("tool_call_count_between", [0, 3], 0.0),
        ("tool_call_count_between", "search", 1.0),  # upstream: junk arguments mean [0, infinity]
        ("tool_call_count_between", [1, 1, ""], 0.0),  # an empty name counts every call
        ("tool_call_order", ["search", "calculator"], 1.0),
        ("tool_call_order", ["calculator", "retrieve"], 0.0),
        ("tool_call_order", ["search", "search"], 1.0),
        ("tool_call_order", ["search", 3, "retrieve"], 1.0),
        ("tool_call_order", [], None),
        ("tool_args_match", {"name": "retrieve", "where": {"options": {"snippet": True}}}, 1.0),
        ("tool_args_match", {"name": "retrieve", "where": {"docId": 41}}, 0.0),  # strict equality
        ("tool_args_match", {"name": "search", "where": {"filters": {"tags": ["a"]}}}, 1.0),
        ("tool_args_match", {"name": "search", "where": {"filters": {"tags": ["b"]}}}, 0.0),
        ("tool_args_match", {"name": "search", "where": {"query": "climate change"}}, 0.0),
        ("tool_args_match", {"name": "search", "where": {"query": "climate change"}, "normalizeWhitespace": True}, 1.0),
        ("tool_args_match", {"name": "search", "where": {"query": "sea level"}}, 1.0),  # any matching call
        ("tool_args_match", {"name": "calculator", "where": "args.expression.includes('*')"}, 1.0),
        ("tool_args_match", {"name": "calculator", "where": "args.expression.length > 100"}, 0.0),
        ("tool_args_match", {"name": "calculator", "where": "args.nothing.deeper"}, 0.0),  # errors do not match
        ("tool_args_match", {"name": "calculator", "where": "this is not js"}, 0.0),
        ("tool_args_match", {"name": "calculator"}, 0.0),
        ("tool_args_match", {"where": {}}, None),
        ("tool_args_match", {"name": "search", "where": {"query": {"deep": 1}}}, None),  # `in` on a string
        ("required_tools", ["search", "retrieve"], 1.0),
        ("required_tools", ["search", "weather"], 0.0),
        ("required_tools", [], 1.0),
        ("required_tools", "search", None),
        ("prohibited_tools", ["weather"], 1.0),
        ("prohibited_tools", ["weather", "calculator"], 0.0),
        ("prohibited_tools", [1], None),
        ("max_calls", 4, 1.0),
        ("max_calls", 3, 0.0),
        ("max_calls", 4.0, 1.0),
        ("max_calls", -1, None),
        ("max_calls", True, None),
    ],
)
def test_tool_function(fn: str, args: object, expected: float | None) -> None:
    result = evaluate_point(fn, args, TRACE)
    assert result.score == expected, result.error


@pytest.mark.parametrize(
    ("fn", "args", "explain"),
    [
        ("required_tools", ["search", "weather", "maps"], "Required tools not called: weather, maps."),
        ("prohibited_tools", ["calculator"], "Prohibited tools called: calculator."),
        ("max_calls", 1, "4 tool calls, more than the limit of 1."),
        ("max_calls", 9, "4 tool calls, within the limit of 9."),
    ],
)
def test_our_tool_policy_functions_explain_themselves(fn: str, args: object, explain: str) -> None:
    result = evaluate_point(fn, args, "", tool_calls=parse_tool_trace(TRACE).calls)
    assert result.explain == explain


def test_given_tool_calls_are_used_instead_of_parsing() -> None:
    calls = [{"name": "weather", "arguments": {"city": "Lagos"}}]
    assert evaluate_point("tool_called", "weather", TRACE, tool_calls=calls).score == 1.0
    assert evaluate_point("tool_called", "search", TRACE, tool_calls=calls).score == 0.0
    assert evaluate_point("tool_called", "search", TRACE, tool_calls=[]).score == 0.0


def test_malformed_lines_are_noted_in_the_explanation_not_fatal() -> None:
    result = evaluate_point("tool_called", "search", TRACE)
    assert result.score == 1.0
    assert result.explain.startswith("Ignored malformed tool calls: Line 4:")
    assert evaluate_point("tool_called", "search", TRACE, tool_calls=[]).explain is None


def test_a_where_expression_that_runs_forever_is_stopped_and_recorded() -> None:
    result = evaluate_point("tool_args_match", {"name": "calculator", "where": "(() => { while (true) {} })()"}, TRACE)
    assert result.score is None and "time limit" in result.error
    assert evaluate_point("tool_called", "calculator", TRACE).score == 1.0


# --- The text with its tool calls (AI Eval's contains, regex and llm_judge; docs/importing.md) ----------------------

def test_the_rendering_puts_each_call_after_the_text_under_one_heading() -> None:
    from runs.engine.points import text_with_tool_calls

    calls = [{"name": "search", "arguments": {"query": "Oslo", "limit": 2}}, {"name": "report", "arguments": {}}]
    assert text_with_tool_calls("Done.", calls) == (
        'Done.\n\n## Tool calls\n\n### 1. `search`\n\n```json\n{"query": "Oslo", "limit": 2}\n```\n\n'
        "### 2. `report`\n\n```json\n{}\n```")
    assert text_with_tool_calls("", calls).startswith("## Tool calls\n\n### 1. `search`")  # no text: the calls alone
    assert text_with_tool_calls("Done.", []) == "Done."  # no calls: the text as it is
    assert text_with_tool_calls("Done.", ["not a call"]) == "Done."


def test_the_rendering_keeps_its_markdown_whole_whatever_the_model_wrote() -> None:
    from runs.engine.points import render_tool_calls

    shown = render_tool_calls([{"name": "a`b\nc", "arguments": "{not json ``` here"},
                               {"name": "x", "arguments": {"code": "````py"}}])
    # A name with a backtick gets a longer code span (on one line); unreadable arguments stay the model's text in a
    # `text` fence; a fence inside the arguments gets a longer one around it.
    assert "### 1. ``a`b c``\n\n````text\n{not json ``` here\n````\n\n" in shown
    assert '### 2. `x`\n\n`````json\n{"code": "````py"}\n`````' in shown


def test_the_rendering_is_bounded() -> None:
    from runs.engine.points import render_tool_calls
    from runs.engine.points.tool_trace import MAX_RENDERED_ARGUMENT_CHARS, MAX_RENDERED_CHARS

    big = render_tool_calls([{"name": "save", "arguments": {"text": "x" * (MAX_RENDERED_ARGUMENT_CHARS * 3)}}])
    assert len(big) < MAX_RENDERED_ARGUMENT_CHARS + 200
    assert f"… (cut: {MAX_RENDERED_ARGUMENT_CHARS * 3 + 12:,} characters, more than 20,000)" in big
    many = render_tool_calls([{"name": "save", "arguments": {"text": "y" * 15_000}}] * 50)
    assert len(many) <= MAX_RENDERED_CHARS + 200
    assert many.count("### ") == 6 and many.endswith("… 44 more tool calls left out (the rendering stops at "
                                                     "100,000 characters)")


def test_a_point_sees_the_tool_calls_only_when_marked_and_trace_only_calls_count() -> None:
    from blueprints.spec.schema import Point
    from runs.engine.assess import point_subject
    from runs.engine.types import GeneratedResponse

    trace = 'Checking.\nTOOL_CALL {"name": "search", "arguments": {"q": "x"}}'
    response = GeneratedResponse(prompt_id="p", model_variant_id="m", conversation=(), text=trace, final_text=trace)
    marked = Point(fn="contains", fn_args="search", has_args=True, sees="text+tool_calls")
    plain = Point(fn="contains", fn_args="search", has_args=True)
    assert point_subject(plain, trace, response) == trace
    assert point_subject(marked, trace, response) == trace + '\n\n## Tool calls\n\n### 1. `search`\n\n```json\n' \
                                                             '{"q": "x"}\n```'
    native = GeneratedResponse(prompt_id="p", model_variant_id="m", conversation=(), text="Hi", final_text="Hi",
                               tool_mode="native")
    assert point_subject(marked, "Hi", native) == "Hi"  # a native answer without calls: its text
