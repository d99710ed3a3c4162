"""Weval prompts, read into :class:`Prompt` values (see parse.py for the whole walk)."""

from __future__ import annotations

import json
import math


from .diagnostics import format_path
from .functions import is_number
from .extensions import PASS_FAIL_KEYS
from .ids import normalize_tags, prompt_hash_id
from .schema import (
    RENDER_AS_VALUES,
    Message,
    Origin,
    Prompt,
    construct,
)
from .notes import Notes, choice_hint, short, type_name
from .extensions import Extensions, read_simulated_user
from .header_reader import HeaderReader
from .point_reader import PointReader


PROMPT_KEYS = frozenset(
    {"id", "description", "prompt", "promptText", "messages", "ideal", "idealResponse", "system",
     "citation", "reference", "weight", "importance", "multiplier", "render_as", "temperature",
     "noCache", "requiredTools", "prohibitedTools", "maxCalls", "should", "points", "expect",
     "expects", "expectations", "should_not", "tags", "simulated_user"}
) | frozenset(PASS_FAIL_KEYS)
POINT_ALIASES = ("should", "points", "expect", "expects", "expectations")
SHORTHAND_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "ai": "assistant"}


class PromptReader:
    """One prompt: its messages (or prompt text), system, ideal, citation and points."""

    def __init__(self, notes: Notes, ext: Extensions, header: HeaderReader, points: PointReader):
        self.notes, self.ext, self.header, self.points = notes, ext, header, points
        self.error, self.warn = notes.error, notes.warn

    def read_prompt(self, raw, container, key, path) -> Prompt | None:
        if not isinstance(raw, dict):
            self.error(f"{format_path(path)} must be a mapping with `prompt` or `messages`, not {type_name(raw)}",
                       container, key, path, "write a prompt as `- prompt: ...` followed by `should:`", "prompt")
            return None
        self.notes.unknown_keys(raw, PROMPT_KEYS, path, "a prompt")
        diagnostics = self.notes.diagnostics
        noted_before = len(diagnostics)  # the readers only add to them: this prompt's are those after
        authored_id = None
        if "id" in raw and raw["id"] is not None:
            if isinstance(raw["id"], str) and raw["id"].strip():
                authored_id = raw["id"]
            elif is_number(raw["id"]):
                authored_id = str(raw["id"])
            else:
                self.error("a prompt `id` must be non-empty text", raw, "id", (*path, "id"), code="prompt-id")
        label = authored_id or format_path(path)
        line, column = self.notes.locator.where(raw) or self.notes.position(container, key)
        prompt = construct(
            Prompt,
            id=authored_id or "", id_was_generated=authored_id is None, messages=[], points=[],
            origin=construct(Origin, path=format_path(path), line=line, column=column), description=None,
            ideal_response=None, system=None, system_set=False, citation=None, weight=None,
            render_as=self.header.render_as or "markdown", temperature=None, no_cache=self.header.no_cache,
            required_tools=None, prohibited_tools=None, max_calls=None, tags=None, should_not=None,
            # Given, so that it is among the prompt's fields set (model_fields_set), as it always was.
            checks=[],
        )
        if "description" in raw:
            prompt.description = self.notes.expect_text(raw, "description", (*path, "description"))
        pass_fail = self.ext.read_pass_fail(raw, path, self.header.pass_fail)
        self.ext.start_prompt(pass_fail["verdicts"])
        if raw.get("simulated_user") is not None:
            simulated = read_simulated_user(self.notes, raw, path, label, self.points.read_point)
            prompt.simulated_user = simulated
            if simulated is not None and simulated.first_message is not None:
                prompt.messages = [construct(Message, role="user", content=simulated.first_message)]
            elif simulated is not None or any(raw.get(k) is not None for k in ("messages", "prompt", "promptText")):
                prompt.messages = self.read_messages(raw, path, label)
            if simulated is not None:
                self.check_simulated_opening(raw, path, label, prompt)
        else:
            prompt.messages = self.read_messages(raw, path, label)
        for ideal_key in ("ideal", "idealResponse"):
            if ideal_key in raw and raw[ideal_key] is not None:
                prompt.ideal_response = self.notes.expect_text(raw, ideal_key, (*path, ideal_key))
                break
        if "system" in raw:
            self.read_prompt_system(raw, path, label, prompt)
        for cite_key in ("citation", "reference"):
            if cite_key in raw and raw[cite_key] is not None:
                value = raw[cite_key]
                if isinstance(value, (str, dict)):
                    prompt.citation = value
                else:
                    self.error(f"`{cite_key}` must be text or a mapping with `title` and `url`", raw, cite_key,
                               (*path, cite_key), code="type")
                break
        for weight_key in ("weight", "importance", "multiplier"):
            if weight_key in raw and raw[weight_key] is not None:
                weight = raw[weight_key]
                if is_number(weight) and 0.1 <= weight <= 10:
                    prompt.weight = float(weight)
                else:
                    self.error(f"Prompt weight must be a number between 0.1 and 10. Found {short(weight)}. "
                               f"Prompt ID: '{label}'", raw, weight_key, (*path, weight_key),
                               "use 1 for normal importance, 2 for double", "weight")
                break
        if "render_as" in raw and raw["render_as"] is not None:
            if raw["render_as"] in RENDER_AS_VALUES:
                prompt.render_as = raw["render_as"]
            else:
                self.error(f"Invalid 'render_as' value on prompt '{label}'. Must be one of: markdown, html, "
                           "plaintext.", raw, "render_as", (*path, "render_as"),
                           choice_hint(raw["render_as"], RENDER_AS_VALUES), "enum")
        if "temperature" in raw and raw["temperature"] is not None:
            if is_number(raw["temperature"]) and math.isfinite(raw["temperature"]):
                prompt.temperature = float(raw["temperature"])
            else:
                self.error(f"`temperature` must be a number, not {type_name(raw['temperature'])}", raw,
                           "temperature", (*path, "temperature"), code="type")
        if "noCache" in raw and raw["noCache"] is not None:
            prompt.no_cache = self.notes.expect_bool(raw, "noCache", (*path, "noCache"))
        for tools_key, attr in (("requiredTools", "required_tools"), ("prohibitedTools", "prohibited_tools")):
            if tools_key in raw and raw[tools_key] is not None:
                value = raw[tools_key]
                if isinstance(value, list) and all(isinstance(t, str) for t in value):
                    setattr(prompt, attr, value)
                else:
                    self.error(f"`{tools_key}` must be a list of tool names", raw, tools_key, (*path, tools_key),
                               "write e.g. `[search, answer]`", "type")
        if "maxCalls" in raw and raw["maxCalls"] is not None:
            value = raw["maxCalls"]
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                prompt.max_calls = value
            else:
                self.error("`maxCalls` must be a whole number of at least 0", raw, "maxCalls", (*path, "maxCalls"),
                           code="type")
        if "tags" in raw and raw["tags"] is not None:
            if isinstance(raw["tags"], list) and all(isinstance(t, str) for t in raw["tags"]):
                prompt.tags = normalize_tags(raw["tags"])
            else:
                self.error("a prompt's `tags` must be a list of text", raw, "tags", (*path, "tags"), code="type")

        given = [k for k in POINT_ALIASES if raw.get(k)]
        if len(given) > 1:
            self.warn(f"`{given[0]}` and `{given[1]}` both given; only `{given[0]}` is used", raw, given[1],
                      (*path, given[1]), f"merge the points into `{given[0]}`", "alias-conflict", at_key=True)
        if given:
            prompt.points = self.points.read_block(raw, given[0], (*path, given[0]), label, inverted=False)
        if "should_not" in raw and raw["should_not"] is not None:
            prompt.should_not = self.points.read_block(raw, "should_not", (*path, "should_not"), label, inverted=True)
            if prompt.should_not:
                self.warn("`should_not` is deprecated upstream and easy to misread", raw, "should_not",
                          (*path, "should_not"),
                          "prefer negative functions in `should`, e.g. `$not_contains: ...`, or a judged point "
                          "phrased positively", "should-not", at_key=True)
        for key, value in pass_fail.items():
            setattr(prompt, key, value)
        prompt.checks = self.ext.checks
        self.ext.check_pass_at_k(prompt, label, raw, path, self.header.mapping)
        if not given and raw.get("should_not") is None and prompt.ideal_response is None:
            self.warn(f"prompt '{label}' has no points and no ideal response, so nothing will be scored", raw,
                      None, path, "add a `should:` list", "no-points")
        if any(d.is_error for d in diagnostics[noted_before:]):
            return prompt  # ids from broken prompts would be meaningless; keep the authored one
        if authored_id is None:
            prompt.id = prompt_hash_id(prompt.to_upstream(include_id=False, for_hash=True))
        return prompt

    def check_simulated_opening(self, raw, path, label, prompt) -> None:
        """Authored opening turns of a simulated conversation: no authored answer at the end (the candidate
        answers the opening), and no more ``assistant: null`` turns than ``max_turns`` allows."""
        messages, simulated = prompt.messages, prompt.simulated_user
        if not messages:
            return
        key = "messages" if raw.get("messages") is not None else None
        if messages[-1].role == "assistant" and not messages[-1].to_generate:
            self.error(f"prompt '{label}': a simulated conversation's opening cannot end with an authored assistant "
                       "answer", raw, key, (*path, "messages"), "end the opening with a user turn (or "
                       "`assistant: null`)", "simulated-user")
        generated = sum(m.to_generate for m in messages) + (messages[-1].role != "assistant")
        if generated > simulated.max_turns:
            self.error(f"prompt '{label}': the opening already asks for {generated} assistant turns, more than "
                       f"`simulated_user.max_turns` ({simulated.max_turns})", raw, key, (*path, "messages"),
                       f"raise `max_turns` to at least {generated}", "simulated-user")

    def read_prompt_system(self, raw, path, label, prompt):
        value = raw["system"]
        if isinstance(value, list):
            self.error(f"Invalid 'system' field in prompt '{label}': a prompt takes one system prompt, not a list.",
                       raw, "system", (*path, "system"),
                       "to compare several system prompts, list them under `systems:` in the header", "system")
        elif value is not None and not isinstance(value, str):
            self.error(f"Invalid 'system' field in prompt '{label}': Must be a string or null", raw, "system",
                       (*path, "system"), "quote the text", "system")
        else:
            prompt.system = value
            prompt.system_set = True
            if self.header.systems:
                self.error(f"When a top-level 'systems' array is defined for permutation, individual prompts "
                           f"(like '{label}') cannot have their own 'system' override.", raw, "system",
                           (*path, "system"), "remove this prompt's `system` or the header's `systems`", "system")

    def read_messages(self, raw, path, label) -> list[Message]:
        text_key = next((k for k in ("prompt", "promptText") if raw.get(k) is not None), None)
        has_messages = raw.get("messages") is not None
        if text_key and has_messages:
            self.error(f"Prompt ID '{label}' cannot have both 'promptText' and 'messages' defined. Please use "
                       "'messages' for multi-turn or 'promptText' for single-turn.", raw, text_key,
                       (*path, text_key), f"move the text into `messages` as a user turn, or remove `{text_key}`",
                       "messages", at_key=True)
            text_key = None  # `messages` wins, as upstream; keep reading it to report its problems too
        if text_key:
            if "prompt" in raw and "promptText" in raw:
                self.warn("`prompt` and `promptText` both given; only `prompt` is used", raw, "promptText",
                          (*path, "promptText"), code="alias-conflict", at_key=True)
            value = raw[text_key]
            if is_number(value):
                value = str(value)
            if not isinstance(value, str):
                self.error(f"`{text_key}` must be text, not {type_name(value)}", raw, text_key, (*path, text_key),
                           "for a conversation use `messages:`", "type")
                return []
            if not value.strip():
                self.error(f"Prompt ID '{label}', message 0 (role 'user'): Content cannot be empty.", raw,
                           text_key, (*path, text_key), code="empty")
                return []
            return [construct(Message, role="user", content=value)]
        if not has_messages:
            self.error(f"Prompt ID '{label}' must have either a valid 'promptText' or a non-empty 'messages' array.",
                       raw, None, path, "add `prompt: <the question>`", "messages")
            return []
        items = raw["messages"]
        mpath = (*path, "messages")
        if not isinstance(items, list) or not items:
            self.error(f"Prompt ID '{label}' must have either a valid 'promptText' or a non-empty 'messages' array.",
                       raw, "messages", mpath, "write each turn as `- user: ...` or `- assistant: ...`", "messages")
            return []
        messages: list[Message] = []
        positions: list[tuple] = []
        for index, item in enumerate(items):
            ipath = (*mpath, index)
            message = self.read_message(item, items, index, ipath, label)
            if message is not None:
                messages.append(message)
                positions.append((items, index, ipath))
        if len(messages) == len(items):
            for index, problem in check_conversation(label, messages):
                container, key, ipath = positions[index]
                if "messages in a row" in problem:
                    # Every provider we call accepts consecutive turns of one role, and a real blueprint in
                    # Weval's own repository has five user turns in a row: a warning, and the run goes on.
                    self.warn(problem.replace("Invalid sequence. ", "") + " They are sent as written, one after "
                              "the other (the upstream refuses this).", container, key, ipath,
                              _conversation_hint(problem), "conversation")
                    continue
                self.error(problem, container, key, ipath, _conversation_hint(problem), "conversation")
        return messages

    def read_message(self, item, container, index, path, label) -> Message | None:
        if not isinstance(item, dict):
            self.error(f"message {index} in prompt '{label}' must be a mapping like `user: ...`, not {type_name(item)}",
                       container, index, path, "write `- user: your text`", "message")
            return None
        if "role" in item or "content" in item:
            self.notes.unknown_keys(item, ("role", "content"), path, "a message")
            role, content, key = item.get("role"), item.get("content"), "content"
            if role == "ai":
                role = "assistant"
            if role not in ("user", "assistant", "system"):
                self.error(f"Prompt ID '{label}', message {index}: Invalid role '{role}'. Must be 'user', "
                           "'assistant', or 'system'.", item, "role" if "role" in item else None, (*path, "role"),
                           choice_hint(role, ("user", "assistant", "system")), "message")
                return None
            holder = item
        else:
            if len(item) != 1:
                self.error("Each message in the shorthand format must have exactly one key (user, assistant, "
                           f"system or ai). Found: {', '.join(map(str, item))}", container, index, path,
                           "put each turn in its own list item", "message")
                return None
            ((role_key, content),) = item.items()
            role = SHORTHAND_ROLES.get(role_key)
            if role is None:
                self.error(f"Invalid role '{role_key}' in message at index {index} in prompt '{label}'.", item,
                           role_key, (*path, role_key),
                           choice_hint(role_key, tuple(SHORTHAND_ROLES)), "message", at_key=True)
                return None
            holder, key = item, role_key
        if content is None:
            if role != "assistant":
                self.error(f"Prompt ID '{label}', message {index} (role '{role}'): Content cannot be empty.", holder,
                           key, (*path, key), "only an assistant turn may be null (to be generated)", "empty")
                return None
            return construct(Message, role=role, content=None)
        if is_number(content) or isinstance(content, bool):
            content = json.dumps(content)
        if not isinstance(content, str):
            self.error(f"message {index} in prompt '{label}': content must be text, not {type_name(content)}",
                       holder, key, (*path, key), "quote the text or use a block scalar (`|`)", "message")
            return None
        if not content.strip():
            self.error(f"Prompt ID '{label}', message {index} (role '{role}'): Content cannot be empty.", holder,
                       key, (*path, key), code="empty")
            return None
        return construct(Message, role=role, content=content)


