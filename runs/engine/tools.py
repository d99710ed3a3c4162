"""Native tool use: the blueprint's tools, their mocks, and the one answer each tool call gets.

Pure Python (never imports Django). No tool ever runs code or reaches the network:
every call is answered from the blueprint's mocks (docs/blueprints.md "Tools and
mocks"). A tool's mocks are tried in order; the first whose ``when`` matches the
call's arguments answers with its ``result`` (what the tool returned) or its
``error`` (a tool error the model sees as one); with none matching, the tool's
``default`` answers. The arguments are checked against the tool's JSON Schema
first.

Three things end a loop and fail the response (recorded with the reason, never a
pass, docs/points.md "Native tool use"): a call to a tool the blueprint does not
declare, arguments that break the tool's schema, and a call no mock matches (no
``default``). The step limit (``toolUse.maxSteps``: model calls in one turn's loop)
is the fourth, checked in generate.py.

The model's arguments are hostile: their size is bounded before anything reads
them, and a ``matches`` pattern or a schema ``pattern`` runs within the regex time
limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from blueprints.spec.jsregex import RegexError, RegexTimeout, search_js
from blueprints.spec.limits import DEFAULT_LIMITS, Limits

MODES = ("trace-only", "native", "auto")
DEFAULT_MAX_STEPS = 8  # model calls in one turn's loop when toolUse.maxSteps is not set
MAX_STEPS = 50  # the most toolUse.maxSteps may say (a blueprint cannot ask for an unbounded loop)
MAX_ARGUMENT_CHARS = 100_000  # a call's arguments as JSON; past this the call is refused, unread
MAX_RESULT_CHARS = 100_000  # what one mock answer sends back, as text
MAX_CALLS_PER_STEP = 32  # calls in one model answer (parallel calls); more fails the response, unanswered

# Step outcomes, as stored and shown.
RESULT, ERROR = "result", "error"  # a mock answered (a result, or a tool error it was written to give)
RECORDED = "recorded"  # record-only tool use (an imported AI Eval case without mocks): the call is kept, unanswered
UNKNOWN_TOOL, BAD_ARGUMENTS, NO_MOCK = "unknown-tool", "bad-arguments", "no-mock"  # failures: the loop stops
FAILURES = (UNKNOWN_TOOL, BAD_ARGUMENTS, NO_MOCK)


@dataclass(frozen=True)
class Mock:
    when: Mapping[str, Any] = field(default_factory=dict)  # argument name -> value, or {"matches": regex}
    result: Any = None
    error: str | None = None
    label: str = ""  # "mock 2", "default": which one answered, for the record
    subset: bool = False  # AI Eval's `match`: nested mappings match as subsets too (lists exactly)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    schema: Mapping[str, Any] | None = None
    mocks: tuple[Mock, ...] = ()
    default: Mock | None = None

    def definition(self) -> dict:
        """What the provider is sent: name, description, parameters (an object schema)."""
        schema = dict(self.schema) if isinstance(self.schema, Mapping) else {"type": "object", "properties": {}}
        return {"name": self.name, "description": self.description, "parameters": schema}


@dataclass(frozen=True)
class ToolAnswer:
    """What one tool call got: the outcome, the text the model is sent, and the record of the step."""

    outcome: str  # RESULT, ERROR, or one of FAILURES
    content: str  # what the model sees (a result as JSON text, or the error)
    is_error: bool
    result: Any = None
    error: str | None = None
    check: str | None = None  # the schema check: None when the arguments fit (or no schema), else the problem
    mock: str = ""
    reason: str = ""  # for a failure: why the response cannot be scored

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES


@dataclass(frozen=True)
class ToolSetup:
    """A blueprint's tools and how they are used, as generation reads them."""

    mode: str  # "native" or "auto" (trace-only blueprints get no setup)
    tools: tuple[Tool, ...]
    max_steps: int = DEFAULT_MAX_STEPS
    limits: Limits = DEFAULT_LIMITS
    # Record-only (``toolUse.recordOnly``, set by the AI Eval importer for a case without `tool_mocks`): the tools
    # are offered, the model's one answer is kept with its calls recorded, and nothing is answered (AI Eval runs
    # such a case as one completion, its calls "recorded but never executed").
    record_only: bool = False

    def definitions(self) -> tuple[dict, ...]:
        return tuple(tool.definition() for tool in self.tools)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def answer(self, name: Any, arguments: Any) -> ToolAnswer:
        """The answer to one call: from the first matching mock, else the default; or the failure."""
        tool = self.tool(name) if isinstance(name, str) else None
        if tool is None:
            declared = ", ".join(t.name for t in self.tools) or "none"
            message = f"there is no tool named {str(name)[:100]!r} (declared: {declared})"
            return ToolAnswer(UNKNOWN_TOOL, f"Error: {message}", True, error=message,
                              reason=f"the model called {str(name)[:100]!r}, a tool the blueprint does not declare")
        size = _json_size(arguments)
        if size is None or size > MAX_ARGUMENT_CHARS:
            problem = (f"the arguments are {size:,} characters of JSON, more than the limit of "
                       f"{MAX_ARGUMENT_CHARS:,}" if size is not None else "the arguments are not JSON")
            return ToolAnswer(BAD_ARGUMENTS, f"Error: {problem}", True, error=problem, check=problem,
                              reason=f"the model called {tool.name} with arguments that were refused: {problem}")
        check = schema_problem(tool.schema, arguments, self.limits)
        if check is not None:
            return ToolAnswer(BAD_ARGUMENTS, f"Error: the arguments do not match the tool's schema: {check}", True,
                              error=check, check=check,
                              reason=f"the model called {tool.name} with arguments that break its schema: {check}")
        for mock in tool.mocks:
            try:
                hit = matches(mock.when, arguments, self.limits, subset=mock.subset)
            except RegexTimeout as exc:
                return ToolAnswer(NO_MOCK, "Error: no mock answered this call", True, error=str(exc),
                                  reason=f"{tool.name}: {mock.label}'s pattern could not be matched: {exc}")
            if hit:
                return _mocked(mock)
        if tool.default is not None:
            return _mocked(tool.default)
        shown = _shown(arguments)
        if not tool.mocks:
            why = f"{tool.name} has no mocks and no default, so no call to it can be answered"
        else:
            why = f"no mock of {tool.name} matches the arguments {shown}, and it has no default"
        return ToolAnswer(NO_MOCK, "Error: this call could not be answered", True, error=why,
                          reason=f"{why} (add a `mocks` rule or a `default` to the tool)")


