"""Text point functions beyond the conformance records: edge cases, one table per family."""

from __future__ import annotations

import pytest

from runs.engine.points import evaluate_point

ERROR = "error"


def outcome(fn: str, args: object, response: str):
    result = evaluate_point(fn, args, response)
    return ERROR if result.score is None else result.score


@pytest.mark.parametrize(
    ("fn", "args", "response", "expected"),
    [
        # substrings
        ("contains", "", "anything", 1.0),
        ("contains", "a", "", 0.0),
        ("contain", "ell", "hello", 1.0),
        ("icontains", "STRASSE", "Straße", 0.0),
        ("icontains", "ΟΔΟΣ", "οδος", 1.0),
        ("icontains", "é", "CAFÉ", 1.0),
        ("contains", ["a"], "a", ERROR),
        ("contains", None, "a", ERROR),
        # starts/ends: no trimming
        ("starts_with", "Hello", "  Hello", 0.0),
        ("ends_with", "end.", "the end.\n", 0.0),
        ("istarts_with", "héllo", "HÉLLO there", 1.0),
        ("iend_with", "WORLD", "hello world", 1.0),
        ("istart_with", "", "x", 1.0),
        # any / all / at least n
        ("contains_any_of", [], "x", 0.0),
        ("icontains_any_of", ["Ä"], "ä", 1.0),
        ("contains_any_of", ["a", 1], "a", ERROR),
        ("contains_all_of", ["a", "b", "c", "d"], "a b", 0.5),
        ("icontains_all_of", [], "x", 1.0),
        ("contains_at_least_n_of", [0, []], "x", 1.0),
        ("contains_at_least_n_of", [-1, ["z"]], "x", 1.0),
        ("contains_at_least_n_of", [2, []], "x", 0.0),
        ("contains_at_least_n_of", [4, ["a", "b"]], "a b", 0.5),
        ("contains_at_least_n_of", [1.5, ["a"]], "a", 2 / 3),
        ("contains_at_least_n_of", ["2", ["a"]], "a", ERROR),
        ("contains_at_least_n_of", [True, ["a"]], "a", ERROR),
        ("contains_at_least_n_of", [1, ["a"], "extra"], "a", ERROR),
        # regexes: JavaScript syntax
        ("matches", r"^\d{4}$", "2024\n", 0.0),
        ("matches", r"^\d{4}$", "2024", 1.0),
        ("matches", "Sentence", "sentence", 0.0),
        ("imatches", "Sentence", "SENTENCE", 1.0),
        ("matches", "(?i)sentence", "SENTENCE", 1.0),  # deviation 4
        ("not_matches", "(?i)not a (financial|tax) advisor", "I am Not A Tax Advisor.", 0.0),
        ("matches", r"\bcafé\b", "un café noir", 0.0),  # \b is ASCII in JavaScript
        ("matches", "a.b", "a\rb", 0.0),
        ("matches_all_of", [], "x", 1.0),
        ("matches_all_of", ["a", "("], "a", ERROR),
        ("matches_at_least_n_of", [0, ["("]], "x", 1.0),  # n <= 0 wins before compiling, as upstream
        ("matches_at_least_n_of", [1, []], "x", 0.0),
        ("imatch_at_least_n_of", [2, ["A", "B", "("]], "a b", ERROR),
        ("imatches_all_of", ["A", "Z"], "a", 0.5),  # deviation 16 spelling
        # words
        ("contains_word", "a.b", "xa.by", 0.0),
        ("contains_word", "a.b", "x a.b y", 1.0),
        ("contains_word", "C++", "I like C++.", 1.0),
        ("contains_word", "[x]", "see [x] here", 1.0),
        ("contains_word", "42", "about 42%", 1.0),
        ("contains_word", "42", "about 420", 0.0),
        ("contains_word", "naïve", "so naïve!", 1.0),
        ("contains_word", "Paraná", "Paranáense", 0.0),
        ("icontains_word", "ÉCOLE", "une école", 1.0),
        ("contains_word", "x", "x\u0301", 1.0),  # a combining mark is not a letter (\p{L})
        ("contains_word", "ab", "٣ab", 0.0),  # Arabic-Indic digit is \p{N}
        # word count: JavaScript whitespace
        ("word_count_between", [2, 2], "one\u00a0two", 1.0),
        ("word_count_between", [2, 2], "one\u0085two", 0.5),  # U+0085 is not whitespace in JS
        ("word_count_between", [0, 0], "", 1.0),
        ("word_count_between", [0, 0], "word", 0.0),
        ("word_count_between", [0, 10], "", 1.0),
        ("word_count_between", [3, 3.5], "a b c", 1.0),
        ("word_count_between", [-1, 3], "a", ERROR),
        ("word_count_between", [1, True], "a", ERROR),
        # JSON: the whole text, objects and arrays only
        ("is_json", None, '{"a": 1}', 1.0),
        ("is_json", True, " [1, 2] \n", 1.0),
        ("is_json", None, '```json\n{"a": 1}\n```', 0.0),
        ("is_json", None, "42", 0.0),
        ("is_json", None, "null", 0.0),
        ("is_json", None, "[NaN]", 0.0),
        ("is_json", None, '{"a": 1,}', 0.0),
        ("is_json", None, "\ufeff{}", 0.0),
        ("is_json", None, "[" * 500 + "]" * 500, 1.0),
        # negations
        ("not_contains", "x", "abc", 1.0),
        ("not_icontains_all_of", ["a", "z"], "A", 0.5),
        ("not_contains_word", "cat", "category", 1.0),
        ("not_istarts_with", 1, "x", ERROR),
        ("not_imatches", "[", "x", ERROR),
    ],
)
def test_text_function(fn: str, args: object, response: str, expected: object) -> None:
    actual = outcome(fn, args, response)
    if expected == ERROR:
        assert actual == ERROR
    else:
        assert actual == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fn", "args", "message"),
    [
        ("contains", 1, "Invalid arguments for 'contains'. Expected a string."),
        ("not_contains", 1, "Invalid arguments for 'contains'. Expected a string."),
        ("matches", "(", "Invalid regex pattern for 'matches': unterminated group: add a closing `)`"),
        ("imatches", 1, "Invalid arguments for 'imatches'. Expected a regex string."),
        ("matches_all_of", ["["], "Invalid regex pattern in 'matches_all_of': unterminated character class: add a closing `]`"),
        ("contains_all_of", "x", "Invalid arguments for 'contains_all_of'. Expected an array of strings."),
        ("icontains_at_least_n_of", [1, "x"], "Invalid arguments for 'icontains_at_least_n_of'. Expected an array of the format [n, ['substring1', 'substring2', ...]]."),
        ("imatch_at_least_n_of", [1, "x"], "Invalid arguments for 'imatch_at_least_n_of'. Expected an array of the format [n, ['pattern1', 'pattern2', ...]]."),
        ("word_count_between", [3, 1], "Invalid arguments for 'word_count_between'. Expected an array with two numbers [min, max] where 0 <= min <= max."),
        ("icontains_word", 5, "Invalid arguments for 'icontains_word'. Expected a string."),
        ("nope", "x", "Unknown point function: 'nope'"),
        ("$nope", "x", "Unknown point function: 'nope'"),
        ("imatches_at_least_n_of", [1, ["a"]], "Unknown point function: 'imatches_at_least_n_of'"),
        ("factcheck", None, "`$factcheck` is not supported: it needs the upstream's hosted fact-checking service. Use `$call` with a service of your own, or a judged point."),
    ],
)  # fmt: skip
def test_error_messages(fn: str, args: object, message: str) -> None:
    result = evaluate_point(fn, args, "some text")
    assert (result.score, result.error) == (None, message)


