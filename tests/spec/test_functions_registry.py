"""The point-function registry: names, aliases, argument shapes, regex extraction."""

from __future__ import annotations

import pytest

from blueprints.spec import functions

UPSTREAM_CANONICAL = {
    "contains", "icontains", "contains_any_of", "icontains_any_of", "contains_all_of",
    "icontains_all_of", "contains_at_least_n_of", "icontains_at_least_n_of", "matches",
    "imatches", "matches_all_of", "imatch_all_of", "matches_at_least_n_of",
    "imatch_at_least_n_of", "starts_with", "ends_with", "istarts_with", "iends_with",
    "contains_word", "icontains_word", "word_count_between", "is_json", "js", "call",
    "factcheck", "tool_called", "tool_args_match", "tool_call_count_between",
    "tool_call_order", "not_contains", "not_icontains", "not_contains_any_of",
    "not_icontains_any_of", "not_contains_all_of", "not_icontains_all_of", "not_matches",
    "not_imatches", "not_starts_with", "not_istarts_with", "not_ends_with", "not_iends_with",
    "not_contains_word", "not_icontains_word",
}  # fmt: skip


def test_names_are_the_upstream_registry_plus_the_three_tool_policy_functions() -> None:
    # Deviation 9 adds required_tools, prohibited_tools and max_calls; the extension functions that
    # other suite formats need (docs/points.md) are listed apart, and none of them is an upstream name.
    extensions = {"equals", "json_matches_schema", "field_accuracy", "tool_trajectory", "tool_calls_match", "latency_under",
                  "cost_under", "tokens_under", "llm_calls_under", "efficiency", "code_judge"}
    assert functions.EXTENSION_FUNCTIONS == extensions
    assert functions.NAMES == UPSTREAM_CANONICAL | {"required_tools", "prohibited_tools", "max_calls"} | extensions


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("contains", "contains"),
        ("$contains", "contains"),  # deviation 16: one leading `$` is stripped
        ("$$contains", None),
        ("contain", "contains"),
        ("contain_any_of", "contains_any_of"),  # the parser's prefix rewrite
        ("contain_word", "contains_word"),
        ("contain_at_least_n_of", "contains_at_least_n_of"),
        ("match", "matches"),
        ("match_all_of", "matches_all_of"),
        ("match_at_least_n_of", "matches_at_least_n_of"),
        ("icontain", "icontains"),
        ("icontain_any_of", "icontains_any_of"),
        ("icontain_all_of", "icontains_all_of"),
        ("icontain_at_least_n_of", "icontains_at_least_n_of"),
        ("icontain_word", "icontains_word"),
        ("imatch", "imatches"),
        ("$imatch", "imatches"),
        ("imatch_all_of", "imatch_all_of"),
        ("imatches_all_of", "imatch_all_of"),  # deviation 16
        ("imatch_at_least_n_of", "imatch_at_least_n_of"),
        ("istart_with", "istarts_with"),
        ("iend_with", "iends_with"),
        ("expr", "js"),
        ("external", "call"),
        ("not_contain", "not_contains"),
        ("not_icontain", "not_icontains"),
        ("not_contain_any_of", "not_contains_any_of"),
        ("not_icontain_any_of", "not_icontains_any_of"),
        ("not_contain_all_of", "not_contains_all_of"),
        ("not_icontain_all_of", "not_icontains_all_of"),
        ("not_match", "not_matches"),
        ("not_imatch", "not_imatches"),
        ("not_start_with", "not_starts_with"),
        ("not_istart_with", "not_istarts_with"),
        ("not_end_with", "not_ends_with"),
        ("not_iend_with", "not_iends_with"),
        ("not_contain_word", "not_contains_word"),
        ("not_icontain_word", "not_icontains_word"),
        ("required_tools", "required_tools"),
        ("$max_calls", "max_calls"),
        # what the upstream says does not exist
        ("json_schema", None),
        ("not_contains_at_least_n_of", None),
        ("not_word_count_between", None),
        ("not_is_json", None),
        ("similarity", None),
        ("llm", None),
        ("ref", None),
        ("imatches_at_least_n_of", None),
        ("start_with", None),
        # case-sensitive
        ("Contains", None),
        ("IS_JSON", None),
        ("", None),
        ("$", None),
    ],
)
def test_resolve(written: str, canonical: str | None) -> None:
    assert functions.resolve(written) == canonical


