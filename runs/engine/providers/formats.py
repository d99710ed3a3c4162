"""The four API formats: our conversation -> the provider's JSON, and its answer -> text and usage.

Pure functions, no I/O, so each mapping is tested against golden samples
written from the providers' API references (tests/engine/golden/):

* ``openai_chat``: OpenAI chat completions, also spoken by Mistral, Together,
  xAI, OpenRouter and local servers (Ollama, llama.cpp, vLLM).
  ``messages`` keep the system prompt as a ``system`` message; the answer is
  ``choices[0].message.content``; usage is ``prompt_tokens``/``completion_tokens``.
* ``openai_completions``: the legacy text completions endpoint: one ``prompt``
  string, answer in ``choices[0].text``.
* ``anthropic``: Anthropic messages: ``system`` is a top-level field,
  ``max_tokens`` is required, the answer is the ``text`` blocks of
  ``content``, usage is ``input_tokens``/``output_tokens``.
* ``gemini``: Google ``generateContent``: ``contents`` of ``parts``, roles
  ``user`` and ``model``, ``systemInstruction``, ``generationConfig``
  (``temperature``, ``maxOutputTokens``), usage in ``usageMetadata``.

**Native tools** (runs/engine/tools.py): with ``tools`` given, each chat format
sends them in its own shape (OpenAI ``tools: [{type: function, function}]``,
Anthropic ``tools: [{name, description, input_schema}]``, Gemini
``tools: [{functionDeclarations}]``), and maps the loop's messages: an
assistant message's ``tool_calls`` (``{"id", "name", "arguments"}``) and
``{"role": "tool", "tool_call_id", "name", "content", "is_error"}`` results
(OpenAI ``tool_calls``/``role: tool``; Anthropic ``tool_use``/``tool_result``
blocks, results in a user message; Gemini ``functionCall``/``functionResponse``
parts). The answer's calls come back in :attr:`Parsed.tool_calls`.

A parse function raises :class:`BadAnswer` when the JSON is not the shape the
format promises, or is only a native tool call and no tools were sent; the
router turns that into a reviewer-readable error. It raises nothing else, for
any JSON: fields of the wrong kind are ignored or are the reason
(tests/engine/test_provider_schemas.py checks every shape the providers'
published schemas define, and each field replaced by each wrong kind).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from runs.engine.types import Usage

API_FORMATS = ("openai_chat", "openai_completions", "anthropic", "gemini")


class BadAnswer(Exception):
    """The provider answered 2xx with JSON we cannot read as an answer."""

    def __init__(self, reason: str, *, retryable: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Parsed:
    text: str
    usage: Usage
    finish_reason: str | None = None
    tool_calls: tuple[dict, ...] = ()  # with tools sent: {"id", "name", "arguments"} in order


# --------------------------------------------------------------------------
# Conversation helpers


def split_system(messages: Iterable[dict]) -> tuple[str | None, list[dict]]:
    """System messages joined by a blank line, and the user/assistant turns in order.

    Formats with one system slot (Anthropic, Gemini) receive every system
    message of the conversation there: inline ``- system:`` messages are
    passed through as the upstream does (reference 5.2), just not as turns.
    """
    systems: list[str] = []
    turns: list[dict] = []
    for message in messages:
        if message["role"] == "system":
            if message.get("content"):
                systems.append(message["content"])
        else:
            turn = {"role": message["role"], "content": message.get("content") or ""}
            for key in ("tool_calls", "tool_call_id", "name", "is_error"):
                if message.get(key) is not None:
                    turn[key] = message[key]
            turns.append(turn)
    return ("\n\n".join(systems) if systems else None), turns


def completions_prompt(messages: Iterable[dict], prompt_format: str | None) -> str:
    """One prompt string for a text-completions endpoint.

    ``conversational`` (the default) labels turns ``User:``/``Assistant:`` and
    ends with ``Assistant:`` so the model continues as the assistant; ``raw``
    joins the texts with blank lines, which suits a base model given one
    user message.
    """
    system, turns = split_system(messages)
    parts: list[str] = [system] if system else []
    if prompt_format == "raw":
        parts.extend(t["content"] for t in turns)
        return "\n\n".join(parts).strip()
    lines = [f"{'User' if t['role'] == 'user' else 'Assistant'}: {t['content']}" for t in turns]
    lines.append("Assistant:")
    head = (system + "\n\n") if system else ""
    return (head + "\n".join(lines)).strip()


# --------------------------------------------------------------------------
# Request bodies


def openai_chat_body(model: str, messages: Iterable[dict], *, temperature: float | None,
                     max_tokens: int | None, max_tokens_key: str = "max_tokens", tools: Iterable[dict] = ()) -> dict:
    body: dict[str, Any] = {"model": model, "messages": [_openai_message(m) for m in messages]}
    tools = list(tools)
    if tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description") or "", "parameters": t["parameters"]}}
            for t in tools]
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body[max_tokens_key] = max_tokens
    return body


def _openai_message(message: dict) -> dict:
    if message["role"] == "tool":
        return {"role": "tool", "tool_call_id": str(message.get("tool_call_id") or ""),
                "content": message.get("content") or ""}
    out = {"role": message["role"], "content": message.get("content") or ""}
    if message["role"] == "assistant" and message.get("tool_calls"):
        out["content"] = message.get("content") or None  # a call without text has no content
        out["tool_calls"] = [{"id": str(c.get("id") or ""), "type": "function", "function": {
            "name": c["name"], "arguments": json.dumps(c.get("arguments") if c.get("arguments") is not None else {},
                                                       ensure_ascii=False)}} for c in message["tool_calls"]]
    return out


def openai_completions_body(model: str, messages: Iterable[dict], *, temperature: float | None,
                            max_tokens: int | None, prompt_format: str | None = None) -> dict:
    body: dict[str, Any] = {"model": model, "prompt": completions_prompt(messages, prompt_format)}
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def anthropic_body(model: str, messages: Iterable[dict], *, temperature: float | None, max_tokens: int,
                   tools: Iterable[dict] = ()) -> dict:
    system, turns = split_system(messages)
    tools = list(tools)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                            "messages": anthropic_messages(turns) if tools else turns}
    if system is not None:
        body["system"] = system
    if temperature is not None:
        body["temperature"] = temperature
    if tools:
        body["tools"] = [{"name": t["name"], "description": t.get("description") or "",
                          "input_schema": t["parameters"]} for t in tools]
    return body


def anthropic_messages(turns: list[dict]) -> list[dict]:
    """A tool loop's turns as Anthropic messages: an assistant's calls as ``tool_use`` blocks after its text,
    each run of tool results as one user message of ``tool_result`` blocks (the API wants them together,
    right after the calls)."""
    out: list[dict] = []
    for turn in turns:
        if turn["role"] == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(turn.get("tool_call_id") or ""),
                                     "content": turn.get("content") or ""}
            if turn.get("is_error"):
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list) \
                    and all(b.get("type") == "tool_result" for b in out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif turn["role"] == "assistant" and turn.get("tool_calls"):
            blocks: list[dict] = [{"type": "text", "text": turn["content"]}] if turn.get("content") else []
            blocks += [{"type": "tool_use", "id": str(c.get("id") or ""), "name": c["name"],
                        "input": c.get("arguments") if isinstance(c.get("arguments"), dict) else {}}
                       for c in turn["tool_calls"]]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": turn["role"], "content": turn.get("content") or ""})
    return out


def gemini_body(messages: Iterable[dict], *, temperature: float | None, max_tokens: int | None,
                tools: Iterable[dict] = ()) -> dict:
    system, turns = split_system(messages)
    tools = list(tools)
    body: dict[str, Any] = {"contents": gemini_contents(turns) if tools else [
        {"role": "model" if t["role"] == "assistant" else "user", "parts": [{"text": t["content"]}]}
        for t in turns]}
    if tools:
        # parametersJsonSchema takes the JSON Schema as written (parameters takes only Gemini's OpenAPI subset).
        body["tools"] = [{"functionDeclarations": [
            {"name": t["name"], "description": t.get("description") or "", "parametersJsonSchema": t["parameters"]}
            for t in tools]}]
    if system is not None:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    config: dict[str, Any] = {}
    if temperature is not None:
        config["temperature"] = temperature
    if max_tokens is not None:
        config["maxOutputTokens"] = max_tokens
    if config:
        body["generationConfig"] = config
    return body


def gemini_contents(turns: list[dict]) -> list[dict]:
    """A tool loop's turns as Gemini contents: calls as ``functionCall`` parts of the model's content, each run
    of results as one user content of ``functionResponse`` parts (a response is an object: ``{"result": ...}``
    or ``{"error": ...}``)."""
    out: list[dict] = []
    for turn in turns:
        if turn["role"] == "tool":
            content = turn.get("content") or ""
            try:
                value = json.loads(content)
            except ValueError:
                value = content
            response = {"error": content} if turn.get("is_error") else {"result": value}
            call: dict[str, Any] = {"name": str(turn.get("name") or ""), "response": response}
            if turn.get("tool_call_id") and not str(turn["tool_call_id"]).startswith("gemini-"):
                call["id"] = str(turn["tool_call_id"])  # an id Gemini gave (ours, "gemini-N", are not sent)
            part = {"functionResponse": call}
            if out and out[-1]["role"] == "user" and all("functionResponse" in p for p in out[-1]["parts"]):
                out[-1]["parts"].append(part)
            else:
                out.append({"role": "user", "parts": [part]})
        elif turn["role"] == "assistant":
            parts: list[dict] = [{"text": turn["content"]}] if turn.get("content") or not turn.get("tool_calls") \
                else []
            for c in turn.get("tool_calls") or ():
                call = {"name": c["name"], "args": c.get("arguments") if isinstance(c.get("arguments"), dict) else {}}
                if c.get("id") and not str(c["id"]).startswith("gemini-"):
                    call["id"] = str(c["id"])
                parts.append({"functionCall": call})
            out.append({"role": "model", "parts": parts})
        else:
            out.append({"role": "user", "parts": [{"text": turn.get("content") or ""}]})
    return out


def gemini_model_path(model: str) -> str:
    """``gemini-2.5-flash`` -> ``models/gemini-2.5-flash`` (a name already prefixed stays)."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


