# Over 500 lines: every point function's name, aliases and argument shape in one table, so the format has one registry.
"""The registry of point functions: names, aliases, argument shapes, one-line help.

This is the format's side of point functions (what a blueprint may write);
`runs.engine.points` evaluates them. Names and aliases follow the upstream's
registry (reference section 2.2) plus, per DESIGN.md:

* deviation 9: `required_tools`, `prohibited_tools` and `max_calls`, which the
  header fields `requiredTools`, `prohibitedTools` and `maxCalls` become;
* deviation 16: `imatches_all_of` (the guide's spelling) is accepted, and one
  leading `$` on a name is stripped.

Lookups are case-sensitive, as upstream.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "NAMES",
    "ALIASES",
    "resolve",
    "suggest",
    "check_args",
    "regex_patterns",
    "is_case_insensitive_regex",
    "describe",
    "takes_no_argument",
    "METRIC_FUNCTIONS",
    "FILE_FUNCTIONS",
    "EXTENSION_FUNCTIONS",
]


@dataclass(frozen=True)
class _Spec:
    shape: str  # a key of _SHAPE_CHECKS
    description: str


# Argument shapes. Each check returns True when the argument is acceptable.


def is_number(value: object) -> bool:
    """An int or float from YAML or JSON. Booleans arrive as bool, a subclass of int; JavaScript's
    `typeof` would call them booleans, not numbers."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value: object) -> bool:
    """A number that is not NaN (`.nan` in YAML): no argument shape accepts NaN."""
    return is_number(value) and not math.isnan(value)


_is_number = is_finite_number  # the argument shapes below read it


def _is_string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_n_of(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and _is_number(value[0])
        and _is_string_list(value[1])
    )


def _is_min_max(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and _is_number(value[0])
        and _is_number(value[1])
        and 0 <= value[0] <= value[1]
    )


def _is_count_range(value: object) -> bool:
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        return False
    numbers_ok = all(_is_number(item) for item in value[:2])
    name_ok = len(value) < 3 or isinstance(value[2], str)
    return numbers_ok and name_ok


def _is_tool_args_spec(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and bool(value["name"])
        and isinstance(value.get("where"), (dict, str))
    )


def _is_tool_order(value: object) -> bool:
    return isinstance(value, list) and any(isinstance(item, str) for item in value)


def _is_call_spec(value: object) -> bool:
    return isinstance(value, dict) and (bool(value.get("service")) or bool(value.get("url")))


def _is_non_negative_int(value: object) -> bool:
    return _is_number(value) and value >= 0 and float(value).is_integer()


# --- extension functions (docs/points.md, "Checks from other suite formats") ---------------

FIELD_MATCHES = ("exact", "numeric_tolerance", "date")
TRAJECTORY_MODES = ("any_order", "in_order", "exact", "superset", "subset")
ARGS_MATCH_MODES = ("exact", "superset", "subset", "ignore")


def _is_equals(value: object) -> bool:
    if isinstance(value, str):
        return True
    return (isinstance(value, dict) and isinstance(value.get("value"), str)
            and set(value) <= {"value", "trim"} and isinstance(value.get("trim", True), bool))


def _schema_problem(value: object) -> str | None:
    if not isinstance(value, dict):
        return "takes a JSON Schema (a mapping such as {type: object, required: [name]})"
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        jsonschema.validators.validator_for(value, default=jsonschema.Draft202012Validator).check_schema(value)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return f"takes a valid JSON Schema; this one is not: {exc.message}" + (f" (at {where})" if where else "")
    return None


def _is_schema(value: object) -> bool:
    return _schema_problem(value) is None


def _is_field_spec(value: object) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("path"), str) or not value["path"]:
        return False
    if value.get("match", "exact") not in FIELD_MATCHES:
        return False
    if "tolerance" in value and not (_is_number(value["tolerance"]) and value["tolerance"] >= 0):
        return False
    if "weight" in value and not (_is_number(value["weight"]) and value["weight"] >= 0):
        return False
    if "formats" in value and not _is_string_list(value["formats"]):
        return False
    return all(isinstance(value.get(k, False), bool) for k in ("required", "relative"))


def _is_field_accuracy(value: object) -> bool:
    return (isinstance(value, dict) and "expected" in value and isinstance(value.get("fields"), list)
            and bool(value["fields"]) and all(_is_field_spec(f) for f in value["fields"])
            and value.get("aggregation", "weighted_average") in ("weighted_average", "all_or_nothing"))