def test_resolve_refuses_non_strings() -> None:
    assert functions.resolve(None) is None  # type: ignore[arg-type]
    assert functions.resolve(3) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("written", "suggestion"),
    [
        ("contians", "contains"),
        ("icontains_any", "icontains_any_of"),
        ("$icontains_any", "icontains_any_of"),
        ("imatches_at_least_n_of", "imatch_at_least_n_of"),
        ("tool_call", "tool_called"),
        ("word_count", "word_count_between"),
        ("is_jsn", "is_json"),
        ("Contains", "contains"),
        ("icontain_words", "icontains_word"),
        ("contains", "contains"),
        ("imatch", "imatches"),
        ("completely_unrelated_thing", None),
        ("xyz", None),
    ],
)
def test_suggest(written: str, suggestion: str | None) -> None:
    assert functions.suggest(written) == suggestion


OK = None


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("contains", "text", OK),
        ("contains", "", OK),
        ("contains", 123, "`$contains` takes a string"),
        ("contains", None, "`$contains` takes a string"),
        ("contains", ["a"], "`$contains` takes a string"),
        ("not_icontains", 123, "`$not_icontains` takes a string"),
        ("starts_with", 123, "`$starts_with` takes a string"),
        ("contains_word", True, "`$contains_word` takes a string"),
        ("matches", "^a", OK),
        ("matches", 123, "`$matches` takes a regex string"),
        ("contains_any_of", ["a", "b"], OK),
        ("contains_any_of", [], OK),
        ("contains_any_of", "world", '`$contains_any_of` takes a list of strings: ["text", ...]'),
        ("contains_all_of", ["a", 1], '`$contains_all_of` takes a list of strings: ["text", ...]'),
        ("matches_all_of", ["a"], OK),
        ("imatch_all_of", "a", '`$imatch_all_of` takes a list of regex strings: ["pattern", ...]'),
        ("contains_at_least_n_of", [2, ["a", "b"]], OK),
        ("contains_at_least_n_of", [0, []], OK),
        ("contains_at_least_n_of", [2.5, ["a"]], OK),
        ("contains_at_least_n_of", ["2", ["a"]], '`$contains_at_least_n_of` takes [n, ["text", ...]]: a number and a list of strings'),
        ("contains_at_least_n_of", [2, "a"], '`$contains_at_least_n_of` takes [n, ["text", ...]]: a number and a list of strings'),
        ("contains_at_least_n_of", [2, ["a"], 3], '`$contains_at_least_n_of` takes [n, ["text", ...]]: a number and a list of strings'),
        ("contains_at_least_n_of", [True, ["a"]], '`$contains_at_least_n_of` takes [n, ["text", ...]]: a number and a list of strings'),
        ("matches_at_least_n_of", [1, ["a"]], OK),
        ("matches_at_least_n_of", [1], '`$matches_at_least_n_of` takes [n, ["pattern", ...]]: a number and a list of regex strings'),
        ("word_count_between", [3, 5], OK),
        ("word_count_between", [0, 0], OK),
        ("word_count_between", [5, 3], "`$word_count_between` takes [min, max]: two numbers with 0 <= min <= max"),
        ("word_count_between", [-1, 3], "`$word_count_between` takes [min, max]: two numbers with 0 <= min <= max"),
        ("word_count_between", [3], "`$word_count_between` takes [min, max]: two numbers with 0 <= min <= max"),
        ("word_count_between", "3-5", "`$word_count_between` takes [min, max]: two numbers with 0 <= min <= max"),
        ("is_json", None, OK),
        ("is_json", True, OK),
        ("js", "r.length > 3", OK),
        ("js", 3, "`$js` takes a JavaScript expression or function body as a string"),
        ("call", {"service": "checker"}, OK),
        ("call", {"url": "https://example.com", "claim": "x"}, OK),
        ("call", {}, "`$call` takes an object with either `service` (a name from `externalServices`) or `url`, plus any parameters"),
        ("call", "invalid", "`$call` takes an object with either `service` (a name from `externalServices`) or `url`, plus any parameters"),
        ("factcheck", None, OK),
        ("factcheck", "check the dates", OK),
        ("tool_called", "calculator", OK),
        ("tool_called", "", "`$tool_called` takes a tool name (a non-empty string)"),
        ("tool_args_match", {"name": "calc", "where": {"x": 1}}, OK),
        ("tool_args_match", {"name": "calc", "where": "args.x > 1"}, OK),
        ("tool_args_match", {"where": {"x": 1}}, "`$tool_args_match` takes {name, where, normalizeWhitespace?}: a tool name and either an object the arguments must contain or a JavaScript expression over `args`"),
        ("tool_call_count_between", [1, 2], OK),
        ("tool_call_count_between", [1, 2, "calc"], OK),
        ("tool_call_count_between", "calc", "`$tool_call_count_between` takes [min, max, name?]: two numbers and an optional tool name"),
        ("tool_call_order", ["a", "b"], OK),
        ("tool_call_order", [], "`$tool_call_order` takes a list of tool names in the order they must be called: [\"a\", \"b\"]"),
        ("required_tools", ["a"], OK),
        ("prohibited_tools", "a", '`$prohibited_tools` takes a list of tool names: ["search", ...]'),
        ("max_calls", 3, OK),
        ("max_calls", 0, OK),
        ("max_calls", -1, "`$max_calls` takes a whole number of calls, 0 or more"),
        ("max_calls", 1.5, "`$max_calls` takes a whole number of calls, 0 or more"),
    ],
)  # fmt: skip
def test_check_args(name: str, args: object, expected: str | None) -> None:
    assert functions.check_args(name, args) == expected