def check_conversation(label: str, messages: list[Message]) -> list[tuple[int, str]]:
    """The upstream's run checks on a conversation, as (message index, problem) pairs.

    Deviation 14: a conversation may end with an authored assistant message; that
    message is the response that gets scored.
    """
    problems: list[tuple[int, str]] = []
    if not messages:
        return problems
    first = next((m for m in messages if m.role != "system"), None)
    if messages[0].role == "assistant" or (first is not None and first.role == "assistant"):
        index = messages.index(first) if first is not None else 0
        problems.append((index, f"Prompt ID '{label}': First message role cannot be 'assistant'. Must be 'user' or "
                                "'system'."))
    if all(m.role == "system" for m in messages):
        problems.append((len(messages) - 1, f"Prompt ID '{label}': the conversation has only system messages; add "
                                             "a user message"))
    previous = None
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if previous == message.role:
            problems.append((index, f"Prompt ID '{label}', message {index}: Invalid sequence. Two '{message.role}' "
                                    "messages in a row."))
        previous = message.role
    return problems


def _conversation_hint(problem: str) -> str | None:
    if "Two 'user' messages" in problem:
        return "join the two turns, or put `- assistant: null` between them to have the model answer"
    if "Two 'assistant' messages" in problem:
        return "join the two assistant turns, or add the user turn between them"
    if "First message role" in problem:
        return "start with a `user` (or `system`) turn"
    return None


