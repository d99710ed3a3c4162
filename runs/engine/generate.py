# Over 500 lines: a response's whole generation (variants, turns, the native tool loop, simulated users) in one loop.
"""Generation: model variants, system prompts, temperatures, and multi-turn conversations.

Pure Python (never imports Django). The run pipeline calls::

    variants = expand_variants(blueprint, models)      # models x temperatures x systems
    for prompt in blueprint.prompts:
        for variant in variants:
            response = await generate(prompt, variant, router.complete, trial=0)

**Variants** (reference 1.12). Each model is run at each temperature of
``temperatures`` (or the single ``temperature``) and with each entry of
``systems`` (or the single ``system``). A response is keyed by
``model[temp:T]``, plus ``[sp_idx:i]`` when there is more than one system
variant; T is printed as JavaScript prints numbers and is always present
(``[temp:0]`` when nothing is set), via ``model_ids.effective_id``.

**System prompt** (reference 5.2): a ``systems`` entry if the blueprint has
``systems``; else the prompt's own ``system`` if it sets one (``system: null``
means none); else the blueprint's ``system``. It is sent as the first
message; inline ``- system:`` messages are passed through too.

**Temperature** (reference 5.3, kept as the upstream has it): the first of
the ``temperatures`` value, the prompt's ``temperature``, the blueprint's
``temperature``, and 0. Since a missing ``temperatures`` list stands for
``[temperature]``, a prompt's own temperature only counts when the blueprint
sets neither ``temperature`` nor ``temperatures`` (the reference calls this a
quirk; DESIGN.md does not list changing it as a deviation). When it does
count, it also enters that prompt's response key: :meth:`ModelVariant.id_for`
gives the key for a given prompt, and ``GeneratedResponse.model_variant_id``
is always that key.

**Multi-turn** (reference 5.4, DESIGN deviation 14). Authored messages are
walked in order; each ``assistant: null`` is generated from the history so
far and appended; a conversation ending with a user (or system) message gets
one more, implicit, generated turn; one ending with an authored assistant
message generates nothing at the end. The text that is scored is every
generated turn joined by a blank line; if nothing was generated (deviation
14), it is the final authored assistant message. The whole conversation is
kept, generated turns marked. Tool calls (``TOOL_CALL {json}`` lines) are
parsed from the scored text, so they are exactly what the tool point
functions see.

**Native tool use** (docs/points.md "Native tool use"). When the blueprint
declares ``tools`` and ``toolUse.mode`` is ``native`` or ``auto``
(:func:`runs.engine.tools.setup_from`, on the variant), each generated turn is
a loop: the tool definitions go with every call; each call the model makes is
answered from the blueprint's mocks (``ToolSetup.answer``) and sent back; the
loop ends when the model answers in text. At most ``maxSteps`` model calls a
turn: a model still calling tools at the last is a failed response, with its
reason, as is a call to an undeclared tool, arguments that break the tool's
schema and a call no mock answers. The trajectory is the record: each
assistant turn keeps its calls, each ``tool`` turn its step (tool, arguments,
schema check, mock, result or error), and ``tool_calls`` lists every call in
order with its step, which is what the tool point functions read. Under
``auto``, a model without native tools (a text-completions or custom endpoint,
fixtures) is generated trace-only, and the response says so (``tool_note``).

**Simulated users** (docs/blueprints.md "Simulated users"). A prompt with ``simulated_user`` is a conversation:
after the opening (``first_message`` or authored turns) is answered, the stop rule is checked after each assistant
turn (a function point scored at least 0.8 on that turn, or the stop phrase in the user model's message) and the
conversation ends there, or after ``max_turns`` assistant turns. Otherwise the user model (``purpose="user"``)
writes the next user turn from its persona and goal, seeing the conversation with the roles swapped
(:func:`user_view`). A failed, empty or off-script answer (:func:`off_script`) fails the item with the reason. The
user turns are marked ``simulated``, the last turn carries why it stopped, and the user model's calls are counted
apart (``user_calls``, ``user_usage``, ``user_cost_usd``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable

from blueprints.spec.limits import Limits
from blueprints.spec.model_ids import effective_id
from blueprints.spec.schema import Blueprint, CustomModel, Prompt
from runs.engine.config import DEFAULT_CONFIG
from runs.engine.points.evaluate import evaluate_point
from runs.engine.points.tool_trace import parse_tool_trace
from runs.engine.tools import MAX_CALLS_PER_STEP, RECORDED, ToolSetup, setup_for_prompt, setup_from
from runs.engine.types import ChatRequest, CompleteFn, GeneratedResponse, Turn, Usage

DEFAULT_TEMPERATURE = 0.0


def resolve_temperature(
    list_value: float | None,
    prompt_temperature: float | None,
    global_temperature: float | None,
    default: float = DEFAULT_TEMPERATURE,
) -> float:
    """The temperature sent for one prompt x variant (reference 5.3): the first one set.

    ``list_value`` is the variant's entry of ``temperatures``, or the global
    ``temperature`` when there is no list (so it is ``None`` only when the
    blueprint sets neither).
    """
    for candidate in (list_value, prompt_temperature, global_temperature):
        if candidate is not None:
            return candidate
    return default


@dataclass(frozen=True, slots=True)
class ModelVariant:
    """One model at one temperature with one system variant, for a whole blueprint."""

    base_model_id: str
    temperature: float | None  # the `temperatures` entry or the global `temperature`; None: neither set
    system_prompt: str | None  # the `systems` entry, or the global `system`
    sp_idx: int | None  # position in `systems`; None without a list
    variant_id: str  # the key when the prompt does not change the temperature
    system_count: int = 1
    system_from_list: bool = False  # a `systems` entry: prompts cannot override it
    global_temperature: float | None = None
    no_cache: bool | None = None  # the blueprint's `noCache`
    default_temperature: float = DEFAULT_TEMPERATURE
    tools: ToolSetup | None = field(default=None, compare=False)  # native/auto tool use (None: trace-only)

    def temperature_for(self, prompt: Prompt) -> float:
        return resolve_temperature(self.temperature, prompt.temperature, self.global_temperature,
                                   self.default_temperature)

    def system_for(self, prompt: Prompt) -> str | None:
        if self.system_from_list:
            return self.system_prompt
        if prompt.system_set:
            return prompt.system
        return self.system_prompt

    def id_for(self, prompt: Prompt) -> str:
        return _variant_id(self.base_model_id, self.temperature_for(prompt), self.sp_idx, self.system_count)


def expand_variants(blueprint: Blueprint, models: Iterable[str | CustomModel] | None = None, *,
                    default_temperature: float = DEFAULT_TEMPERATURE) -> list[ModelVariant]:
    """Every model x temperature x system variant, in the reference's order, without duplicates.

    ``models`` are the resolved model ids (collections expanded) or custom
    model objects; ``None`` takes ``blueprint.models``. ``default_temperature``
    is the last resort of reference 5.3 (0, as upstream).
    """
    if models is None:
        models = blueprint.models
    model_ids = list(dict.fromkeys(m.id if isinstance(m, CustomModel) else m for m in models))
    temperatures = list(dict.fromkeys(blueprint.temperatures)) if blueprint.temperatures else [blueprint.temperature]
    from_list = bool(blueprint.systems)
    systems = list(blueprint.systems) if from_list else [blueprint.system]
    count = len(systems)
    tools = setup_from(blueprint.tools, blueprint.tool_use)
    variants: dict[str, ModelVariant] = {}
    for model_id in model_ids:
        for temperature in temperatures:
            for index, system in enumerate(systems):
                sp_idx = index if from_list else None
                resolved = resolve_temperature(temperature, None, blueprint.temperature, default_temperature)
                variant_id = _variant_id(model_id, resolved, sp_idx, count)
                variants.setdefault(variant_id, ModelVariant(
                    base_model_id=model_id, temperature=temperature, system_prompt=system, sp_idx=sp_idx,
                    variant_id=variant_id, system_count=count, system_from_list=from_list,
                    global_temperature=blueprint.temperature, no_cache=blueprint.no_cache,
                    default_temperature=default_temperature, tools=tools,
                ))
    return list(variants.values())


def _variant_id(model_id: str, temperature: float, sp_idx: int | None, count: int) -> str:
    return effective_id(model_id, temperature=temperature, system_index=sp_idx if count > 1 else None,
                        system_count=count)


def tools_for(prompt: Prompt, variant: ModelVariant) -> ToolSetup | None:
    """The tool setup of one prompt with this variant: the prompt's own tools and mocks (an imported AI Eval
    case's `tool_mocks`), else the blueprint's (None: trace-only)."""
    return setup_for_prompt(prompt.tools, prompt.tool_use, variant.tools)


def uses_cache(prompt: Prompt, variant: ModelVariant) -> bool:
    """``noCache``: the prompt's value, else the blueprint's (reference 5.7)."""
    no_cache = prompt.no_cache if prompt.no_cache is not None else variant.no_cache
    return not no_cache


async def generate(
    prompt: Prompt,
    variant: ModelVariant,
    complete: CompleteFn,
    *,
    max_tokens: int | None = None,
    use_cache: bool = True,
    trial: int = 0,
    limits: Limits | None = None,
) -> GeneratedResponse:
    """Generate one prompt's response with one model variant. Never raises for a failed call.

    ``use_cache`` False bypasses the cache for this call (a run without
    cache); the prompt's or blueprint's ``noCache`` bypasses it too.
    ``max_tokens`` None leaves each provider's default (reference 5.8). ``limits`` bound a tool loop's mock
    patterns (the operator's regex time limit; None: the defaults).
    """
    variant_id = variant.id_for(prompt)
    temperature = variant.temperature_for(prompt)
    system = variant.system_for(prompt)
    cache_ok = use_cache and uses_cache(prompt, variant)
    messages = prompt.messages
    ends_with_authored_assistant = bool(messages) and messages[-1].role == "assistant" and not messages[-1].to_generate
    needs_final_turn = not messages or messages[-1].role != "assistant"
    planned = sum(m.to_generate for m in messages) + (1 if needs_final_turn else 0)
    simulated = prompt.simulated_user
    if simulated is not None:
        planned = simulated.max_turns

    history: list[dict] = []
    conversation: list[Turn] = []
    if system:
        history.append({"role": "system", "content": system})
        conversation.append(Turn("system", system))
    generated: list[str] = []
    totals = _Totals()
    setup = tools_for(prompt, variant)
    if setup is not None and limits is not None:
        setup = replace(setup, limits=limits)
    loop = _Loop(setup)

    async def generate_turn() -> str | None:
        turn_index = loop.turns
        steps = 0
        while True:
            native = loop.native
            request = ChatRequest(
                model_id=variant.base_model_id, messages=tuple(history), temperature=temperature,
                max_tokens=max_tokens, purpose="candidate", use_cache=cache_ok and not native, prompt_id=prompt.id,
                turn=turn_index, trial=trial, tools=loop.setup.definitions() if native else (),
                label=f"turn {turn_index + 1}" + (f", step {steps + 1}" if native else ""),
            )
            result = await complete(request)
            if native and result.no_native_tools and loop.setup.mode == "auto":
                loop.fall_back(result.error or "")  # nothing was sent: ask again, trace-only
                continue
            totals.add(result)
            steps += 1
            if result.error is not None:
                totals.error, totals.retryable = result.error, result.retryable
                return None
            text = (result.text or "").strip() if native else result.text
            if native and result.tool_calls:
                calls = tuple({"id": _call_id(c.get("id"), turn_index, steps, i), "name": c.get("name"),
                               "arguments": c.get("arguments")} for i, c in enumerate(result.tool_calls))
                history.append({"role": "assistant", "content": text, "tool_calls": [dict(c) for c in calls]})
                conversation.append(Turn("assistant", text, generated=True, tool_calls=calls, tools="native"))
                if text:
                    generated.append(text)
                if loop.setup.record_only:  # AI Eval without mocks: one answer, its calls kept, none answered
                    for call in calls[:MAX_CALLS_PER_STEP]:
                        loop.record(call, turn_index, steps, None, RECORDED)
                    if not text:
                        generated.append("")  # the answer is its calls: scored as empty text, never as missing
                    loop.turns += 1
                    return text
                if len(calls) > MAX_CALLS_PER_STEP:
                    for call in calls[:MAX_CALLS_PER_STEP]:
                        loop.record(call, turn_index, steps, None, "too-many-calls")
                    totals.error, totals.retryable = (
                        f"the model made {len(calls):,} tool calls in one answer, more than the {MAX_CALLS_PER_STEP} "
                        "a step may make; none was answered"), False
                    return None
                if steps >= loop.setup.max_steps:
                    for call in calls:
                        loop.record(call, turn_index, steps, None)
                    names = ", ".join(dict.fromkeys(str(c["name"]) for c in calls))
                    totals.error, totals.retryable = (
                        f"the step limit was reached: toolUse.maxSteps allows {loop.setup.max_steps} model "
                        f"call{'s' if loop.setup.max_steps != 1 else ''} in a turn, and the last still called "
                        f"{names} instead of answering"), False
                    return None
                for call in calls:
                    answer = loop.setup.answer(call["name"], call["arguments"])
                    step = loop.record(call, turn_index, steps, answer)
                    history.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                                    "content": answer.content, "is_error": answer.is_error})
                    conversation.append(Turn("tool", answer.content, tool=step))
                    if answer.failed:
                        totals.error, totals.retryable = answer.reason, False
                        return None
                continue
            if not (text or "").strip():
                totals.error, totals.retryable = "the model returned an empty answer", False
                return None
            history.append({"role": "assistant", "content": text})
            conversation.append(Turn("assistant", text, generated=True, tools=loop.mode_label))
            generated.append(text)
            loop.turns += 1
            return text

    for position, message in enumerate(messages):
        if message.to_generate:
            if await generate_turn() is None:
                return _failed(prompt, variant_id, trial, conversation, messages[position:], totals,
                               loop.turns + 1, planned, system, temperature, loop)
        else:
            history.append({"role": message.role, "content": message.content})
            conversation.append(Turn(message.role, message.content))
    if needs_final_turn and await generate_turn() is None:
        return _failed(prompt, variant_id, trial, conversation, [], totals, loop.turns + 1, planned, system,
                       temperature, loop)

    user_totals = _Totals()
    stop_note = ""
    if simulated is not None:
        while True:
            stop_note = _stopped(simulated, generated[-1] if generated else "", loop.turns, limits)
            if stop_note:
                break
            reply = await complete(ChatRequest(
                model_id=simulated.model, messages=user_view(simulated, conversation), temperature=temperature,
                max_tokens=max_tokens, purpose="user", use_cache=cache_ok, prompt_id=prompt.id, turn=loop.turns,
                trial=trial, label=f"simulated user, turn {loop.turns + 1}",
            ))
            user_totals.add(reply)
            problem = reply.error or off_script(reply.text, generated[-1] if generated else "")
            if problem is not None:
                totals.error = f"the simulated user ({simulated.model}) failed: {problem}"
                totals.retryable = reply.retryable if reply.error else False
                return _failed(prompt, variant_id, trial, conversation, [Turn("user", None, simulated=True)], totals,
                               loop.turns + 1, planned, system, temperature, loop, user_totals)
            said = reply.text.strip()
            if simulated.stop_phrase is not None and said_phrase(simulated.stop_phrase, said):
                stop_note = (f"stopped: the simulated user said the stop phrase '{simulated.stop_phrase}' after "
                             f"assistant turn {loop.turns}")
                conversation.append(Turn("user", said, simulated=True, note=stop_note))
                break
            history.append({"role": "user", "content": said})
            conversation.append(Turn("user", said, simulated=True))
            if await generate_turn() is None:
                return _failed(prompt, variant_id, trial, conversation, [], totals, loop.turns + 1, planned, system,
                               temperature, loop, user_totals)
        if conversation[-1].note is None:
            last = conversation[-1]
            conversation[-1] = replace(last, note=stop_note)

    if generated:
        text = "\n\n".join(generated)
    elif ends_with_authored_assistant:
        text = messages[-1].content  # deviation 14: the authored answer is what gets scored
    else:
        text = None
    final_text = next((t.content for t in reversed(conversation) if t.role == "assistant" and t.content), None)
    if loop.native:
        calls, problems = tuple(loop.calls), ()  # the trajectory is the record; TOOL_CALL text is not a call
    else:
        trace = parse_tool_trace(text or "")
        calls, problems = tuple(trace.calls), tuple(trace.problems)
    return GeneratedResponse(
        prompt_id=prompt.id, model_variant_id=variant_id, conversation=tuple(conversation), text=text,
        final_text=final_text, tool_calls=calls, usage=totals.usage(),
        latency_ms=totals.latency_ms, cost_usd=totals.cost_usd(), cached=totals.all_cached(), trial=trial,
        system_prompt=system or None, temperature=temperature, tool_call_problems=problems,
        attempts=totals.attempts, tool_mode=loop.mode, tool_note=loop.note, stop_note=stop_note,
        **_user_spending(user_totals),
    )


SIMULATOR_INSTRUCTIONS = (
    "You are role-playing a person talking with an AI assistant, to test it. Stay in character. Write only your "
    "next message as that person: no role labels, no narration, and never write the assistant's part.")
MAX_USER_TURN_CHARS = 20_000
ROLE_LABELS = ("assistant:", "ai:", "user:", "system:", "[assistant]", "[user]")


def user_view(simulated, conversation) -> tuple[dict, ...]:
    """What the user model is sent: its persona, goal and stop phrase as the system prompt, then the conversation
    with the roles swapped (the candidate's turns are its "user" turns; system and tool turns are left out)."""
    parts = [SIMULATOR_INSTRUCTIONS]
    if simulated.persona:
        parts.append(f"Who you are: {simulated.persona}")
    parts.append(f"Your goal: {simulated.goal}")
    if simulated.stop_phrase:
        parts.append(f"When your goal has been met, say {simulated.stop_phrase} and nothing else.")
    messages = [{"role": "system", "content": "\n\n".join(parts)}]
    for turn in conversation:
        if turn.role in ("user", "assistant") and turn.content:
            messages.append({"role": "assistant" if turn.role == "user" else "user", "content": turn.content})
    return tuple(messages)


def off_script(text: str | None, last_answer: str) -> str | None:
    """Why a simulated user's answer cannot be used, or None. Off-script: empty; longer than
    ``MAX_USER_TURN_CHARS``; opening with a role label (it wrote the assistant's part, or a script); or the
    assistant's last answer repeated word for word (it answered as the assistant)."""
    said = (text or "").strip()
    if not said:
        return "it returned an empty answer"
    if len(said) > MAX_USER_TURN_CHARS:
        return f"off-script: its answer is {len(said):,} characters, more than the {MAX_USER_TURN_CHARS:,} a turn may have"
    if said.casefold().startswith(ROLE_LABELS):
        return f"off-script: its answer opens with a role label ({said.split()[0]!r}) instead of speaking as the user"
    if last_answer and said == last_answer.strip():
        return "off-script: it repeated the assistant's answer word for word instead of answering as the user"
    return None


def said_phrase(phrase: str, text: str) -> bool:
    """Whether ``text`` says the stop phrase: as written (case counts), not inside a longer word ("DONE" is not
    said by "DONE-ish" nor by "done")."""
    return re.search(r"(?<![\w-])" + re.escape(phrase) + r"(?![\w-])", text) is not None


def _stopped(simulated, last_answer: str, turns: int, limits: Limits | None) -> str:
    """Why the conversation stops after the assistant's turn ``turns``, or "": the stop point met by that turn
    (scored at least 0.8), else ``max_turns`` reached."""
    point = simulated.stop_point
    if point is not None:
        config = DEFAULT_CONFIG if limits is None else replace(DEFAULT_CONFIG, limits=limits)
        result = evaluate_point(point.fn, point.fn_args, last_answer, config=config)
        if result.score is not None and result.score >= 0.8:
            return f"stopped: the stop point was met by assistant turn {turns}"
    if turns >= simulated.max_turns:
        return f"stopped at max_turns: {simulated.max_turns} assistant turns without the stop rule being met"
    return ""


def _user_spending(user_totals) -> dict:
    if not user_totals.calls:
        return {}
    return {"user_calls": user_totals.calls, "user_usage": user_totals.usage(),
            "user_cost_usd": user_totals.cost_usd()}


def _failed(prompt, variant_id, trial, conversation, remaining, totals, turn_number, planned, system, temperature,
            loop=None, user_totals=None):
    """A response that could not be generated: the reason, and the conversation as far as it got."""
    error = totals.error
    if planned > 1:
        error = f"turn {turn_number} of {planned}: {error}"
    # The authored messages not reached are kept (unfilled turns as None) so a
    # reviewer sees where the conversation stopped.
    rest = tuple(m if isinstance(m, Turn) else Turn(m.role, m.content) for m in remaining)
    if not remaining:
        rest = (Turn("assistant", None),)
    return GeneratedResponse(
        prompt_id=prompt.id, model_variant_id=variant_id, conversation=(*conversation, *rest), text=None,
        final_text=None, error=error, retryable=totals.retryable, usage=totals.usage(),
        latency_ms=totals.latency_ms, cost_usd=totals.cost_usd(), cached=False, trial=trial,
        system_prompt=system or None, temperature=temperature, attempts=totals.attempts,
        tool_calls=tuple(loop.calls) if loop is not None and loop.native else (),
        tool_mode=loop.mode if loop is not None else None, tool_note=loop.note if loop is not None else "",
        **(_user_spending(user_totals) if user_totals is not None else {}),
    )


def _call_id(given, turn: int, step: int, index: int) -> str:
    """A call's id, unique in the response: the provider's, or ours (Gemini's calls may have none; ours keep the
    ``gemini-`` prefix, which formats.py does not send back)."""
    if isinstance(given, str) and given and not given.startswith(("gemini-", "call-")):
        return given
    prefix = "gemini" if isinstance(given, str) and given.startswith("gemini-") else "call"
    return f"{prefix}-{turn + 1}-{step}-{index}"


UNANSWERED = {"step-limit": "not answered: the step limit was reached",
              RECORDED: "recorded, not answered: the suite gives this case no tool mocks (AI Eval runs it as one "
                        "completion)",
              "too-many-calls": f"not answered: more than {MAX_CALLS_PER_STEP} calls in one answer"}


class _Loop:
    """A response's tool use: the mode (native until a model without native tools falls back), and every call
    of the trajectory in order, each with its step."""

    def __init__(self, setup: ToolSetup | None) -> None:
        self.setup = setup
        self.native = setup is not None
        self.note = ""
        self.calls: list[dict] = []
        self.turns = 0  # generated turns completed

    @property
    def mode(self) -> str | None:
        if self.setup is None:
            return None
        return "native" if self.native else "trace-only"

    @property
    def mode_label(self) -> str | None:
        if self.setup is None:
            return None
        return "native" if self.native else f"trace-only ({self.note})" if self.note else "trace-only"

    def fall_back(self, reason: str) -> None:
        self.native = False
        self.note = "toolUse.mode auto: " + (reason.split(";")[0] or "this model takes no native tools")

    def record(self, call: dict, turn: int, step: int, answer, unanswered: str = "step-limit") -> dict:
        """The step as stored (a tool turn's record, and the call in ``tool_calls``); ``answer`` None: a call
        left unanswered (the step limit, too many calls at once), and why."""
        entry = {"id": call["id"], "name": call["name"], "arguments": call["arguments"], "turn": turn + 1,
                 "step": step}
        if answer is None:
            entry.update(outcome=unanswered, check=None, reason=UNANSWERED[unanswered])
        else:
            entry.update(outcome=answer.outcome, check=answer.check, mock=answer.mock)
            if answer.outcome == "result":
                entry["result"] = answer.result
            else:
                entry["error"] = answer.error
            if answer.reason:
                entry["reason"] = answer.reason
        self.calls.append(entry)
        return entry


class _Totals:
    """Usage, cost and latency summed over a prompt's turns; unknown stays unknown."""

    def __init__(self) -> None:
        self.input: int | None = 0
        self.output: int | None = 0
        self.cost: float | None = 0.0
        self.latency_ms: float | None = None
        self.calls = 0
        self.cached_calls = 0
        self.attempts = 0
        self.error: str | None = None
        self.retryable = False

    def add(self, result) -> None:
        self.calls += 1
        self.cached_calls += bool(result.cached)
        self.attempts += result.attempts
        self.input = None if self.input is None or result.usage.input_tokens is None else \
            self.input + result.usage.input_tokens
        self.output = None if self.output is None or result.usage.output_tokens is None else \
            self.output + result.usage.output_tokens
        self.cost = None if self.cost is None or result.cost_usd is None else self.cost + result.cost_usd
        if result.latency_ms is not None:
            self.latency_ms = (self.latency_ms or 0.0) + result.latency_ms

    def usage(self) -> Usage:
        if not self.calls:
            return Usage()
        return Usage(self.input, self.output)

    def cost_usd(self) -> float | None:
        # Nothing called (an authored final answer) spent nothing.
        return 0.0 if not self.calls else self.cost

    def all_cached(self) -> bool:
        return self.calls > 0 and self.cached_calls == self.calls