@pytest.mark.parametrize(("fn", "args", "response", "explain"), [
    ("contains", "Paris", "It is Paris.", "Found “Paris”."),
    ("contains", "Rome", "It is Paris.", "“Rome” is not in the response."),
    ("icontains", "paris", "It is Paris.", "Found “paris” (ignoring case)."),
    ("starts_with", "Hello", "Hi there", "The response does not start with “Hello”; it starts with “Hi th”."),
    ("contains_any_of", ["a1", "b2"], "xx b2", "Found “b2”."),
    ("icontains_all_of", ["paris", "rome"], "It is Paris.", "Found 1 of 2; missing “rome”."),
    ("contains_at_least_n_of", [2, ["a", "b", "c"]], "a only", "Found 1 of the 2 needed: “a”."),
    ("imatches", "^paris", "It is Paris.", "The pattern “^paris” does not match the response."),
    ("matches", r"\d+ km", "It is 340 km away.", "The pattern “\\d+ km” matches “340 km”."),
    ("matches_all_of", ["a", "z"], "abc", "1 of 2 patterns match; not “z”."),
    ("contains_word", "cat", "concatenate", "The word “cat” is not in the response."),
    ("word_count_between", [1, 2], "It is Paris.", "3 words; the range is 1 to 2: too long."),
    ("is_json", None, "[1, 2]", "A JSON array."),
    ("is_json", None, "42", "JSON, but a single value, not an object or an array."),
])
def test_a_function_point_says_what_it_found(fn, args, response, explain):
    result = evaluate_point(fn, args, response)
    assert result.explain == explain and result.error is None