# --------------------------------------------------------------------------
# Answers


def parse_answer(api_format: str, data: Any, *, tools_sent: bool = False) -> Parsed:
    """The answer's text, usage and finish reason; with ``tools_sent``, its native tool calls too (an answer
    that is only calls is then an answer, not a reason)."""
    if not isinstance(data, dict):
        raise BadAnswer(f"expected a JSON object, got {type(data).__name__}")
    if api_format == "openai_chat":
        return parse_openai_chat(data, tools_sent=tools_sent)
    if api_format == "openai_completions":
        return parse_openai_completions(data)
    if api_format == "anthropic":
        return parse_anthropic(data, tools_sent=tools_sent)
    if api_format == "gemini":
        return parse_gemini(data, tools_sent=tools_sent)
    raise ValueError(f"unknown API format {api_format!r}")


def _first_choice(data: dict) -> dict:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        # Some OpenAI-compatible routers answer 200 with an error object.
        message = error_message(data)
        raise BadAnswer(f"no choices in the answer{': ' + message if message else ''}")
    return choices[0]


def _openai_usage(data: dict) -> Usage:
    usage = _dict(data.get("usage"))
    return Usage(_int_or_none(usage.get("prompt_tokens")), _int_or_none(usage.get("completion_tokens")))


def _finish(value: Any) -> str | None:
    """A finish reason as text (providers send a string; anything else is not one)."""
    return value if isinstance(value, str) and value else None


