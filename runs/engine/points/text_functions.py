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


def _q(text: str, limit: int = 60) -> str:
    """A quoted piece of text for an explanation, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[:limit - 1] + '…'}”"


def _list(items: list[str]) -> str:
    shown = ", ".join(_q(item, 40) for item in items[:5])
    return shown + (f" and {len(items) - 5} more" if len(items) > 5 else "")


def _said(score: float | bool, explain: str) -> PointResult:
    """A score with what the function found, shown as the point's reflection."""
    return PointResult(score=float(score), explain=explain)


# -- substrings


def _substring(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not isinstance(args, str):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected a string.")
        found = args.lower() in response.lower() if ignore_case else args in response
        case = " (ignoring case)" if ignore_case else ""
        return _said(found, f"Found {_q(args)}{case}." if found else f"{_q(args)} is not in the response{case}.")

    return check


def _edge(name: str, at_start: bool, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not isinstance(args, str):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected a string.")
        text, needle = (response.lower(), args.lower()) if ignore_case else (response, args)
        ok = text.startswith(needle) if at_start else text.endswith(needle)
        where = "starts" if at_start else "ends"
        edge = response[:len(args)] if at_start else response[-len(args):] if args else ""
        return _said(ok, f"The response {where} with {_q(args)}." if ok else
                     f"The response does not {where[:-1]} with {_q(args)}; it {where} with {_q(edge)}.")

    return check


def _any_of(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not _is_string_list(args):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected an array of strings.")
        text = response.lower() if ignore_case else response
        hits = [item for item in args if (item.lower() if ignore_case else item) in text]
        return _said(bool(hits), f"Found {_list(hits)}." if hits else f"None of {_list(args)} is in the response.")

    return check


def _all_of(name: str, ignore_case: bool) -> Callable[[str, object], Outcome]:
    def check(response: str, args: object) -> Outcome:
        if not _is_string_list(args):
            return not_evaluated(f"Invalid arguments for '{name}'. Expected an array of strings.")
        if not args:
            return 1.0  # vacuously all present
        text = response.lower() if ignore_case else response
        missing = [item for item in args if (item.lower() if ignore_case else item) not in text]
        found = len(args) - len(missing)
        return _said(found / len(args), f"Found all {len(args)}." if not missing else
                     f"Found {found} of {len(args)}; missing {_list(missing)}.")

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
        hits = [item for item in items if (item.lower() if ignore_case else item) in text]
        return _said(min(1.0, len(hits) / n), f"Found {len(hits)} of the {n:g} needed"
                     + (f": {_list(hits)}." if hits else "."))

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
            match = search_js(args, response, ignore_case=ignore_case, limits=limits)
            if match is None:
                return _said(False, f"The pattern {_q(args)} does not match the response.")
            return _said(True, f"The pattern {_q(args)} matches {_q(match.group(0))}.")
        except RegexError as error:
            return not_evaluated(f"Invalid regex pattern for '{name}': {error.message}")
        except RegexTimeout as error:
            return not_evaluated(error.message)

    return check


def _count_regex_matches(name: str, patterns: list[str], response: str, ignore_case: bool,
                         limits: Limits) -> list[str] | PointResult:
    """The patterns that match, or why none could be run."""
    for source in patterns:  # every pattern is checked before any is run, as upstream compiles them all
        try:
            compile_js(source, ignore_case=ignore_case)
        except RegexError as error:
            return not_evaluated(f"Invalid regex pattern in '{name}': {error.message}")
    found = []
    for source in patterns:
        try:
            if search_js(source, response, ignore_case=ignore_case, limits=limits) is not None:
                found.append(source)
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
        missing = [p for p in args if p not in found]
        return _said(len(found) / len(args), f"All {len(args)} patterns match." if not missing else
                     f"{len(found)} of {len(args)} patterns match; not {_list(missing)}.")

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
        return _said(min(1.0, len(found) / n), f"{len(found)} of the {n:g} patterns needed match"
                     + (f": {_list(found)}." if found else "."))

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
        found = _word_pattern(args, ignore_case).search(response) is not None
        return _said(found, f"Found the word {_q(args)}." if found else f"The word {_q(args)} is not in the response.")

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
    said = f"{count} word{'s' if count != 1 else ''}; the range is {low:g} to {high:g}"
    if count < low:
        return _said(1.0 if low == 0 else count / low, said + ": too short.")
    if count > high:
        return _said(0.0 if high == 0 else high / count, said + ": too long.")
    return _said(1.0, said + ".")


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN and Infinity


def is_json(response: str, args: object) -> Outcome:
    # The whole text must be a JSON object or array; code fences are not stripped.
    try:
        parsed = json.loads(response, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        return _said(False, f"Not JSON: {str(error)[:120]}." if isinstance(error, ValueError) else
                     "Not JSON: nested too deeply to read.")
    if isinstance(parsed, (dict, list)):
        return _said(True, f"A JSON {'object' if isinstance(parsed, dict) else 'array'}.")
    return _said(False, "JSON, but a single value, not an object or an array.")


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