def _mocked(mock: Mock) -> ToolAnswer:
    if mock.error is not None:
        return ToolAnswer(ERROR, f"Error: {mock.error}", True, error=mock.error, mock=mock.label)
    content = mock.result if isinstance(mock.result, str) else json.dumps(mock.result, ensure_ascii=False)
    return ToolAnswer(RESULT, content[:MAX_RESULT_CHARS], False, result=mock.result, mock=mock.label)


def matches(when: Mapping[str, Any], arguments: Any, limits: Limits = DEFAULT_LIMITS, *, subset: bool = False) -> bool:
    """Whether every condition of ``when`` holds: an argument equal to the value (JSON equality, 1 == 1.0,
    never True == 1), or a string argument the ``{"matches": regex}`` (JavaScript syntax) finds. An empty
    ``when`` matches every call. ``subset`` (AI Eval's ``match``): a mapping value matches a mapping argument
    holding at least its keys, each matching the same way; lists still match exactly."""
    if not isinstance(arguments, Mapping):
        return not when
    for key, wanted in when.items():
        if key not in arguments:
            return False
        actual = arguments[key]
        if subset and isinstance(wanted, Mapping):  # AI Eval's `match` has no regex: a mapping is a sub-mapping
            if not isinstance(actual, Mapping) or not matches(wanted, actual, limits, subset=True):
                return False
        elif isinstance(wanted, Mapping) and set(wanted) == {"matches"}:
            if not isinstance(actual, str):
                return False
            try:
                if search_js(str(wanted["matches"]), actual, limits=limits) is None:
                    return False
            except RegexError:
                return False
        elif not _json_equal(actual, wanted):
            return False
    return True


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def schema_problem(schema: Any, arguments: Any, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The first way ``arguments`` break ``schema`` (JSON Schema 2020-12), in words with its place; None when
    they fit or there is no schema. ``pattern`` runs as a JavaScript regex within the time limit."""
    if not isinstance(schema, Mapping):
        return None
    validator = _validator_class(limits)(dict(schema))
    try:
        error = next(iter(sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))), None)
    except RegexTimeout as exc:
        return str(exc)
    except RecursionError:
        return "the arguments are nested too deeply to check"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message[:300]}"


_VALIDATORS: dict[float, Any] = {}


def _validator_class(limits: Limits):
    """Draft 2020-12 with ``pattern`` as a bounded JavaScript regex (a schema's pattern meets the model's text)."""
    cls = _VALIDATORS.get(limits.regex_timeout_s)
    if cls is None:
        from jsonschema import Draft202012Validator, ValidationError, validators

        def pattern(validator, patrn, instance, schema):
            if not validator.is_type(instance, "string"):
                return
            try:
                found = search_js(patrn, instance, limits=limits)
            except RegexError as exc:
                yield ValidationError(f"the schema's pattern {patrn!r} cannot be run: {exc}")
                return
            if found is None:
                yield ValidationError(f"{instance[:80]!r} does not match {patrn!r}")

        cls = _VALIDATORS[limits.regex_timeout_s] = validators.extend(Draft202012Validator, {"pattern": pattern})
    return cls


def _json_size(value: Any) -> int | None:
    try:
        return len(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return None


def _shown(arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def setup_from(tools: Any, tool_use: Any, *, limits: Limits = DEFAULT_LIMITS) -> ToolSetup | None:
    """The setup a blueprint's ``tools`` and ``toolUse`` ask for, or None (trace-only: nothing is sent).

    Native or auto tool use needs declared tools and ``toolUse.mode`` ``native`` or ``auto``;
    ``toolUse.enabled: false`` turns tool use off. The values are the reader's, already checked
    (blueprints/spec/header_reader.py)."""
    if not isinstance(tools, list) or not tools:
        return None
    use = tool_use if isinstance(tool_use, Mapping) else {}
    if use.get("enabled") is False:
        return None
    mode = use.get("mode")
    if mode not in ("native", "auto"):
        return None
    steps = use.get("maxSteps")
    max_steps = int(steps) if isinstance(steps, (int, float)) and not isinstance(steps, bool) and steps >= 1 \
        else DEFAULT_MAX_STEPS
    return ToolSetup(mode=mode, tools=tuple(_tool(t) for t in tools if isinstance(t, Mapping)),
                     max_steps=min(max_steps, MAX_STEPS), limits=limits, record_only=use.get("recordOnly") is True)


def setup_for_prompt(prompt_tools: Any, prompt_tool_use: Any, blueprint_setup: ToolSetup | None, *,
                     limits: Limits = DEFAULT_LIMITS) -> ToolSetup | None:
    """The setup one prompt's generation uses: the prompt's own ``tools``/``toolUse`` when it has them (an
    imported AI Eval case's `tool_mocks`), else the blueprint's (``blueprint_setup``, on the variant)."""
    if prompt_tools is None and prompt_tool_use is None:
        return blueprint_setup
    return setup_from(prompt_tools, prompt_tool_use, limits=limits)


def _tool(raw: Mapping[str, Any]) -> Tool:
    mocks = raw.get("mocks") if isinstance(raw.get("mocks"), list) else []
    default = raw.get("default", _MISSING)
    return Tool(
        name=str(raw.get("name")),
        description=raw.get("description") if isinstance(raw.get("description"), str) else "",
        schema=raw.get("schema") if isinstance(raw.get("schema"), Mapping) else None,
        mocks=tuple(_mock(m, f"mock {i}") for i, m in enumerate(mocks, start=1) if isinstance(m, Mapping)),
        default=None if default is _MISSING else _mock(default, "default", whole=True),
    )


_MISSING = object()


def _mock(raw: Any, label: str, *, whole: bool = False) -> Mock:
    """A mock rule, or a default: ``{result: ...}`` / ``{error: ...}``; a default that is neither is the
    result itself (``default: {"ok": true}``)."""
    if isinstance(raw, Mapping) and ("result" in raw or "error" in raw):
        when = raw.get("when") if isinstance(raw.get("when"), Mapping) else {}
        error = raw.get("error")
        return Mock(when=when, result=raw.get("result"), error=str(error) if error is not None else None,
                    label=label, subset=raw.get("subset") is True)
    return Mock(result=raw, label=label) if whole else Mock(label=label)
