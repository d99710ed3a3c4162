"""Tool calls a model wrote into its answer as `TOOL_CALL {json}` lines (trace-only tool use)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MARKER = "TOOL_CALL "

# JavaScript's String.prototype.trim removes these (whitespace and line terminators).
_JS_TRIM = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN and Infinity


@dataclass(frozen=True)
class ToolTrace:
    calls: list[dict] = field(default_factory=list)  # each {"name": str, "arguments": object}
    problems: list[str] = field(default_factory=list)  # one sentence per malformed TOOL_CALL line


def parse_tool_trace(text: str) -> ToolTrace:
    """Every well-formed `TOOL_CALL {json}` line, in order, and a note for each malformed one.

    A line counts when, trimmed, it starts with `TOOL_CALL ` followed by a JSON
    object whose `name` is a string. A malformed line is skipped, as upstream,
    but reported so the reviewer can see why a call was not counted.
    """
    calls: list[dict] = []
    problems: list[str] = []
    if not isinstance(text, str):
        return ToolTrace(calls, problems)
    for number, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.strip(_JS_TRIM)
        if not line.startswith(MARKER):
            continue
        try:
            payload = json.loads(line[len(MARKER) :], parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            problems.append(f"Line {number}: the text after TOOL_CALL is not valid JSON.")
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            problems.append(f'Line {number}: TOOL_CALL needs a JSON object with a string "name".')
            continue
        calls.append({"name": payload["name"], "arguments": payload.get("arguments")})
    return ToolTrace(calls, problems)


def parse_tool_calls(text: str) -> list[dict]:
    """Just the calls of parse_tool_trace."""
    return parse_tool_trace(text).calls
