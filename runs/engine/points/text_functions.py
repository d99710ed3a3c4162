"""Point functions over the response text: substrings, regexes, words, word count, JSON.

Each function takes the response and the point's argument, and returns a bool,
a number (graded), or a PointResult for an error. Argument checks and error
texts follow the upstream's functions, which conformance records quote.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable

from blueprints.spec.functions import is_number
from blueprints.spec.jsregex import RegexError, RegexTimeout, compile_js, search_js
from blueprints.spec.limits import DEFAULT_LIMITS, Limits

from .result import PointResult, not_evaluated

Outcome = bool | float | PointResult

_JS_NON_SPACE_RUN = compile_js(r"\S+")


def _is_string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


# -- substrings


def _substring(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not isinstance(args, str):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected a string.")
        if ignore_case:
            return args.lower() in response.lower()
        return args in response

    return check


def _edge(name: str, at_start: bool, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not isinstance(args, str):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected a string.")
        text, needle = (response.lower(), args.lower()) if ignore_case else (response, args)
        return text.startswith(needle) if at_start else text.endswith(needle)

    return check


def _any_of(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not _is_string_list(args):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected an array of strings.")
        text = response.lower() if ignore_case else response
        return any((item.lower() if ignore_case else item) in text for item in args)

    return check


def _all_of(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not _is_string_list(args):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected an array of strings.")
        if not args:
            return 1.0  # vacuously all present
        text = response.lower() if ignore_case else response
        found = sum((item.lower() if ignore_case else item) in text for item in args)
        return found / len(args)

    return check


def _n_of_shape_error(name: str, noun: str) -> PointResult:
    return not_evaluated(
        f"Invalid arguments for '{name}'. Expected an array of the format [n, ['{noun}1', '{noun}2', ...]]."
    )


def _n_of_args(args: object) -> tuple[float, list[str]] | None:
    if isinstance(args, list) and len(args) == 2 and is_number(args[0]) and _is_string_list(args[1]):
        return args[0], args[1]
    return None


def _at_least_n_of(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        parsed = _n_of_args(args)
        if parsed is None:
            return _n_of_shape_error(name, "substring")
        n, items = parsed
        if n <= 0:
            return 1.0  # asking for none is always met
        if not items:
            return 0.0
        text = response.lower() if ignore_case else response
        found = sum((item.lower() if ignore_case else item) in text for item in items)
        return min(1.0, found / n)

    return check


# -- regexes (JavaScript syntax, run by Python through jsregex, each match time-limited)
#
# These take `limits` (evaluate_point passes its own); a match that runs past
# `limits.regex_timeout_s` leaves the point not evaluated with the reason.


def _regex(name: str, ignore_case: bool) -> Callable[..., Outcome]:
    def check(response: str, args: object, limits: Limits = DEFAULT_LIMITS) -> Outcome:
        if not isinstance(args, str):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected a regex string.")
        try:
            return search_js(args, response, ignore_case=ignore_case, limits=limits) is not None
        except RegexError as error:
            return not_evaluated(f"Invalid regex pattern for '{name}': {error.message}")
        except RegexTimeout as error:
            return not_evaluated(error.message)

    return check


def _count_regex_matches(name: str, patterns: list[str], response: str, ignore_case: bool,
                         limits: Limits) -> int | PointResult:
    for source in patterns:  # every pattern is checked before any is run, as upstream compiles them all
        try:
            compile_js(source, ignore_case=ignore_case)
        except RegexError as error:
            return not_evaluated(f"Invalid regex pattern in '{name}': {error.message}")
    found = 0
    for source in patterns:
        try:
            found += search_js(source, response, ignore_case=ignore_case, limits=limits) is not None
        except RegexTimeout as error:
            return not_evaluated(error.message)
    return found


def _regex_all_of(name: str, ignore_case: bool) -> Callable[..., Outcome]:
    def check(response: str, args: object, limits: Limits = DEFAULT_LIMITS) -> Outcome:
        if not _is_string_list(args):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected an array of regex strings.")
        if not args:
            return 1.0
        found = _count_regex_matches(name, args, response, ignore_case, limits)
        if isinstance(found, PointResult):
            return found
        return found / len(args)

    return check


def _regex_at_least_n_of(name: str, ignore_case: bool) -> Callable[..., Outcome]:
    def check(response: str, args: object, limits: Limits = DEFAULT_LIMITS) -> Outcome:
        parsed = _n_of_args(args)
        if parsed is None:
            return _n_of_shape_error(name, "pattern")
        n, patterns = parsed
        if n <= 0:
            return 1.0
        if not patterns:
            return 0.0
        found = _count_regex_matches(name, patterns, response, ignore_case, limits)
        if isinstance(found, PointResult):
            return found
        return min(1.0, found / n)

    return check


# -- whole words


@functools.lru_cache(maxsize=4096)
def _word_pattern(word: str, ignore_case: bool) -> re.Pattern[str]:
    # The upstream uses (?<![\p{L}\p{N}_])word(?![\p{L}\p{N}_]) with the u flag.
    # Python's Unicode \w is exactly letters, numbers and underscore.
    return re.compile(rf"(?<!\w){re.escape(word)}(?!\w)", re.IGNORECASE if ignore_case else 0)


def _word(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not isinstance(args, str):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected a string.")
        if not args:
            return True  # the empty word is vacuously present
        return _word_pattern(args, ignore_case).search(response) is not None

    return check


# -- length and form


def word_count_between(response: str, args: object) -> Outcome:
    if not (
        isinstance(args, list)
        and len(args) == 2
        and is_number(args[0])
        and is_number(args[1])
        and 0 <= args[0] <= args[1]
    ):
        return not_evaluated(
            "Invalid arguments for 'word_count_between'. "
            "Expected an array with two numbers [min, max] where 0 <= min <= max."
        )
    low, high = args
    count = len(_JS_NON_SPACE_RUN.findall(response))
    if count < low:
        return 1.0 if low == 0 else count / low
    if count > high:
        return 0.0 if high == 0 else high / count
    return 1.0


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN and Infinity


def is_json(response: str, args: object) -> Outcome:
    # The whole text must be a JSON object or array; code fences are not stripped.
    try:
        parsed = json.loads(response, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, (dict, list))


# The functions above that run user-written regexes: they take `limits` too.
REGEX_FUNCTIONS = frozenset({
    "matches", "imatches", "matches_all_of", "imatch_all_of", "matches_at_least_n_of", "imatch_at_least_n_of",
})

TEXT_FUNCTIONS: dict[str, Callable[..., Outcome]] = {
    "contains": _substring("contains", False),
    "icontains": _substring("icontains", True),
    "starts_with": _edge("starts_with", True, False),
    "istarts_with": _edge("istarts_with", True, True),
    "ends_with": _edge("ends_with", False, False),
    "iends_with": _edge("iends_with", False, True),
    "contains_any_of": _any_of("contains_any_of", False),
    "icontains_any_of": _any_of("icontains_any_of", True),
    "contains_all_of": _all_of("contains_all_of", False),
    "icontains_all_of": _all_of("icontains_all_of", True),
    "contains_at_least_n_of": _at_least_n_of("contains_at_least_n_of", False),
    "icontains_at_least_n_of": _at_least_n_of("icontains_at_least_n_of", True),
    "matches": _regex("matches", False),
    "imatches": _regex("imatches", True),
    "matches_all_of": _regex_all_of("matches_all_of", False),
    "imatch_all_of": _regex_all_of("imatch_all_of", True),
    "matches_at_least_n_of": _regex_at_least_n_of("matches_at_least_n_of", False),
    "imatch_at_least_n_of": _regex_at_least_n_of("imatch_at_least_n_of", True),
    "contains_word": _word("contains_word", False),
    "icontains_word": _word("icontains_word", True),
    "word_count_between": word_count_between,
    "is_json": is_json,
}