def _texts(items: Any, *, skip: Callable[[dict], bool] = lambda item: False) -> str:
    """The ``text`` of each part or block that has one (and is not skipped), joined."""
    if not isinstance(items, list):
        return ""
    return "".join(item["text"] for item in items
                   if isinstance(item, dict) and isinstance(item.get("text"), str) and not skip(item))


def _tool_call_answer(names: list[str]) -> BadAnswer:
    called = ", ".join(dict.fromkeys(n or "(unnamed)" for n in names))
    return BadAnswer(f"the model called a tool ({called}) instead of answering in text; evalsite sends no tool "
                     "definitions for this blueprint (tool use is traced from TOOL_CALL lines in the text; declare "
                     "`tools` with `toolUse.mode: native` or `auto` to answer calls from mocks), so there is no "
                     "answer to score")


def _call(call_id: Any, name: Any, arguments: Any, index: int) -> dict:
    """One native call as the loop keeps it; arguments sent as JSON text are read (unreadable text stays text,
    and fails the tool's check)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            pass
    return {"id": call_id if isinstance(call_id, str) and call_id else f"call-{index}",
            "name": name if isinstance(name, str) else "", "arguments": arguments}


def parse_openai_chat(data: dict, *, tools_sent: bool = False) -> Parsed:
    choice = _first_choice(data)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise BadAnswer("the first choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # a few compatible servers return content parts
        content = _texts(content)
    if not content and isinstance(message.get("refusal"), str) and message["refusal"].strip():
        content = message["refusal"]  # a refusal is the model's answer, and is scored as one
    if content is not None and not isinstance(content, str):
        raise BadAnswer(f"message content is {type(content).__name__}, not text")
    text = (content or "").strip()
    calls = [c for c in (message.get("tool_calls") or []) if isinstance(c, dict)] \
        if isinstance(message.get("tool_calls"), list) else []
    if tools_sent and calls:
        found = tuple(_call(c.get("id"), _dict(c.get("function")).get("name"), _dict(c.get("function")).get("arguments"),
                            i) for i, c in enumerate(calls))
        return Parsed(text, _openai_usage(data), _finish(choice.get("finish_reason")), found)
    if not text:
        names = [_dict(c.get("function") or c.get("custom")).get("name") for c in calls]
        if isinstance(message.get("function_call"), dict):  # the deprecated single function call
            names.append(message["function_call"].get("name"))
        if names:
            raise _tool_call_answer([n if isinstance(n, str) else "" for n in names])
    return Parsed(text, _openai_usage(data), _finish(choice.get("finish_reason")))


def parse_openai_completions(data: dict) -> Parsed:
    choice = _first_choice(data)
    text = choice.get("text")
    if text is not None and not isinstance(text, str):
        raise BadAnswer(f"choice text is {type(text).__name__}, not text")
    return Parsed((text or "").strip(), _openai_usage(data), _finish(choice.get("finish_reason")))


def parse_anthropic(data: dict, *, tools_sent: bool = False) -> Parsed:
    content = data.get("content")
    if not isinstance(content, list):
        message = error_message(data)
        raise BadAnswer(f"no content in the answer{': ' + message if message else ''}")
    # Thinking and tool-use blocks are not the answer; only text blocks are.
    text = _texts(content, skip=lambda block: block.get("type") != "text").strip()
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    found: tuple[dict, ...] = ()
    if tools_sent and uses:
        found = tuple(_call(b.get("id"), b.get("name"), b.get("input"), i) for i, b in enumerate(uses))
    elif not text:
        names = [b.get("name") for b in uses]
        if names:
            raise _tool_call_answer([n if isinstance(n, str) else "" for n in names])
    usage = _dict(data.get("usage"))
    # input_tokens counts the uncached input only; evalsite sends no cache_control, so cache reads and writes
    # (cache_read_input_tokens, cache_creation_input_tokens) are absent or 0 for its calls.
    return Parsed(text, Usage(_int_or_none(usage.get("input_tokens")), _int_or_none(usage.get("output_tokens"))),
                  _finish(data.get("stop_reason")), found)


def parse_gemini(data: dict, *, tools_sent: bool = False) -> Parsed:
    candidates = data.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        feedback = _dict(data.get("promptFeedback"))
        if feedback.get("blockReason"):
            detail = feedback.get("blockReasonMessage")
            detail = f": {detail}" if isinstance(detail, str) and detail.strip() else ""
            raise BadAnswer(f"the prompt was blocked by the provider ({feedback['blockReason']}){detail}")
        message = error_message(data)
        raise BadAnswer(f"no candidates in the answer{': ' + message if message else ''}")
    candidate = _dict(candidates[0])
    parts = _dict(candidate.get("content")).get("parts")
    # Parts marked `thought` are the model's reasoning summary, not its answer.
    text = _texts(parts, skip=lambda part: bool(part.get("thought"))).strip()
    calls = [_dict(p.get("functionCall")) for p in parts
             if isinstance(p, dict) and p.get("functionCall") is not None] if isinstance(parts, list) else []
    found: tuple[dict, ...] = ()
    if tools_sent and calls:
        # Gemini's calls carry an id only in some versions; the loop answers by name and position.
        found = tuple(_call(c.get("id") or f"gemini-{i}", c.get("name"), c.get("args") if c.get("args") is not None
                            else {}, i) for i, c in enumerate(calls))
    elif not text and calls:
        names = [c.get("name") for c in calls]
        if names:
            raise _tool_call_answer([n if isinstance(n, str) else "" for n in names])
    meta = _dict(data.get("usageMetadata"))
    output = _int_or_none(meta.get("candidatesTokenCount"))
    thoughts = _int_or_none(meta.get("thoughtsTokenCount"))
    if thoughts:
        output = (output or 0) + thoughts  # thinking tokens are billed as output
    return Parsed(text, Usage(_int_or_none(meta.get("promptTokenCount")), output),
                  _finish(candidate.get("finishReason")), found)


def error_message(data: Any) -> str | None:
    """The provider's own words from an error body, in any of the formats' shapes.

    OpenAI and compatibles: ``{"error": {"message": ...}}``; Anthropic:
    ``{"type": "error", "error": {"type", "message"}}``; Gemini:
    ``{"error": {"code", "message", "status"}}``, sometimes inside a one-item
    list; some servers: ``{"error": "..."}`` or ``{"message": "..."}`` or
    ``{"detail": "..."}``.
    """
    if isinstance(data, list) and len(data) == 1:  # Gemini may wrap its error in a list
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message.strip():
            return message.strip()
    if isinstance(error, str) and error.strip():
        return error.strip()
    for key in ("message", "detail"):
        if isinstance(data.get(key), str) and data[key].strip():
            return data[key].strip()
    return None


def error_param(data: Any) -> str | None:
    """OpenAI names the offending request field in ``error.param``."""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        param = data["error"].get("param")
        return param if isinstance(param, str) else None
    return None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