def _is_positive(value: object) -> bool:
    return _is_number(value) and value > 0


def _is_token_caps(value: object) -> bool:
    if _is_number(value):
        return value > 0
    return (isinstance(value, dict) and bool(value) and set(value) <= {"total", "input", "output"}
            and all(_is_positive(v) for v in value.values()))


def _is_args_match(value: object) -> bool:
    """A mode, or AgentV's list of dot-paths: only those fields are compared."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(p, str) and p for p in value)
    return value in ARGS_MATCH_MODES


def _is_trajectory_item(value: object) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("tool"), str) and bool(value["tool"])
            and (value.get("args") is None or value.get("args") == "any" or isinstance(value.get("args"), dict))
            and _is_args_match(value.get("args_match", "exact")))


def _is_trajectory(value: object) -> bool:
    if not isinstance(value, dict) or value.get("mode") not in TRAJECTORY_MODES:
        return False
    expected = value.get("expected", [])
    minimums = value.get("minimums", {})
    if not isinstance(expected, list) or not all(_is_trajectory_item(item) for item in expected):
        return False
    if not isinstance(minimums, dict) or not all(isinstance(k, str) and _is_non_negative_int(n)
                                                 for k, n in minimums.items()):
        return False
    if value["mode"] == "any_order":
        return bool(minimums) or bool(expected)
    return bool(expected) and _is_args_match(value.get("args_match", "exact"))


def _is_tool_expectations(value: object) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("expected"), list) or not value["expected"]:
        return False
    for item in value["expected"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            return False
        if not isinstance(item.get("args_match") or {}, dict):
            return False
        if not _is_non_negative_int(item.get("order", 0)) or not isinstance(item.get("required", False), bool):
            return False
    return isinstance(value.get("only_required", False), bool)


def _is_budgets(value: object) -> bool:
    if not isinstance(value, dict) or not value or set(value) - {"max_steps", "max_tokens"}:
        return False
    return all(_is_number(v) and v > 0 for v in value.values())


def _is_command(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    command = value.get("command")
    if not (isinstance(command, list) and command and all(isinstance(t, str) and t for t in command)):
        return False
    timeout = value.get("timeout_s", 30)
    return _is_number(timeout) and 0 < timeout <= 600 and isinstance(value.get("cwd", ""), str)


_SHAPE_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "string": (lambda v: isinstance(v, str), "takes a string"),
    "regex": (lambda v: isinstance(v, str), "takes a regex string"),
    "strings": (_is_string_list, 'takes a list of strings: ["text", ...]'),
    "regexes": (_is_string_list, 'takes a list of regex strings: ["pattern", ...]'),
    "n_of_strings": (_is_n_of, 'takes [n, ["text", ...]]: a number and a list of strings'),
    "n_of_regexes": (_is_n_of, 'takes [n, ["pattern", ...]]: a number and a list of regex strings'),
    "min_max": (_is_min_max, "takes [min, max]: two numbers with 0 <= min <= max"),
    "anything": (lambda v: True, "takes no argument"),
    "js": (lambda v: isinstance(v, str), "takes a JavaScript expression or function body as a string"),
    "call": (
        _is_call_spec,
        "takes an object with either `service` (a name from `externalServices`) or `url`, plus any parameters",
    ),
    "instruction": (lambda v: v is None or isinstance(v, str), "takes an optional instruction string"),
    "tool_name": (lambda v: isinstance(v, str) and bool(v), "takes a tool name (a non-empty string)"),
    "tool_args": (
        _is_tool_args_spec,
        "takes {name, where, normalizeWhitespace?}: a tool name and either an object the arguments "
        "must contain or a JavaScript expression over `args`",
    ),
    "count_range": (_is_count_range, "takes [min, max, name?]: two numbers and an optional tool name"),
    "tool_order": (_is_tool_order, 'takes a list of tool names in the order they must be called: ["a", "b"]'),
    "tool_names": (_is_string_list, 'takes a list of tool names: ["search", ...]'),
    "max_count": (_is_non_negative_int, "takes a whole number of calls, 0 or more"),
    "equals": (_is_equals, "takes the expected text, or {value: text, trim: false} to compare without trimming"),
    "json_schema": (_is_schema, "takes a JSON Schema (a mapping such as {type: object, required: [name]})"),
    "field_accuracy": (
        _is_field_accuracy,
        "takes {expected: <JSON value>, fields: [{path: a.b, match?: exact|numeric_tolerance|date, tolerance?, "
        "relative?, required?, weight?, formats?}], aggregation?: weighted_average|all_or_nothing}",
    ),
    "milliseconds": (_is_positive, "takes a number of milliseconds greater than 0"),
    "usd": (lambda v: _is_number(v) and v >= 0, "takes an amount in US dollars, 0 or more"),
    "token_caps": (_is_token_caps, "takes a token count, or {total?, input?, output?} with at least one count"),
    "budgets": (_is_budgets, "takes {max_steps?, max_tokens?}: at least one budget, each a number above 0"),
    "trajectory": (
        _is_trajectory,
        "takes {mode: any_order|in_order|exact|superset|subset, expected: [{tool, args?, args_match?}], "
        "minimums?: {tool: n}, args_match?: exact|superset|subset|ignore|[field.path, ...]}",
    ),
    "tool_expectations": (
        _is_tool_expectations,
        "takes {expected: [{name, args_match?, order?, required?}], only_required?: true/false}",
    ),
    "command": (
        _is_command,
        "takes {command: [program, arg, ...], timeout_s?: 1 to 600, cwd?: folder in the suite, config?: anything}",
    ),
}


_BASE_FUNCTIONS: dict[str, _Spec] = {
    "contains": _Spec("string", "substring (case-sensitive)"),
    "icontains": _Spec("string", "case-insensitive substring"),
    "contains_any_of": _Spec("strings", "contains at least one of the strings (case-sensitive)"),
    "icontains_any_of": _Spec("strings", "contains at least one of the strings, ignoring case"),
    "contains_all_of": _Spec("strings", "graded: share of the strings contained (case-sensitive)"),
    "icontains_all_of": _Spec("strings", "graded: share of the strings contained, ignoring case"),
    "contains_at_least_n_of": _Spec("n_of_strings", "graded: found / n of the strings, up to 1 (case-sensitive)"),
    "icontains_at_least_n_of": _Spec("n_of_strings", "graded: found / n of the strings, up to 1, ignoring case"),
    "matches": _Spec("regex", "JavaScript regex matches somewhere in the response (case-sensitive)"),
    "imatches": _Spec("regex", "JavaScript regex matches somewhere, ignoring case"),
    "matches_all_of": _Spec("regexes", "graded: share of the regexes that match (case-sensitive)"),
    "imatch_all_of": _Spec("regexes", "graded: share of the regexes that match, ignoring case"),
    "matches_at_least_n_of": _Spec("n_of_regexes", "graded: matching regexes / n, up to 1 (case-sensitive)"),
    "imatch_at_least_n_of": _Spec("n_of_regexes", "graded: matching regexes / n, up to 1, ignoring case"),
    "starts_with": _Spec("string", "response starts with the text exactly (no trimming)"),
    "istarts_with": _Spec("string", "response starts with the text, ignoring case"),
    "ends_with": _Spec("string", "response ends with the text exactly (no trimming)"),
    "iends_with": _Spec("string", "response ends with the text, ignoring case"),
    "contains_word": _Spec("string", "whole word or phrase, Unicode-aware boundaries (case-sensitive)"),
    "icontains_word": _Spec("string", "whole word or phrase, Unicode-aware boundaries, ignoring case"),
    "word_count_between": _Spec("min_max", "graded: word count within [min, max], partial credit outside"),
    "is_json": _Spec("anything", "the whole response parses as a JSON object or array"),
    "js": _Spec("js", "JavaScript expression or body over `r`/`response` and `context`, run in a sandbox"),
    "call": _Spec("call", "external scoring service over HTTP (allowed hosts only)"),
    "factcheck": _Spec("instruction", "upstream's hosted fact-checker (not supported here)"),
    "tool_called": _Spec("tool_name", "the tool trace has at least one call to the tool"),
    "tool_args_match": _Spec("tool_args", "a call to the tool has arguments matching `where`"),
    "tool_call_count_between": _Spec("count_range", "number of tool calls (of one tool, if named) within [min, max]"),
    "tool_call_order": _Spec("tool_order", "the tools were called in this order (other calls in between allowed)"),
    "required_tools": _Spec("tool_names", "every listed tool was called (from `requiredTools`)"),
    "prohibited_tools": _Spec("tool_names", "none of the listed tools was called (from `prohibitedTools`)"),
    "max_calls": _Spec("max_count", "at most this many tool calls in the trace (from `maxCalls`)"),
    # Extensions: structured output, metric checks, trajectories, script graders (docs/points.md).
    "equals": _Spec("equals", "the response equals the text (both sides trimmed unless trim: false)"),
    "json_matches_schema": _Spec("json_schema", "the whole response is JSON that validates against the schema"),
    "field_accuracy": _Spec("field_accuracy", "graded: fields of the JSON response that match the expected values"),
    "latency_under": _Spec("milliseconds", "generation took at most this many milliseconds"),
    "cost_under": _Spec("usd", "generation cost at most this many US dollars"),
    "tokens_under": _Spec("token_caps", "tokens used stay within the caps (total = input + output)"),
    "llm_calls_under": _Spec("max_count", "at most this many model calls (generated turns) for the response"),
    "efficiency": _Spec("budgets", "graded: mean over the budgets of min(1, budget / used) (model calls, tokens)"),
    "tool_trajectory": _Spec("trajectory", "graded: the tool calls follow the expected trajectory"),
    "tool_calls_match": _Spec("tool_expectations", "graded: expected tool calls (by position or not) were made"),
    "code_judge": _Spec("command", "a script from the suite scores the response (JSON on stdin and stdout)"),
}

# Functions that read what a run recorded (latency, cost, tokens, model calls) rather than
# the response's text, and the one that needs the suite's files.
METRIC_FUNCTIONS = frozenset({"latency_under", "cost_under", "tokens_under", "llm_calls_under", "efficiency"})
FILE_FUNCTIONS = frozenset({"code_judge"})
EXTENSION_FUNCTIONS = frozenset({"equals", "json_matches_schema", "field_accuracy", "tool_trajectory", "tool_calls_match",
                                 *METRIC_FUNCTIONS, *FILE_FUNCTIONS})

# The upstream's negative variants: exactly these, no others (`not_is_json` does not exist).
_NEGATED_DESCRIPTIONS = {
    "contains": "does not contain the substring (case-sensitive)",
    "icontains": "does not contain the substring, ignoring case",
    "contains_any_of": "contains none of the strings (case-sensitive)",
    "icontains_any_of": "contains none of the strings, ignoring case",
    "contains_all_of": "graded: share of the strings absent (case-sensitive)",
    "icontains_all_of": "graded: share of the strings absent, ignoring case",
    "matches": "JavaScript regex matches nowhere (case-sensitive)",
    "imatches": "JavaScript regex matches nowhere, ignoring case",
    "starts_with": "response does not start with the text (case-sensitive)",
    "istarts_with": "response does not start with the text, ignoring case",
    "ends_with": "response does not end with the text (case-sensitive)",
    "iends_with": "response does not end with the text, ignoring case",
    "contains_word": "does not contain the whole word or phrase (case-sensitive)",
    "icontains_word": "does not contain the whole word or phrase, ignoring case",
}

_SPECS: dict[str, _Spec] = dict(_BASE_FUNCTIONS)
for _base, _description in _NEGATED_DESCRIPTIONS.items():
    _SPECS[f"not_{_base}"] = _Spec(_BASE_FUNCTIONS[_base].shape, _description)

NAMES: frozenset[str] = frozenset(_SPECS)

# Extra spellings the upstream registry accepts, mapped to the canonical name.
ALIASES: dict[str, str] = {
    "contain": "contains",
    "icontain": "icontains",
    "icontain_any_of": "icontains_any_of",
    "contain_all_of": "contains_all_of",
    "icontain_all_of": "icontains_all_of",
    "contain_at_least_n_of": "contains_at_least_n_of",
    "icontain_at_least_n_of": "icontains_at_least_n_of",
    "match": "matches",
    "imatch": "imatches",
    "match_all_of": "matches_all_of",
    "imatches_all_of": "imatch_all_of",  # deviation 16: the guide's spelling
    "match_at_least_n_of": "matches_at_least_n_of",
    "istart_with": "istarts_with",
    "iend_with": "iends_with",
    "contain_word": "contains_word",
    "icontain_word": "icontains_word",
    "expr": "js",
    "external": "call",
    "not_contain": "not_contains",
    "not_icontain": "not_icontains",
    "not_contain_any_of": "not_contains_any_of",
    "not_icontain_any_of": "not_icontains_any_of",
    "not_contain_all_of": "not_contains_all_of",
    "not_icontain_all_of": "not_icontains_all_of",
    "not_match": "not_matches",
    "not_imatch": "not_imatches",
    "not_start_with": "not_starts_with",
    "not_istart_with": "not_istarts_with",
    "not_end_with": "not_ends_with",
    "not_iend_with": "not_iends_with",
    "not_contain_word": "not_contains_word",
    "not_icontain_word": "not_icontains_word",
}

_REGEX_FUNCTIONS = {
    "matches": False,
    "imatches": True,
    "not_matches": False,
    "not_imatches": True,
    "matches_all_of": False,
    "imatch_all_of": True,
    "matches_at_least_n_of": False,
    "imatch_at_least_n_of": True,
}


def resolve(name: str) -> str | None:
    """Any accepted spelling of a function name -> its canonical name; None if unknown."""
    if not isinstance(name, str):
        return None
    if name.startswith("$"):
        name = name[1:]  # deviation 16: `fn: $js` means `js`
    if name in NAMES:
        return name
    if name in ALIASES:
        return ALIASES[name]
    # The upstream parser's prefix rewrite: `contain...` -> `contains...`, `match...` -> `matches...`.
    for short, full in (("contain", "contains"), ("match", "matches")):
        if name.startswith(short) and not name.startswith(full):
            rewritten = full + name[len(short) :]
            return rewritten if rewritten in NAMES else ALIASES.get(rewritten)
    return None


def upstream_spelling(name: str) -> str:
    """A function name as the upstream's parser leaves it in a prompt (and so in its hash): only the prefixes
    `contain...` -> `contains...` and `match...` -> `matches...` are rewritten; `imatch` stays `imatch`."""
    name = name[1:] if name.startswith("$") else name
    for short, full in (("contain", "contains"), ("match", "matches")):
        if name.startswith(short) and not name.startswith(full):
            return full + name[len(short):]
    return name


def suggest(name: str) -> str | None:
    """The canonical name closest to a misspelt one, for a "did you mean" hint."""
    if not isinstance(name, str):
        return None
    known = resolve(name)
    if known is not None:
        return known
    bare = name.lstrip("$")
    # The guide writes `imatches_...` where the registry has `imatch_...`.
    if bare.startswith("imatches_") and resolve("imatch_" + bare[len("imatches_") :]):
        return resolve("imatch_" + bare[len("imatches_") :])
    # A truncated name (`word_count`) is too short for difflib but unambiguous.
    extensions = [known_name for known_name in NAMES if known_name.startswith(bare)]
    if len(bare) >= 4 and len(extensions) == 1:
        return extensions[0]
    close = difflib.get_close_matches(bare, sorted(NAMES), n=1, cutoff=0.75)
    if close:
        return close[0]
    close = difflib.get_close_matches(bare, sorted(ALIASES), n=1, cutoff=0.75)
    return ALIASES[close[0]] if close else None


def check_args(name: str, args: object) -> str | None:
    """None when `args` suits the (canonical) function; otherwise one sentence on the expected shape."""
    spec = _SPECS.get(name)
    if spec is None:
        return f"`${name}` is not a point function"
    check, expected = _SHAPE_CHECKS[spec.shape]
    if check(args):
        return None
    if spec.shape == "json_schema":
        return f"`${name}` {_schema_problem(args)}"
    return f"`${name}` {expected}"


def takes_no_argument(name: str) -> bool:
    """True for functions written bare, as a string point: `$is_json`, `$factcheck`."""
    spec = _SPECS.get(name)
    return spec is not None and spec.shape in ("anything", "instruction")


def regex_patterns(name: str, args: object) -> list[str]:
    """The JavaScript regex sources a call of `name` will compile (empty for non-regex functions)."""
    if name not in _REGEX_FUNCTIONS:
        return []
    if isinstance(args, str):
        return [args] if _SPECS[name].shape == "regex" else []
    if _SPECS[name].shape in ("n_of_regexes",) and isinstance(args, list) and len(args) == 2:
        args = args[1]
    if _SPECS[name].shape in ("regexes", "n_of_regexes") and isinstance(args, list):
        return [item for item in args if isinstance(item, str)]
    return []


def is_case_insensitive_regex(name: str) -> bool:
    return _REGEX_FUNCTIONS.get(name, False)


def describe(name: str) -> str:
    """One line of help for the editor; accepts any spelling."""
    canonical = resolve(name)
    if canonical is None:
        return "unknown point function"
    return _SPECS[canonical].description
