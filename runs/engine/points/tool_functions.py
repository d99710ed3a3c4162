"""Point functions over the tool-call trace.

`tool_called`, `tool_args_match`, `tool_call_count_between` and
`tool_call_order` follow the upstream. `required_tools`, `prohibited_tools`
and `max_calls` are ours (DESIGN deviation 9): the upstream parses the header
fields `requiredTools`, `prohibitedTools` and `maxCalls` but never scores them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from blueprints.spec.functions import is_number
from blueprints.spec.jsregex import compile_js

from .result import PointResult, not_evaluated, scored

if TYPE_CHECKING:
    from .js_sandbox import JsSandbox

Outcome = bool | float | PointResult

_JS_SPACE_RUN = compile_js(r"\s+")


def tool_called(calls: list[dict], args: object) -> Outcome:
    if not isinstance(args, str) or not args:
        return not_evaluated("tool_called expects a string tool name")
    return any(call.get("name") == args for call in calls)


def tool_call_count_between(calls: list[dict], args: object) -> Outcome:
    # As upstream: missing or mistyped bounds fall back to 0 and infinity.
    bounds = args if isinstance(args, list) else []
    low = bounds[0] if len(bounds) > 0 and is_number(bounds[0]) else 0
    high = bounds[1] if len(bounds) > 1 and is_number(bounds[1]) else math.inf
    name = bounds[2] if len(bounds) > 2 and isinstance(bounds[2], str) else None
    count = sum(1 for call in calls if not name or call.get("name") == name)
    return low <= count <= high


def tool_call_order(calls: list[dict], args: object) -> Outcome:
    expected = [item for item in args if isinstance(item, str)] if isinstance(args, list) else []
    if not expected:
        return not_evaluated("tool_call_order expects an array of tool names")
    position = 0
    for call in calls:
        if call.get("name") == expected[position]:
            position += 1
            if position == len(expected):
                return True
    return False


# -- tool_args_match


def _js_type(value: object) -> str:
    if value is None or isinstance(value, (dict, list)):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def _strictly_equal(a: object, b: object) -> bool:
    """JavaScript `===` on JSON values (objects compare by identity, so never equal here)."""
    if _js_type(a) != _js_type(b):
        return False
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    return a == b


def _keys(partial: dict | list) -> list[str | int]:
    return list(range(len(partial))) if isinstance(partial, list) else list(partial)


def _lookup(container: object, key: str | int) -> tuple[bool, object]:
    """JavaScript's `key in container` and `container[key]` for JSON values."""
    if isinstance(container, dict):
        text_key = str(key)
        return (text_key in container, container.get(text_key))
    if isinstance(container, list):
        try:
            index = int(key)
        except ValueError:
            return (False, None)
        if str(index) == str(key) and 0 <= index < len(container):
            return (True, container[index])
        return (False, None)
    # The upstream's `key in value` throws on a string, number or null; the
    # evaluator turns that into an error, and so do we.
    raise TypeError(f"Cannot use 'in' operator to search for '{key}' in {container!r}")


def _contains_partial(actual: object, partial: object, strip_spaces: bool) -> bool:
    if not isinstance(partial, (dict, list)):
        return False
    for key in _keys(partial):
        present, actual_value = _lookup(actual, key)
        if not present:
            return False
        wanted = partial[key]
        if isinstance(wanted, (dict, list)):
            if not _contains_partial(actual_value, wanted, strip_spaces):
                return False
        elif isinstance(wanted, str) and isinstance(actual_value, str):
            if strip_spaces:
                wanted, actual_value = _JS_SPACE_RUN.sub("", wanted), _JS_SPACE_RUN.sub("", actual_value)
            if wanted != actual_value:
                return False
        elif not _strictly_equal(actual_value, wanted):
            return False
    return True


def tool_args_match(calls: list[dict], args: object, sandbox: JsSandbox) -> Outcome:
    spec = args if isinstance(args, dict) else {}
    name = spec.get("name")
    if not name:
        return not_evaluated("tool_args_match expects { name, where }")
    where = spec.get("where")
    strip_spaces = bool(spec.get("normalizeWhitespace"))
    for call in calls:
        if call.get("name") != name or call.get("arguments") is None:
            continue
        if isinstance(where, str):
            verdict = sandbox.evaluate_where(where, call["arguments"])
            if isinstance(verdict, PointResult):
                return verdict  # the expression broke a sandbox limit
            if verdict:
                return True
        elif isinstance(where, (dict, list)) and _contains_partial(call["arguments"], where, strip_spaces):
            return True
    return False


# -- ours: the header's tool policy as points


def _names_or_error(function: str, args: object) -> list[str] | PointResult:
    if isinstance(args, list) and all(isinstance(item, str) for item in args):
        return args
    return not_evaluated(f"`${function}` takes a list of tool names")


def required_tools(calls: list[dict], args: object) -> Outcome:
    names = _names_or_error("required_tools", args)
    if isinstance(names, PointResult):
        return names
    called = {call.get("name") for call in calls}
    missing = [name for name in names if name not in called]
    if missing:
        return scored(False, "Required tools not called: " + ", ".join(missing) + ".")
    return scored(True, "Every required tool was called.")


def prohibited_tools(calls: list[dict], args: object) -> Outcome:
    names = _names_or_error("prohibited_tools", args)
    if isinstance(names, PointResult):
        return names
    called = {call.get("name") for call in calls}
    used = [name for name in names if name in called]
    if used:
        return scored(False, "Prohibited tools called: " + ", ".join(used) + ".")
    return scored(True, "No prohibited tool was called.")


def max_calls(calls: list[dict], args: object) -> Outcome:
    if not (is_number(args) and args >= 0 and float(args).is_integer()):
        return not_evaluated("`$max_calls` takes a whole number of calls, 0 or more")
    count = len(calls)
    limit = int(args)
    plural = "call" if count == 1 else "calls"
    if count <= limit:
        return scored(True, f"{count} tool {plural}, within the limit of {limit}.")
    return scored(False, f"{count} tool {plural}, more than the limit of {limit}.")
