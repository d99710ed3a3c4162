"""Shared value types of the engine: what a model call takes and gives, and what generation produces.

These are the contracts between providers (runs/engine/providers), generation
(runs/engine/generate.py), judging and scoring (runs/engine/judge.py,
runs/engine/scoring.py) and the Django side that stores results. Plain
dataclasses; never import Django here.

Expected failures (timeouts, 429s, bad answers) are values (`error` set), not
exceptions. Only bugs raise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Literal

# "user": a simulated user's model (runs/engine/generate.py), counted apart from the candidate's calls.
Purpose = Literal["candidate", "judge", "user"]

# The error of a first candidate call refused because the run was cancelled while the
# call waited for a free slot: the item never started, and goes back to pending.
NOT_STARTED_CANCELLED = "not started: the run was cancelled"
# The error of any later call (another turn, a judge, a retry) refused because the run was
# cancelled: no request leaves the process after a cancel. The item goes back to pending,
# keeping its generation when that was complete, so a resume judges it without asking again.
NOT_SENT_CANCELLED = "not sent: the run was cancelled"


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One call to a chat model.

    ``model_id`` is a ``provider:model`` string or the id of a custom model object
    from the blueprint. ``messages`` are ``{"role", "content"}`` dicts, with the
    system prompt (if any) as the first message.
    """

    model_id: str
    messages: tuple[dict, ...]
    temperature: float | None = None
    max_tokens: int | None = None
    purpose: Purpose = "candidate"
    use_cache: bool = True
    # Where the call comes from. The fixtures provider answers by prompt id and
    # generated-turn index; ``trial`` > 0 also enters the cache key, so that
    # repeated trials are separate calls rather than one cached answer.
    prompt_id: str | None = None
    turn: int = 0  # index of the generated turn within the prompt (0 for the first)
    trial: int = 0
    # A judge asked again about the same answer (a run's "judge repeats"): 0 for the first asking; > 0 also
    # enters the cache key, so that each re-asking is a call of its own rather than the first answer again.
    repeat: int = 0
    # Which answers the cache may keep and give back: a judge's only when they can be read
    # (an unreadable verdict is asked for again next time, never served from the cache).
    # Empty answers are never cached, whatever this says.
    cacheable: Callable[[str], bool] | None = field(default=None, compare=False)
    refresh: bool = False  # do not answer from the cache (a cell re-run on its own); the answer is still stored
    label: str = field(default="", compare=False)  # what the call is for, in the call log ("turn 1", a judge's point)
    # Native tool calling (runs/engine/tools.py): the tools offered, each ``{"name", "description", "parameters"}``
    # (parameters: a JSON Schema), sent in the provider's own shape (providers/formats.py). Messages may then
    # carry an assistant's ``tool_calls`` (``[{"id", "name", "arguments"}]``) and ``{"role": "tool",
    # "tool_call_id", "name", "content", "is_error"}`` results. Empty: no tools are sent.
    tools: tuple[dict, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatResult:
    text: str | None = None
    error: str | None = None  # the reason, in words a reviewer can act on; None on success
    retryable: bool = False  # whether trying again later could help (429, 5xx, timeout)
    usage: Usage = field(default_factory=Usage)
    latency_ms: float | None = None
    attempts: int = 1
    cached: bool = False
    cost_usd: float | None = None  # None: unknown price, never "free"; 0.0 for a cache hit (nothing spent)
    finish_reason: str | None = None  # as the provider said it ("stop", "length", "end_turn", ...)
    # The native tool calls of the answer, in order, each ``{"id", "name", "arguments"}`` (only when the request
    # sent tools; the text may then be empty).
    tool_calls: tuple[dict, ...] = ()
    # The request sent tools and this model has no native tool calling (a text-completions or custom endpoint,
    # fixtures): nothing was sent, and generation may fall back to trace-only (toolUse.mode auto).
    no_native_tools: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


# Anything that can answer a ChatRequest: the provider router, a test fake.
CompleteFn = Callable[[ChatRequest], Awaitable[ChatResult]]


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    content: str | None
    generated: bool = False  # produced by the candidate model during this run
    # A native tool loop's record (runs/engine/tools.py, docs/points.md "Native tool use"): an assistant turn's
    # tool calls (``{"id", "name", "arguments"}``), a ``tool`` turn's step (``{"id", "name", "arguments",
    # "step", "outcome", "check", "mock", "result"/"error", "reason"}``), and on a generated turn the tool mode it
    # used ("native", or "trace-only" with the reason).
    tool_calls: tuple[dict, ...] = ()
    tool: dict | None = None
    tools: str | None = None
    # A simulated user's turn (written by the prompt's user model), and on the last turn of a simulated
    # conversation why it stopped (docs/blueprints.md "Simulated users").
    simulated: bool = False
    note: str | None = None

    def to_dict(self) -> dict:
        """The stored shape (Response.conversation): the three keys, and the tool keys only when set."""
        out: dict = {"role": self.role, "content": self.content, "generated": self.generated}
        if self.tool_calls:
            out["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool is not None:
            out["tool"] = dict(self.tool)
        if self.tools:
            out["tools"] = self.tools
        if self.simulated:
            out["simulated"] = True
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Turn":
        calls = data.get("tool_calls")
        tool = data.get("tool")
        return cls(data.get("role") or "", data.get("content"), bool(data.get("generated", False)),
                   tuple(c for c in calls if isinstance(c, dict)) if isinstance(calls, list) else (),
                   tool if isinstance(tool, dict) else None,
                   data.get("tools") if isinstance(data.get("tools"), str) else None,
                   data.get("simulated") is True, data.get("note") if isinstance(data.get("note"), str) else None)


@dataclass(frozen=True, slots=True)
class GeneratedResponse:
    """What generation produced for one prompt x model variant (x trial)."""

    prompt_id: str
    model_variant_id: str  # model[temp:T] or model[temp:T][sp_idx:i]
    conversation: tuple[Turn, ...]  # system prompt, authored turns, generated turns (marked)
    text: str | None  # the subject of scoring: all generated turns joined by a blank line
    final_text: str | None  # the last assistant turn
    tool_calls: tuple[dict, ...] = ()  # parsed TOOL_CALL lines: {"name", "arguments"}
    error: str | None = None  # generation failed: nothing may be scored
    usage: Usage = field(default_factory=Usage)
    latency_ms: float | None = None
    cost_usd: float | None = None
    cached: bool = False
    trial: int = 0
    retryable: bool = False  # with error: whether generating again later could help
    system_prompt: str | None = None  # the system prompt used (reference 5.2), for modelSystemPrompts
    temperature: float | None = None  # the temperature sent (reference 5.3)
    tool_call_problems: tuple[str, ...] = ()  # malformed TOOL_CALL lines, one sentence each
    attempts: int = 0  # model calls made, retries included (0: nothing generated or all from cache)
    # How tools were used: None (the blueprint declares no native tool use), "native" (a tool loop: tool_calls
    # are the trajectory's calls, each with its step), or "trace-only" (TOOL_CALL lines in the text).
    tool_mode: str | None = None
    tool_note: str = ""  # why trace-only was used under toolUse.mode auto
    # A simulated user's calls (purpose "user"), counted apart: their tokens and cost are not in
    # ``usage`` and ``cost_usd`` above (the call log marks each one "user").
    user_calls: int = 0
    user_usage: Usage = field(default_factory=Usage)
    user_cost_usd: float | None = None
    stop_note: str = ""  # a simulated conversation: why it stopped (the stop rule, or max_turns)

    @property
    def spent_usage(self) -> Usage:
        """What the whole generation took, the simulated user's calls included (the run's bill): unknown stays
        unknown."""
        if not self.user_calls:
            return self.usage
        def add(a, b):
            return None if a is None or b is None else a + b
        return Usage(add(self.usage.input_tokens, self.user_usage.input_tokens),
                     add(self.usage.output_tokens, self.user_usage.output_tokens))

    @property
    def spent_cost_usd(self) -> float | None:
        """The generation's cost, the simulated user's calls included; None when either part is unknown."""
        if not self.user_calls:
            return self.cost_usd
        return None if self.cost_usd is None or self.user_cost_usd is None else self.cost_usd + self.user_cost_usd
