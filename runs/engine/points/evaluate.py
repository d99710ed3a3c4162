"""evaluate_point: one point function, any spelling, on one response. Never raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from blueprints.spec import functions
from blueprints.spec.jsregex import RegexTimeout
from blueprints.spec.limits import Limits

from ..config import DEFAULT_CONFIG, EngineConfig

from . import call as call_module
from . import structured, tool_functions
from .codejudge import run_code_judge
from .js_sandbox import JsSandbox, shared_sandbox
from .metrics import METRIC_IMPLEMENTATIONS, ResponseMetrics
from .result import PointResult, not_evaluated, scored
from .text_functions import REGEX_FUNCTIONS, TEXT_FUNCTIONS
from .tool_trace import parse_tool_trace

Outcome = bool | float | PointResult


@dataclass
class _Call:
    """Everything one evaluation may need; tool calls are parsed only when asked for."""

    response: str
    args: object
    messages: list | None
    model_id: str | None
    prompt_id: str | None
    external_services: Mapping | None
    given_tool_calls: list | None
    call_transport: call_module.CallTransport | None
    sandbox: JsSandbox | None
    metrics: ResponseMetrics | None = None
    files: Mapping | None = None
    config: EngineConfig = DEFAULT_CONFIG
    malformed_tool_lines: tuple[str, ...] = ()

    @property
    def limits(self) -> Limits:
        return self.config.limits

    def tool_calls(self) -> list[dict]:
        if self.given_tool_calls is not None:
            return [call for call in self.given_tool_calls if isinstance(call, Mapping)]
        trace = parse_tool_trace(self.response)
        self.malformed_tool_lines = tuple(trace.problems)
        return trace.calls

    def js(self) -> JsSandbox:
        return self.sandbox or shared_sandbox(self.limits)


def _text(name: str) -> Callable[[_Call], Outcome]:
    function = TEXT_FUNCTIONS[name]
    if name in REGEX_FUNCTIONS:
        return lambda c: function(c.response, c.args, c.limits)
    return lambda c: function(c.response, c.args)


def _tools(function: Callable[[list[dict], object], Outcome]) -> Callable[[_Call], Outcome]:
    return lambda c: function(c.tool_calls(), c.args)


def _js(c: _Call) -> Outcome:
    if not isinstance(c.args, str):
        return not_evaluated("Argument for js must be a string expression.")
    return c.js().evaluate_script(c.args, c.response, c.messages, c.model_id)


def _call(c: _Call) -> Outcome:
    return call_module.call(
        c.response,
        c.args,
        model_id=c.model_id,
        prompt_id=c.prompt_id,
        messages=c.messages,
        external_services=c.external_services,
        transport=c.call_transport,
        hosts=c.config.call_hosts,
        blueprint_env=c.config.providers.blueprint_env,
        blueprint_env_names=c.config.providers.blueprint_env_names,
        own=c.config.providers.own_addresses,
    )


def _code_judge(c: _Call) -> Outcome:
    return run_code_judge(c.args, c.response, files=c.files, messages=c.messages, metrics=c.metrics,
                          allowed=c.config.code_judges, child_env=c.config.child_env)


def _metric(name: str) -> Callable[[_Call], Outcome]:
    function = METRIC_IMPLEMENTATIONS[name]
    return lambda c: function(c.metrics, c.args)


_IMPLEMENTATIONS: dict[str, Callable[[_Call], Outcome]] = {
    **{name: _text(name) for name in TEXT_FUNCTIONS},
    "js": _js,
    "call": _call,
    "factcheck": lambda c: call_module.factcheck(),
    "tool_called": _tools(tool_functions.tool_called),
    "tool_call_count_between": _tools(tool_functions.tool_call_count_between),
    "tool_call_order": _tools(tool_functions.tool_call_order),
    "tool_args_match": lambda c: tool_functions.tool_args_match(c.tool_calls(), c.args, c.js()),
    "required_tools": _tools(tool_functions.required_tools),
    "prohibited_tools": _tools(tool_functions.prohibited_tools),
    "max_calls": _tools(tool_functions.max_calls),
    "equals": lambda c: structured.equals(c.response, c.args),
    "json_matches_schema": lambda c: structured.json_matches_schema(c.response, c.args, c.limits),
    "field_accuracy": lambda c: structured.field_accuracy(c.response, c.args),
    "tool_trajectory": _tools(structured.tool_trajectory),
    "tool_calls_match": lambda c: structured.tool_calls_match(c.tool_calls(), c.args, c.limits),
    **{name: _metric(name) for name in METRIC_IMPLEMENTATIONS},
    "code_judge": _code_judge,
}


def _negated(inner: Callable[[_Call], Outcome]) -> Callable[[_Call], Outcome]:
    # As upstream: booleans flip, numbers become 1 - n, errors pass through unchanged.
    def negate(c: _Call) -> Outcome:
        outcome = inner(c)
        if isinstance(outcome, PointResult):
            if outcome.score is None:
                return outcome
            return PointResult(score=1.0 - outcome.score, explain=outcome.explain)
        if isinstance(outcome, bool):
            return not outcome
        return 1.0 - outcome

    return negate


for _name in functions.NAMES:
    if _name.startswith("not_"):
        _IMPLEMENTATIONS[_name] = _negated(_IMPLEMENTATIONS[_name[len("not_") :]])

assert set(_IMPLEMENTATIONS) == functions.NAMES, "every registered function needs an implementation"


def evaluate_point(
    fn: str,
    args: object,
    response: str,
    *,
    messages: list | None = None,
    model_id: str | None = None,
    tool_calls: list | None = None,
    prompt_id: str | None = None,
    external_services: Mapping | None = None,
    call_transport: call_module.CallTransport | None = None,
    js_sandbox: JsSandbox | None = None,
    metrics: ResponseMetrics | None = None,
    files: Mapping | None = None,
    config: EngineConfig = DEFAULT_CONFIG,
) -> PointResult:
    """Score `response` with the point function `fn` (any accepted spelling, a leading `$` allowed).

    `tool_calls` is the parsed trace as a list of `{name, arguments}`; None means
    parse it from the response. `call_transport` and `js_sandbox` replace the
    process-wide HTTP client and V8 context (tests, or a caller with its own).
    `metrics` is what generation recorded (latency, cost, tokens, model calls), for
    the metric checks; `files` are the suite's companion files, for `$code_judge`.
    `config` is what the operator configured (runs.engine.config): its limits bound the work
    (a regex match past `limits.regex_timeout_s` leaves the point not evaluated with the
    reason), its `$call` hosts and blueprint environment, whether script graders may run;
    production passes the settings' value (evalsite.engine.engine_config()).
    """
    written = fn[1:] if isinstance(fn, str) and fn.startswith("$") else fn
    name = functions.resolve(fn) if isinstance(fn, str) else None
    if name is None:
        return not_evaluated(f"Unknown point function: '{written}'")
    if response is None:
        response = ""
    elif not isinstance(response, str):
        response = str(response)
    context = _Call(
        response=response,
        args=args,
        messages=messages,
        model_id=model_id,
        prompt_id=prompt_id,
        external_services=external_services,
        given_tool_calls=tool_calls,
        call_transport=call_transport,
        sandbox=js_sandbox,
        metrics=metrics,
        files=files,
        config=config,
    )
    try:
        outcome = _IMPLEMENTATIONS[name](context)
    except RegexTimeout as error:  # a regex deep inside a structured check: the reason, never a score
        return not_evaluated(error.message)
    except Exception as error:  # a bug, or a case the upstream also fails on; never a crash of the run
        return not_evaluated(f"Error executing point function '{written}': {error}")
    result = outcome if isinstance(outcome, PointResult) else scored(outcome)
    if context.malformed_tool_lines and result.error is None:
        note = "Ignored malformed tool calls: " + " ".join(context.malformed_tool_lines)
        result = PointResult(
            score=result.score,
            explain=f"{result.explain} {note}" if result.explain else note,
        )
    return result