def test_every_function_has_a_shape_and_a_description() -> None:
    for name in functions.NAMES:
        assert functions.describe(name) and functions.describe(name) != "unknown point function"
        # the check runs without raising for any shape of input
        for args in (None, "x", 1, [], {}, [1, ["a"]]):
            result = functions.check_args(name, args)
            assert result is None or result.startswith(f"`${name}` ")


def test_describe_accepts_aliases() -> None:
    assert functions.describe("icontain") == "case-insensitive substring"
    assert functions.describe("nope") == "unknown point function"


@pytest.mark.parametrize(
    ("name", "args", "patterns"),
    [
        ("matches", "^a$", ["^a$"]),
        ("imatches", "x", ["x"]),
        ("not_matches", "y", ["y"]),
        ("not_imatches", "z", ["z"]),
        ("matches_all_of", ["a", "b"], ["a", "b"]),
        ("imatch_all_of", ["a", 3], ["a"]),
        ("matches_at_least_n_of", [1, ["a", "b"]], ["a", "b"]),
        ("imatch_at_least_n_of", [1, ["c"]], ["c"]),
        ("matches", 123, []),
        ("matches_all_of", "a", []),
        ("contains", "a(", []),
        ("js", "/x/.test(r)", []),
    ],
)
def test_regex_patterns(name: str, args: object, patterns: list[str]) -> None:
    assert functions.regex_patterns(name, args) == patterns


def test_case_insensitive_regex_functions() -> None:
    insensitive = {name for name in functions.NAMES if functions.is_case_insensitive_regex(name)}
    assert insensitive == {"imatches", "not_imatches", "imatch_all_of", "imatch_at_least_n_of"}


def test_functions_written_bare() -> None:
    bare = {name for name in functions.NAMES if functions.takes_no_argument(name)}
    assert bare == {"is_json", "factcheck"}
