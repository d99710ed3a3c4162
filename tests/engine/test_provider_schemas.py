"""Requests and answers as the providers define them (issue 25, part 1).

Every request body evalsite can send is validated against the provider's own
published definition, and every answer and error shape that definition allows
is read by formats.py into text, or into a clear reason, never an exception:

* OpenAI chat and text completions (and the compatibles: Mistral, Together,
  xAI, OpenRouter, custom ``inherit: openai`` endpoints): OpenAI's OpenAPI
  specification, a trimmed copy in tests/fixtures/openai-openapi/ (README
  there names the commit), validated with ``jsonschema``;
* Anthropic messages: the official SDK's ``MessageCreateParamsNonStreaming``
  (a TypedDict, validated with a pydantic ``TypeAdapter``) and ``Message``;
* Gemini: the official ``google-genai`` SDK's ``Content``,
  ``GenerationConfig`` and ``GenerateContentResponse`` models (camelCase, the
  wire names, and ``extra="forbid"``).

What evalsite sends: text messages only (system prompts, multi-turn,
temperatures, token limits, the OpenAI 400 adaptations, the custom models'
reasoning options and parameters). It sends no tool definitions (tool use is
traced from ``TOOL_CALL`` lines in the text) and no images, so neither is in
the request cases; native tool calls in an answer are in the answer cases.

The SDKs are test-only dependencies (``pip install -e .[dev]``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import typing
from pathlib import Path

import httpx
import pytest
from jsonschema import Draft202012Validator
from pydantic import TypeAdapter, ValidationError

from blueprints.spec.schema import CustomModel
from runs.engine.providers import Router, settings_from_env
from runs.engine.providers.endpoints import Quirks, build_request, resolve_endpoint
from runs.engine.providers.formats import BadAnswer, Parsed, error_message, parse_answer
from runs.engine.types import ChatRequest

anthropic_types = pytest.importorskip("anthropic.types", reason="the anthropic SDK is a dev dependency")
genai_types = pytest.importorskip("google.genai.types", reason="the google-genai SDK is a dev dependency")
genai_errors = pytest.importorskip("google.genai.errors")
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming  # noqa: E402

SPEC_PATH = Path(__file__).parents[1] / "fixtures" / "openai-openapi" / "chat-completions.json"
SPEC = json.loads(SPEC_PATH.read_text(encoding="utf-8"))

ENV = {
    "OPENAI_API_KEY": "sk-openai-schema-0001", "ANTHROPIC_API_KEY": "sk-ant-schema-0002",
    "GEMINI_API_KEY": "gm-schema-0003", "MISTRAL_API_KEY": "mi-schema-0004", "TOGETHER_API_KEY": "to-schema-0005",
    "XAI_API_KEY": "xai-schema-0006", "OPENROUTER_API_KEY": "or-schema-0007",
}
SETTINGS = settings_from_env(ENV)


# --------------------------------------------------------------------------
# OpenAI's spec as JSON Schema


def _to_json_schema(node):
    """OpenAPI 3.1 as JSON Schema 2020-12: the spec still writes ``nullable: true`` (3.0's spelling) in places,
    which JSON Schema does not know; it becomes ``"null"`` among the types (and ``None`` among an enum's values).
    ``discriminator`` is an annotation JSON Schema ignores anyway."""
    if isinstance(node, list):
        return [_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("nullable", "discriminator"):
            continue
        if key in ("properties", "patternProperties", "$defs"):  # maps of names to schemas: keep every name
            out[key] = {name: _to_json_schema(schema) for name, schema in value.items()}
        else:
            out[key] = _to_json_schema(value)
    if node.get("nullable") is True:
        if "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


COMPONENTS = _to_json_schema(SPEC["components"])
SCHEMAS = COMPONENTS["schemas"]


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": COMPONENTS})


OPENAI = {name: _validator(name) for name in (
    "CreateChatCompletionRequest", "CreateChatCompletionResponse", "CreateCompletionRequest",
    "CreateCompletionResponse", "ErrorResponse")}


def _property_names(schema: dict) -> set[str]:
    """Every property an object schema (through ``allOf`` and ``$ref``) defines."""
    if "$ref" in schema:
        return _property_names(SCHEMAS[schema["$ref"].rsplit("/", 1)[-1]])
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= _property_names(part)
    return names


_MESSAGE_SCHEMAS = {"system": "ChatCompletionRequestSystemMessage", "user": "ChatCompletionRequestUserMessage",
                    "assistant": "ChatCompletionRequestAssistantMessage",
                    "developer": "ChatCompletionRequestDeveloperMessage"}


def _openai_problems(name: str, body: dict) -> list[str]:
    """Where ``body`` breaks the spec; the spec leaves objects open, so unknown keys are looked for too."""
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
                for e in OPENAI[name].iter_errors(body)]
    unknown = set(body) - _property_names(SCHEMAS[name])
    problems += [f"{key}: not a field of {name}" for key in sorted(unknown)]
    for index, message in enumerate(body.get("messages") or []):
        schema = _MESSAGE_SCHEMAS.get(message.get("role"))
        if schema is None:
            problems.append(f"messages/{index}: role {message.get('role')!r} is not one the spec defines")
            continue
        problems += [f"messages/{index}/{key}: not a field of {schema}"
                     for key in sorted(set(message) - _property_names(SCHEMAS[schema]))]
    return problems


# --------------------------------------------------------------------------
# Anthropic's and Google's SDK types


_ANTHROPIC_PARAMS = TypeAdapter(MessageCreateParamsNonStreaming)


def _consume(value):
    """Pydantic validates an ``Iterable`` field lazily; walk everything so each item is checked."""
    if isinstance(value, dict):
        return {k: _consume(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if hasattr(value, "__iter__"):
        return [_consume(v) for v in value]
    return value


def _members(annotation) -> tuple:
    """A union's members (``MessageParam`` is one in recent SDKs; ``Annotated`` unwrapped), or the type itself."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return typing.get_args(annotation) or (annotation,)


def _typed_dict_keys(cls) -> set[str]:
    return set(typing.get_type_hints(cls))


# Sent by evalsite but no longer in the SDK's types: the SDK removed ``temperature`` (with top_p and top_k) from
# MessageCreateParams in 1.0 (2026-08-20) because the API deprecated it: models after Claude Opus 4.6 answer 400
# "`temperature` is deprecated for this model", older ones still take it (the SDK's migration guide sends it
# through ``extra_body``, unchanged on the wire). test_anthropic_temperature_is_the_one_field_outside_the_sdk_types
# pins this down; the other checks look at the rest of the body.
ANTHROPIC_WIRE_ONLY = {"temperature"}


def _anthropic_problems(body: dict, *, wire_only: set[str] = ANTHROPIC_WIRE_ONLY) -> list[str]:
    body = {k: v for k, v in body.items() if k not in wire_only}
    try:
        _consume(_ANTHROPIC_PARAMS.validate_python(body))
    except ValidationError as exc:
        return [f"{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    # The TypedDicts ignore unknown keys; the API rejects them ("Extra inputs are not permitted").
    problems = [f"{key}: not a field of MessageCreateParams"
                for key in sorted(set(body) - _typed_dict_keys(MessageCreateParamsNonStreaming))]
    message_keys = set().union(*(_typed_dict_keys(member) for member in _members(anthropic_types.MessageParam)))
    for index, message in enumerate(body["messages"]):
        problems += [f"messages/{index}/{key}: not a field of MessageParam"
                     for key in sorted(set(message) - message_keys)]
    if "thinking" in body:
        thinking = anthropic_types.ThinkingConfigEnabledParam
        problems += [f"thinking/{key}: not a field of ThinkingConfigEnabledParam"
                     for key in sorted(set(body["thinking"]) - _typed_dict_keys(thinking))]
    return problems


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# The REST body's top level: contents, generationConfig, and the GenerateContentConfig fields that are not
# generation settings (systemInstruction, tools, toolConfig, safetySettings, cachedContent, labels).
_GEMINI_TOP = {"contents", "generationConfig"} | {
    _camel(f) for f in ("system_instruction", "tools", "tool_config", "safety_settings", "cached_content", "labels")
    if f in genai_types.GenerateContentConfig.model_fields}


def _gemini_problems(body: dict) -> list[str]:
    problems = [f"{key}: not a field of the generateContent request" for key in sorted(set(body) - _GEMINI_TOP)]
    checks = [(f"contents/{i}", genai_types.Content, c) for i, c in enumerate(body.get("contents") or [])]
    if not body.get("contents"):
        problems.append("contents: at least one content is required")
    if "systemInstruction" in body:
        checks.append(("systemInstruction", genai_types.Content, body["systemInstruction"]))
    if "generationConfig" in body:
        checks.append(("generationConfig", genai_types.GenerationConfig, body["generationConfig"]))
    for where, model, value in checks:
        try:
            model.model_validate(value)
        except ValidationError as exc:
            problems += [f"{where}/{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    for i, content in enumerate(body.get("contents") or []):
        if content.get("role") not in ("user", "model"):
            problems.append(f"contents/{i}/role: {content.get('role')!r} is not user or model")
    return problems


# --------------------------------------------------------------------------
# The bodies we send


SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer in one sentence."}
CONVERSATIONS = {
    "one user turn": [{"role": "user", "content": "What is the capital of France?"}],
    "system prompt": [SYSTEM, {"role": "user", "content": "What is the capital of France?"}],
    "inline system messages": [SYSTEM, {"role": "user", "content": "Name a prime."},
                               {"role": "system", "content": "Now answer in French."},
                               {"role": "user", "content": "Name another."}],
    "multi-turn": [SYSTEM, {"role": "user", "content": "I moved states this year."},
                   {"role": "assistant", "content": "What changed for you this year?"},
                   {"role": "user", "content": "My job. Which returns do I file?"}],
    "tool use described in text": [
        {"role": "system", "content": 'Tools: get_weather(city). Call one by writing TOOL_CALL {"name": ..., '
                                      '"arguments": {...}} on its own line.'},
        {"role": "user", "content": "Weather in Oslo? ünïcödé, \"quotes\", <tags> & emoji 🌧"}],
}
TEMPERATURES = (None, 0, 0.7, 1)
MAX_TOKENS = (None, 1, 4096)  # None: the provider's default (1500, none for OpenRouter)
OPENAI_LIKE = ("openai", "mistral", "together", "xai", "openrouter")


def _bodies(model_id: str, quirks: Quirks = Quirks(), custom: CustomModel | None = None):
    endpoint = resolve_endpoint(model_id, SETTINGS, {custom.id: custom} if custom else {})
    assert not hasattr(endpoint, "message"), endpoint
    for name, messages in CONVERSATIONS.items():
        for temperature in TEMPERATURES:
            for max_tokens in MAX_TOKENS:
                _, _, body = build_request(endpoint, messages, temperature=temperature, max_tokens=max_tokens,
                                           quirks=quirks)
                yield f"{name}, temperature {temperature}, max_tokens {max_tokens}", body


def _all_fine(problems_of, bodies) -> None:
    found = {case: problems for case, body in bodies if (problems := problems_of(body))}
    assert not found, json.dumps(found, indent=1, ensure_ascii=False)


@pytest.mark.parametrize("provider", OPENAI_LIKE)
def test_every_chat_completions_body_we_send_is_a_valid_create_chat_completion_request(provider):
    _all_fine(lambda body: _openai_problems("CreateChatCompletionRequest", body),
              _bodies(f"{provider}:some-model"))


@pytest.mark.parametrize("quirks", [Quirks(max_tokens_key="max_completion_tokens"), Quirks(omit_temperature=True),
                                    Quirks("max_completion_tokens", True)], ids=["max_completion_tokens",
                                                                                 "no temperature", "both"])
def test_the_openai_bodies_after_a_400_adaptation_are_valid_too(quirks):
    bodies = list(_bodies("openai:o3-mini", quirks))
    _all_fine(lambda body: _openai_problems("CreateChatCompletionRequest", body), bodies)
    for _, body in bodies:
        if quirks.max_tokens_key != "max_tokens":
            assert "max_tokens" not in body and "max_completion_tokens" in body
        if quirks.omit_temperature:
            assert "temperature" not in body


def test_temperatures_up_to_two_are_valid_for_openai_and_gemini():
    for model_id, problems_of in (("openai:gpt-4o", lambda b: _openai_problems("CreateChatCompletionRequest", b)),
                                  ("google:gemini-2.5-flash", _gemini_problems)):
        endpoint = resolve_endpoint(model_id, SETTINGS, {})
        _, _, body = build_request(endpoint, CONVERSATIONS["system prompt"], temperature=2, max_tokens=None)
        assert problems_of(body) == []


def test_the_spec_check_itself_catches_what_openai_would_refuse():
    # Guards the guard: a wrong body must fail the validation above.
    assert _openai_problems("CreateChatCompletionRequest", {"model": "m", "messages": []})
    assert _openai_problems("CreateChatCompletionRequest", {"model": "m", "messages": [
        {"role": "user", "content": "x"}], "temperature": 2.5})
    assert _openai_problems("CreateChatCompletionRequest", {"model": "m", "messages": [
        {"role": "user", "content": "x"}], "max_token": 5})
    assert _openai_problems("CreateChatCompletionRequest", {"model": "m", "messages": [
        {"role": "human", "content": "x"}]})
    assert _anthropic_problems({"model": "m", "messages": [{"role": "user", "content": "x"}]})  # no max_tokens
    assert _anthropic_problems({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})
    assert _anthropic_problems({"model": "m", "max_tokens": 5, "messages": [], "temperature_": 1})
    assert _gemini_problems({"contents": [{"role": "user", "parts": [{"txt": "x"}]}]})
    assert _gemini_problems({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
                             "generationConfig": {"max_tokens": 5}})
    assert _gemini_problems({"contents": [{"role": "user", "parts": [{"text": "x"}]}], "model": "x"})


def test_every_anthropic_body_we_send_is_valid_message_create_params():
    _all_fine(_anthropic_problems, _bodies("anthropic:claude-sonnet-4-20250514"))


def test_anthropic_temperature_is_the_one_field_outside_the_sdk_types():
    """The one field outside the SDK's types (see ANTHROPIC_WIRE_ONLY): a temperature is sent to Anthropic as
    the blueprint sets it; a model that answers it is deprecated is asked again without one (the router's
    adaptation, tests/engine/test_providers_router.py)."""
    assert "temperature" not in _typed_dict_keys(MessageCreateParamsNonStreaming)
    endpoint = resolve_endpoint("anthropic:claude-sonnet-4-5", SETTINGS, {})
    for temperature in (0, 0.7, 1):
        _, _, body = build_request(endpoint, CONVERSATIONS["system prompt"], temperature=temperature, max_tokens=None)
        assert _anthropic_problems(body, wire_only=set()) == [
            "temperature: not a field of MessageCreateParams"]
    _, _, body = build_request(endpoint, CONVERSATIONS["system prompt"], temperature=None, max_tokens=None)
    assert "temperature" not in body and _anthropic_problems(body, wire_only=set()) == []


def test_every_gemini_body_we_send_is_a_valid_generate_content_request():
    _all_fine(_gemini_problems, _bodies("google:gemini-2.5-flash"))


CUSTOM = [
    ({"id": "local:llama", "url": "http://localhost:11434/v1/chat/completions", "modelName": "llama3",
      "inherit": "openai"}, "CreateChatCompletionRequest"),
    ({"id": "local:reasoner", "url": "http://localhost:8000/v1/chat/completions", "modelName": "r1",
      "inherit": "openai", "reasoningEffort": "high", "parameters": {"stream": None, "top_p": 0.9}},
     "CreateChatCompletionRequest"),
    ({"id": "local:mapped", "url": "http://localhost:8000/v1/chat/completions", "modelName": "m",
      "inherit": "mistral", "parameterMapping": {"maxTokens": "max_completion_tokens"}}, "CreateChatCompletionRequest"),
    ({"id": "local:base", "url": "http://localhost:8000/v1/completions", "modelName": "base", "inherit": "openai",
      "format": "completions", "promptFormat": "raw"}, "CreateCompletionRequest"),
    ({"id": "local:base-chatty", "url": "http://localhost:8000/v1/completions", "modelName": "base",
      "inherit": "openai", "format": "completions"}, "CreateCompletionRequest"),
    ({"id": "proxy:claude", "url": "http://localhost:9000/v1/messages", "modelName": "claude-sonnet-4-20250514",
      "inherit": "anthropic", "thinkingBudget": 2048}, "anthropic"),
    ({"id": "proxy:claude-effort", "url": "http://localhost:9000/v1/messages", "modelName": "claude-sonnet-4-5",
      "inherit": "anthropic", "reasoningEffort": "low"}, "anthropic"),
    ({"id": "proxy:gemini", "url": "http://localhost:9000/v1beta/models/gemini-2.5-pro:generateContent",
      "modelName": "gemini-2.5-pro", "inherit": "google", "thinkingBudget": 1024}, "gemini"),
]


@pytest.mark.parametrize("definition,schema", CUSTOM, ids=[c[0]["id"] for c in CUSTOM])
def test_every_custom_model_body_is_valid_for_the_format_it_inherits(definition, schema):
    options = {k: definition[k] for k in ("reasoningEffort", "thinkingBudget") if k in definition}
    model = CustomModel.model_validate({**{k: v for k, v in definition.items() if k not in options},
                                        "extra": options})
    problems_of = {"anthropic": _anthropic_problems, "gemini": _gemini_problems}.get(
        schema, lambda body: _openai_problems(schema, body))
    _all_fine(problems_of, _bodies(model.id, custom=model))


# --------------------------------------------------------------------------
# Answers and errors


def _read(api_format: str, data) -> Parsed | str:
    """What formats.py makes of an answer: a Parsed, or the reason it gives. Anything else is a bug."""
    try:
        parsed = parse_answer(api_format, data)
    except BadAnswer as exc:
        assert isinstance(exc.reason, str) and exc.reason.strip()
        return exc.reason
    assert isinstance(parsed.text, str) and parsed.text == parsed.text.strip()
    assert parsed.finish_reason is None or isinstance(parsed.finish_reason, str)
    for count in (parsed.usage.input_tokens, parsed.usage.output_tokens):
        assert count is None or (isinstance(count, int) and count >= 0)
    return parsed


def _openai_chat(message: dict, finish_reason: str = "stop", usage: dict | None = None, **choice) -> dict:
    message = {"role": "assistant", "content": None, "refusal": None, **message}
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason, **choice}]}
    if usage is not False:
        body["usage"] = usage or {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
    return body


TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}
OPENAI_ANSWERS = {
    "stop": (_openai_chat({"content": " Paris. "}), "Paris."),
    "length, cut off": (_openai_chat({"content": "The capital of Fr"}, "length"), "The capital of Fr"),
    "length, all reasoning": (_openai_chat({"content": ""}, "length", {
        "prompt_tokens": 12, "completion_tokens": 1500, "total_tokens": 1512,
        "completion_tokens_details": {"reasoning_tokens": 1500, "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0, "audio_tokens": 0}}), ""),
    "content_filter, nothing": (_openai_chat({"content": None}, "content_filter"), ""),
    "content_filter, partial": (_openai_chat({"content": "Here is how"}, "content_filter"), "Here is how"),
    "refusal": (_openai_chat({"refusal": "I can't help with that."}), "I can't help with that."),
    "refusal beside empty content": (_openai_chat({"content": "", "refusal": "I can't."}), "I can't."),
    "tool_calls": (_openai_chat({"tool_calls": [TOOL_CALL]}, "tool_calls"), "called a tool (get_weather)"),
    "custom tool call": (_openai_chat({"tool_calls": [{"id": "c", "type": "custom", "custom": {
        "name": "grep", "input": "x"}}]}, "tool_calls"), "called a tool (grep)"),
    "tool_calls with text": (_openai_chat({"content": "Let me check.", "tool_calls": [TOOL_CALL]}, "tool_calls"),
                             "Let me check."),
    "function_call (deprecated)": (_openai_chat({"function_call": {"name": "lookup", "arguments": "{}"}},
                                                "function_call"), "called a tool (lookup)"),
    "annotations and logprobs": (_openai_chat({"content": "See the source.", "annotations": [
        {"type": "url_citation", "url_citation": {"start_index": 0, "end_index": 3, "url": "https://x.example",
                                                  "title": "X"}}]}, logprobs={"content": [], "refusal": None}),
        "See the source."),
    "usage with details": (_openai_chat({"content": "ok"}, usage={
        "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 200, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0}}), "ok"),
    "no usage": (_openai_chat({"content": "ok"}, usage=False), "ok"),
}


@pytest.mark.parametrize("name", OPENAI_ANSWERS)
def test_each_chat_completion_the_spec_defines_reads_as_text_or_a_reason(name):
    sample, expected = OPENAI_ANSWERS[name]
    assert not list(OPENAI["CreateChatCompletionResponse"].iter_errors(sample)), "the sample itself is off-spec"
    result = _read("openai_chat", sample)
    if isinstance(result, str):
        assert expected and expected in result, result
        assert "evalsite sends no tool definitions" in result
    else:
        assert result.text == expected
        assert result.finish_reason == sample["choices"][0]["finish_reason"]
    if name == "usage with details":
        assert (result.usage.input_tokens, result.usage.output_tokens) == (2006, 300)
    if name == "no usage":
        assert (result.usage.input_tokens, result.usage.output_tokens) == (None, None)


def test_every_finish_reason_in_the_spec_is_read():
    finish = SCHEMAS["CreateChatCompletionResponse"]["properties"]["choices"]["items"]["properties"]["finish_reason"]
    assert {"stop", "length", "tool_calls", "content_filter"} <= set(finish["enum"])
    for reason in finish["enum"]:
        sample = _openai_chat({"content": "Some text."}, reason)
        assert not list(OPENAI["CreateChatCompletionResponse"].iter_errors(sample))
        assert _read("openai_chat", sample) == Parsed("Some text.", _read("openai_chat", sample).usage, reason)
    completion = SCHEMAS["CreateCompletionResponse"]["properties"]["choices"]["items"]["properties"]["finish_reason"]
    for reason in completion["enum"]:
        sample = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "gpt-3.5-turbo-instruct",
                  "choices": [{"text": " Paris", "index": 0, "logprobs": None, "finish_reason": reason}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        assert not list(OPENAI["CreateCompletionResponse"].iter_errors(sample))
        result = _read("openai_completions", sample)
        assert (result.text, result.finish_reason, result.usage.output_tokens) == ("Paris", reason, 1)


def _anthropic_message(content: list, stop_reason: str | None = "end_turn", **usage) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 25, "output_tokens": 9, **usage}}


TEXT = {"type": "text", "text": "Paris.", "citations": None}
THINKING = {"type": "thinking", "thinking": "The user asks...", "signature": "c2ln"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
ANTHROPIC_ANSWERS = {
    "text": ([TEXT], "Paris."),
    "thinking then text": ([THINKING, TEXT], "Paris."),
    "redacted thinking then text": ([{"type": "redacted_thinking", "data": "ZW5j"}, TEXT], "Paris."),
    "tool_use only": ([TOOL_USE], "called a tool (get_weather)"),
    "text then tool_use": ([{"type": "text", "text": "Checking."}, TOOL_USE], "Checking."),
    "server tool use and results": ([
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}, TEXT], "Paris."),
    "nothing": ([], ""),
}


@pytest.mark.parametrize("name", ANTHROPIC_ANSWERS)
def test_each_anthropic_message_reads_as_text_or_a_reason(name):
    content, expected = ANTHROPIC_ANSWERS[name]
    sample = _anthropic_message(content, "tool_use" if name == "tool_use only" else "end_turn")
    anthropic_types.Message.model_validate(sample)  # the sample is a Message as the SDK defines it
    result = _read("anthropic", sample)
    if isinstance(result, str):
        assert expected in result
    else:
        assert result.text == expected


def test_every_anthropic_stop_reason_and_usage_field_is_read():
    for reason in typing.get_args(anthropic_types.StopReason):
        for content in ([TEXT], []):
            sample = _anthropic_message(content, reason, cache_creation_input_tokens=0, cache_read_input_tokens=0,
                                        service_tier="standard")
            anthropic_types.Message.model_validate(sample)
            result = _read("anthropic", sample)
            assert result.finish_reason == reason and result.text == ("Paris." if content else "")
            assert (result.usage.input_tokens, result.usage.output_tokens) == (25, 9)
    assert _read("anthropic", _anthropic_message([TEXT], None)).finish_reason is None


def _gemini_response(parts: list | None, finish: str | None = "STOP", **extra) -> dict:
    candidate = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        candidate["finishReason"] = finish
    body = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "r1",
            "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 5, "totalTokenCount": 13}}
    body.update(extra)
    return body


def test_every_gemini_finish_reason_and_block_reason_is_read():
    for finish in genai_types.FinishReason:
        for parts in ([{"text": "Paris."}], None):
            sample = _gemini_response(parts, finish.value)
            genai_types.GenerateContentResponse.model_validate(sample)
            result = _read("gemini", sample)
            assert result.finish_reason == finish.value and result.text == ("Paris." if parts else "")
    for blocked in genai_types.BlockedReason:
        sample = {"promptFeedback": {"blockReason": blocked.value, "safetyRatings": []},
                  "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8}}
        genai_types.GenerateContentResponse.model_validate(sample)
        assert _read("gemini", sample) == f"the prompt was blocked by the provider ({blocked.value})"


def test_gemini_parts_thoughts_function_calls_and_usage():
    cases = {
        "thought then text": ([{"text": "Thinking...", "thought": True}, {"text": "Paris."}], "Paris."),
        "function call only": ([{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}],
                               "called a tool (get_weather)"),
        "text and function call": ([{"text": "Checking."}, {"functionCall": {"name": "f", "args": {}}}],
                                   "Checking."),
        "code execution": ([{"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
                            {"text": "It prints 1."}], "It prints 1."),
    }
    for name, (parts, expected) in cases.items():
        sample = _gemini_response(parts)
        genai_types.GenerateContentResponse.model_validate(sample)
        result = _read("gemini", sample)
        assert (result if isinstance(result, str) else result.text).count(expected) == 1, (name, result)
    usage = {"promptTokenCount": 100, "candidatesTokenCount": 20, "thoughtsTokenCount": 300,
             "cachedContentTokenCount": 50, "toolUsePromptTokenCount": 4, "totalTokenCount": 424}
    sample = _gemini_response([{"text": "ok"}], usageMetadata=usage)
    genai_types.GenerateContentResponse.model_validate(sample)
    assert _read("gemini", sample).usage.output_tokens == 320  # thinking is billed as output
    # All thinking, no answer (MAX_TOKENS): the thoughts are still the output tokens spent.
    sample = _gemini_response(None, "MAX_TOKENS", usageMetadata={"promptTokenCount": 10, "thoughtsTokenCount": 99,
                                                                  "totalTokenCount": 109})
    genai_types.GenerateContentResponse.model_validate(sample)
    assert (_read("gemini", sample).text, _read("gemini", sample).usage.output_tokens) == ("", 99)


OPENAI_ERRORS = [
    (400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                                "'max_completion_tokens' instead.", "type": "invalid_request_error",
                     "param": "max_tokens", "code": "unsupported_parameter"}}),
    (401, {"error": {"message": "Incorrect API key provided: sk-abc***xyz.", "type": "invalid_request_error",
                     "param": None, "code": "invalid_api_key"}}),
    (429, {"error": {"message": "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500, Used 500.",
                     "type": "requests", "param": None, "code": "rate_limit_exceeded"}}),
    (500, {"error": {"message": "The server had an error while processing your request.", "type": "server_error",
                     "param": None, "code": None}}),
]


def test_every_error_shape_gives_the_providers_own_words():
    for _, body in OPENAI_ERRORS:
        assert not list(OPENAI["ErrorResponse"].iter_errors(body))
        assert error_message(body) == body["error"]["message"]
    kinds = [typing.get_args(member.model_fields["type"].annotation)[0]
             for member in _members(anthropic_types.ErrorObject)]
    assert {"invalid_request_error", "rate_limit_error", "overloaded_error", "api_error"} <= set(kinds)
    for kind in kinds:
        body = {"type": "error", "error": {"type": kind, "message": f"{kind} happened"}, "request_id": "req_1"}
        anthropic_types.ErrorResponse.model_validate(body)
        assert error_message(body) == f"{kind} happened"
    gemini = {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                        "status": "RESOURCE_EXHAUSTED", "details": [
                            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}]}}
    for body in (gemini, [gemini]):  # Gemini sometimes wraps it in a list; its SDK reads both
        assert error_message(body) == genai_errors.APIError(429, body).message
    # A 200 that carries an error instead of an answer reads as that error, never as an exception.
    for api_format, body, words in (
            ("openai_chat", OPENAI_ERRORS[2][1], "no choices in the answer: Rate limit reached"),
            ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
             "no content in the answer: Overloaded"),
            ("gemini", gemini, "no candidates in the answer: Resource has been exhausted")):
        assert _read(api_format, body).startswith(words)


def _mutations(value, path=()):
    """Each place in an answer, replaced by each wrong kind of value."""
    for wrong in (None, "", "x", 0, -1, 1.5, True, [], [None], {}, {"x": 1}):
        yield path, wrong
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _mutations(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _mutations(inner, (*path, index))


def _replaced(value, path, wrong):
    if not path:
        return wrong
    value = copy.deepcopy(value)
    target = value
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = wrong
    return value


FUZZ_SEEDS = [
    ("openai_chat", OPENAI_ANSWERS["annotations and logprobs"][0]),
    ("openai_chat", OPENAI_ANSWERS["tool_calls"][0]),
    ("openai_chat", _openai_chat({"content": [{"type": "text", "text": "parts"}], "refusal": "no"})),
    ("openai_completions", {"choices": [{"text": "x", "finish_reason": "stop"}], "usage": {"prompt_tokens": 1}}),
    ("anthropic", _anthropic_message([THINKING, TEXT, TOOL_USE])),
    ("gemini", _gemini_response([{"text": "a", "thought": True}, {"text": "b"},
                                 {"functionCall": {"name": "f", "args": {}}}],
                                promptFeedback={"blockReason": "SAFETY"},
                                usageMetadata={"promptTokenCount": 1, "candidatesTokenCount": 2,
                                               "thoughtsTokenCount": 3})),
    ("gemini", {"promptFeedback": {"blockReason": "SAFETY", "blockReasonMessage": "unsafe"}}),
]


@pytest.mark.parametrize("api_format,seed", FUZZ_SEEDS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(FUZZ_SEEDS)])
def test_a_field_of_the_wrong_kind_anywhere_is_a_reason_never_an_exception(api_format, seed):
    for path, wrong in _mutations(seed):
        broken = _replaced(seed, path, wrong)
        try:
            _read(api_format, broken)
            error_message(broken)
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - any other exception is the bug this test looks for
            pytest.fail(f"{api_format}: {'/'.join(map(str, path))} = {wrong!r} raised {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("model_id,body,reason", [
    ("openai:gpt-4o", OPENAI_ANSWERS["tool_calls"][0], "unexpected answer from openai: the model called a tool "
                                                       "(get_weather)"),
    ("openai:gpt-4o", OPENAI_ANSWERS["content_filter, nothing"][0],
     "openai returned an empty answer (finish reason: content_filter)"),
    ("openai:o3", OPENAI_ANSWERS["length, all reasoning"][0],
     "openai returned an empty answer (finish reason: length)"),
    ("anthropic:claude-sonnet-4-5", _anthropic_message([], "refusal"),
     "anthropic returned an empty answer (finish reason: refusal)"),
    ("google:gemini-2.5-flash", _gemini_response(None, "SAFETY"),
     "google returned an empty answer (finish reason: SAFETY)"),
    ("google:gemini-2.5-flash", {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}},
     "unexpected answer from google: the prompt was blocked by the provider (PROHIBITED_CONTENT)"),
])
def test_through_the_router_an_answer_without_text_is_an_item_error_with_its_reason(model_id, body, reason):
    async def main():
        router = Router(settings_from_env(ENV), transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
        async with router:
            return await router.complete(ChatRequest(model_id=model_id, messages=({"role": "user", "content": "hi"},)))

    result = asyncio.run(main())
    assert result.text is None and result.error.startswith(reason), result.error
    assert result.retryable is False and result.attempts == 1
