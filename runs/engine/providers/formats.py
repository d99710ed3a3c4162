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

A parse function raises :class:`BadAnswer` when the JSON is not the shape the
format promises, or is only a native tool call (evalsite sends no tools); the
router turns that into a reviewer-readable error. It raises nothing else, for
any JSON: fields of the wrong kind are ignored or are the reason
(tests/engine/test_provider_schemas.py checks every shape the providers'
published schemas define, and each field replaced by each wrong kind).
"""

from __future__ import annotations

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
            turns.append({"role": message["role"], "content": message.get("content") or ""})
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
                     max_tokens: int | None, max_tokens_key: str = "max_tokens") -> dict:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m["role"], "content": m.get("content") or ""} for m in messages],
    }
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body[max_tokens_key] = max_tokens
    return body


def openai_completions_body(model: str, messages: Iterable[dict], *, temperature: float | None,
                            max_tokens: int | None, prompt_format: str | None = None) -> dict:
    body: dict[str, Any] = {"model": model, "prompt": completions_prompt(messages, prompt_format)}
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def anthropic_body(model: str, messages: Iterable[dict], *, temperature: float | None, max_tokens: int) -> dict:
    system, turns = split_system(messages)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": turns}
    if system is not None:
        body["system"] = system
    if temperature is not None:
        body["temperature"] = temperature
    return body


def gemini_body(messages: Iterable[dict], *, temperature: float | None, max_tokens: int | None) -> dict:
    system, turns = split_system(messages)
    body: dict[str, Any] = {
        "contents": [
            {"role": "model" if t["role"] == "assistant" else "user", "parts": [{"text": t["content"]}]}
            for t in turns
        ]
    }
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


def gemini_model_path(model: str) -> str:
    """``gemini-2.5-flash`` -> ``models/gemini-2.5-flash`` (a name already prefixed stays)."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


# --------------------------------------------------------------------------
# Answers


def parse_answer(api_format: str, data: Any) -> Parsed:
    if not isinstance(data, dict):
        raise BadAnswer(f"expected a JSON object, got {type(data).__name__}")
    if api_format == "openai_chat":
        return parse_openai_chat(data)
    if api_format == "openai_completions":
        return parse_openai_completions(data)
    if api_format == "anthropic":
        return parse_anthropic(data)
    if api_format == "gemini":
        return parse_gemini(data)
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
                     "definitions (tool use is traced from TOOL_CALL lines in the text), so there is no answer "
                     "to score")


def parse_openai_chat(data: dict) -> Parsed:
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
    if not text:
        calls = [c for c in (message.get("tool_calls") or []) if isinstance(c, dict)] \
            if isinstance(message.get("tool_calls"), list) else []
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


def parse_anthropic(data: dict) -> Parsed:
    content = data.get("content")
    if not isinstance(content, list):
        message = error_message(data)
        raise BadAnswer(f"no content in the answer{': ' + message if message else ''}")
    # Thinking and tool-use blocks are not the answer; only text blocks are.
    text = _texts(content, skip=lambda block: block.get("type") != "text").strip()
    if not text:
        names = [b.get("name") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        if names:
            raise _tool_call_answer([n if isinstance(n, str) else "" for n in names])
    usage = _dict(data.get("usage"))
    # input_tokens counts the uncached input only; evalsite sends no cache_control, so cache reads and writes
    # (cache_read_input_tokens, cache_creation_input_tokens) are absent or 0 for its calls.
    return Parsed(text, Usage(_int_or_none(usage.get("input_tokens")), _int_or_none(usage.get("output_tokens"))),
                  _finish(data.get("stop_reason")))


def parse_gemini(data: dict) -> Parsed:
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
    if not text and isinstance(parts, list):
        names = [_dict(p.get("functionCall")).get("name") for p in parts
                 if isinstance(p, dict) and p.get("functionCall") is not None]
        if names:
            raise _tool_call_answer([n if isinstance(n, str) else "" for n in names])
    meta = _dict(data.get("usageMetadata"))
    output = _int_or_none(meta.get("candidatesTokenCount"))
    thoughts = _int_or_none(meta.get("thoughtsTokenCount"))
    if thoughts:
        output = (output or 0) + thoughts  # thinking tokens are billed as output
    return Parsed(text, Usage(_int_or_none(meta.get("promptTokenCount")), output),
                  _finish(candidate.get("finishReason")))


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
