"""Tool calls a model wrote into its answer as `TOOL_CALL {json}` lines (trace-only tool use), and the Markdown
rendering of a response's calls that AI Eval's text checks see."""

from __future__ import annotations

import json
import re
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


# --- The response text with its tool calls (AI Eval's `contains`, `regex` and `llm_judge`) -------------------------

TOOL_CALLS_HEADING = "## Tool calls"
MAX_RENDERED_ARGUMENT_CHARS = 20_000  # one call's arguments as JSON; past this they are cut, and it says so
MAX_RENDERED_CHARS = 100_000  # the whole rendering; calls past it are left out, and it says how many


_BACKTICKS = re.compile("`+")


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def _code_span(text: str) -> str:
    """``text`` as one Markdown code span on one line, whatever backticks it holds."""
    text = " ".join(text.split())
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _arguments_json(arguments: object) -> str:
    """A call's arguments as one line of JSON (keys in the model's order); unreadable text kept as the model sent
    it; cut at MAX_RENDERED_ARGUMENT_CHARS."""
    if isinstance(arguments, str):
        shown = arguments
    else:
        try:
            shown = json.dumps(arguments, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            shown = str(arguments)
    if len(shown) > MAX_RENDERED_ARGUMENT_CHARS:
        shown = (shown[:MAX_RENDERED_ARGUMENT_CHARS]
                 + f"… (cut: {len(shown):,} characters, more than {MAX_RENDERED_ARGUMENT_CHARS:,})")
    return shown


def render_tool_calls(calls: list[dict]) -> str:
    """The calls as Markdown: a ``## Tool calls`` heading, then per call a numbered heading with the tool's name in
    a code span and its arguments as one line of JSON in a ``json`` fence (arguments the model sent as text that
    is not JSON: that text, in a ``text`` fence). Empty when there are no calls. Bounded:
    MAX_RENDERED_ARGUMENT_CHARS a call, MAX_RENDERED_CHARS in all (the calls left out are counted)."""
    calls = [c for c in calls if isinstance(c, dict)]
    if not calls:
        return ""
    parts = [TOOL_CALLS_HEADING]
    size = len(TOOL_CALLS_HEADING)
    for index, call in enumerate(calls, start=1):
        name = call.get("name")
        body = _arguments_json(call.get("arguments"))
        fence = "`" * max(3, _longest_backticks(body) + 1)
        title = _code_span(name if isinstance(name, str) else str(name))
        info = "text" if isinstance(call.get("arguments"), str) else "json"  # text the model sent that is not JSON
        block = f"### {index}. {title}\n\n{fence}{info}\n{body}\n{fence}"
        if size + len(block) > MAX_RENDERED_CHARS and index > 1:
            left = len(calls) - index + 1
            parts.append(f"… {left} more tool call{'s' if left != 1 else ''} left out (the rendering stops at "
                         f"{MAX_RENDERED_CHARS:,} characters)")
            break
        parts.append(block)
        size += len(block) + 2
    return "\n\n".join(parts)


def text_with_tool_calls(text: str, calls: list[dict]) -> str:
    """What AI Eval's `contains`, `regex` and `llm_judge` see (reference 3.5): the response text, then the Markdown
    rendering of its tool calls after a blank line (the rendering alone when the text is empty). No calls: the text
    as it is."""
    rendered = render_tool_calls(calls)
    if not rendered:
        return text
    return f"{text}\n\n{rendered}" if text else rendered
