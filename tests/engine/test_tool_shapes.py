"""Native tool requests and answers as the providers define them (issue 36, part 1).

A tool loop's bodies (tool definitions, an assistant's calls, tool results, tool errors, parallel calls) are
validated against the same definitions tests/engine/test_provider_schemas.py uses for text: OpenAI's OpenAPI
spec, Anthropic's SDK ``MessageCreateParams`` and Google's ``google-genai`` types (``Tool``, ``Content``); and
each provider's tool-call answer, built with the SDK's own types, reads back as calls.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runs.engine.providers.endpoints import build_request, resolve_endpoint
from runs.engine.providers.formats import BadAnswer, parse_answer
from tests.engine import test_provider_schemas as schemas
from tests.engine.test_provider_schemas import (SCHEMAS, SETTINGS, _anthropic_problems, _gemini_problems,
                                                _openai_problems, _property_names)

anthropic_types = schemas.anthropic_types
genai_types = schemas.genai_types

TOOLS = (
    {"name": "search", "description": "Search a small index.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "retrieve", "description": "",
     "parameters": {"type": "object", "properties": {
         "docId": {"type": "string"},
         "options": {"type": "object", "properties": {"snippet": {"type": "boolean"}, "maxChars": {"type": "number"}}}},
         "required": ["docId"], "additionalProperties": False}},
)
USER = {"role": "user", "content": "Find Article 2."}
LOOPS = {
    "first call": [{"role": "system", "content": "Use the tools."}, USER],
    "after a result": [USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "name": "search", "arguments": {"query": "Article 2"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": '[{"id": "42"}]', "is_error": False}],
    "after a tool error, with text beside the call": [USER, {"role": "assistant", "content": "Let me look.",
                                                             "tool_calls": [{"id": "c1", "name": "search",
                                                                             "arguments": {"query": "x"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "Error: offline", "is_error": True}],
    "parallel calls, then a second step": [
        USER, {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "search", "arguments": {"query": "a"}},
            {"id": "c2", "name": "retrieve", "arguments": {"docId": "42", "options": {"snippet": True}}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "[]", "is_error": False},
        {"role": "tool", "tool_call_id": "c2", "name": "retrieve", "content": "plain text result", "is_error": False},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c3", "name": "search", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "c3", "name": "search", "content": "Error: bad", "is_error": True}],
}


def _bodies(model_id):
    endpoint = resolve_endpoint(model_id, SETTINGS, {})
    for name, messages in LOOPS.items():
        _, _, body = build_request(endpoint, messages, temperature=0, max_tokens=100, tools=TOOLS)
        yield name, body


def _all_fine(problems_of, model_id):
    found = {case: problems for case, body in _bodies(model_id) if (problems := problems_of(body))}
    assert not found, found


def _openai_tool_problems(body: dict) -> list[str]:
    schemas._MESSAGE_SCHEMAS.setdefault("tool", "ChatCompletionRequestToolMessage")
    problems = _openai_problems("CreateChatCompletionRequest", body)
    for i, tool in enumerate(body.get("tools", [])):
        problems += [f"tools/{i}/function/{k}: not a field of FunctionObject"
                     for k in set(tool["function"]) - _property_names(SCHEMAS["FunctionObject"])]
    return problems


@pytest.mark.parametrize("model_id", ["openai:gpt-4o-mini", "openrouter:openai/gpt-4o-mini", "mistral:mistral-large"])
def test_every_openai_tool_loop_body_is_a_valid_create_chat_completion_request(model_id):
    _all_fine(_openai_tool_problems, model_id)
    body = dict(_bodies(model_id))["parallel calls, then a second step"]
    assert body["tools"][0] == {"type": "function", "function": TOOLS[0]}
    assert body["messages"][1]["content"] is None and body["messages"][1]["tool_calls"][1]["function"] == {
        "name": "retrieve", "arguments": '{"docId": "42", "options": {"snippet": true}}'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c2", "content": "plain text result"}


def test_the_openai_check_refuses_a_malformed_tool_message():
    schemas._MESSAGE_SCHEMAS.setdefault("tool", "ChatCompletionRequestToolMessage")
    body = dict(_bodies("openai:gpt-4o-mini"))["after a result"]
    body["messages"][2] = {"role": "tool", "content": "x"}  # no tool_call_id
    assert _openai_tool_problems(body)


def test_every_anthropic_tool_loop_body_is_valid_message_create_params():
    _all_fine(_anthropic_problems, "anthropic:claude-3-5-haiku")
    body = dict(_bodies("anthropic:claude-3-5-haiku"))["parallel calls, then a second step"]
    assert body["tools"][1]["input_schema"] == TOOLS[1]["parameters"]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    # Both results of the parallel calls go back together in one user message, right after the calls.
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == ["c1", "c2"]
    assert body["messages"][4]["content"][0]["is_error"] is True
    for tool in body["tools"]:
        anthropic_types.ToolParam.__annotations__  # the SDK type exists
        assert set(tool) <= set(anthropic_types.ToolParam.__annotations__)


def _gemini_tool_problems(body: dict) -> list[str]:
    problems = _gemini_problems(body)
    for i, tool in enumerate(body.get("tools", [])):
        try:
            genai_types.Tool.model_validate(tool)
        except ValidationError as exc:
            problems += [f"tools/{i}/{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    return problems


def test_every_gemini_tool_loop_body_is_a_valid_generate_content_request():
    _all_fine(_gemini_tool_problems, "google:gemini-2.5-flash")
    body = dict(_bodies("google:gemini-2.5-flash"))["parallel calls, then a second step"]
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == TOOLS[0]["parameters"]
    parts = body["contents"][2]["parts"]
    assert [p["functionResponse"]["name"] for p in parts] == ["search", "retrieve"]
    assert parts[0]["functionResponse"]["response"] == {"result": []}
    assert parts[1]["functionResponse"]["response"] == {"result": "plain text result"}
    assert body["contents"][4]["parts"][0]["functionResponse"]["response"] == {"error": "Error: bad"}


def test_the_gemini_check_refuses_a_malformed_declaration():
    body = dict(_bodies("google:gemini-2.5-flash"))["first call"]
    body["tools"][0]["functionDeclarations"][0]["parametersJsonSchemaX"] = {}
    assert _gemini_tool_problems(body)


# --------------------------------------------------------------------------
# Answers: each provider's tool-call answer, built with its SDK's types, reads as calls


def test_an_anthropic_tool_use_answer_reads_as_calls_with_the_text_beside():
    message = anthropic_types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "stop_reason": "tool_use",
        "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5},
        "content": [{"type": "text", "text": "Searching."},
                    {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "a"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "retrieve", "input": {"docId": "42"}}]})
    parsed = parse_answer("anthropic", message.model_dump(mode="json"), tools_sent=True)
    assert parsed.text == "Searching." and parsed.finish_reason == "tool_use"
    assert parsed.tool_calls == ({"id": "toolu_1", "name": "search", "arguments": {"query": "a"}},
                                 {"id": "toolu_2", "name": "retrieve", "arguments": {"docId": "42"}})
    with pytest.raises(BadAnswer):  # without tools sent, calls alone are still no answer
        parse_answer("anthropic", {**message.model_dump(mode="json"), "content": message.model_dump(
            mode="json")["content"][1:]})


def test_a_gemini_function_call_answer_reads_as_calls():
    answer = genai_types.GenerateContentResponse.model_validate({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "search", "args": {"query": "a"}}},
            {"functionCall": {"id": "fc-9", "name": "retrieve", "args": {"docId": "42"}}}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4}})
    parsed = parse_answer("gemini", answer.model_dump(mode="json", by_alias=True, exclude_none=True), tools_sent=True)
    assert parsed.text == ""
    assert parsed.tool_calls == ({"id": "gemini-0", "name": "search", "arguments": {"query": "a"}},
                                 {"id": "fc-9", "name": "retrieve", "arguments": {"docId": "42"}})


def test_an_openai_tool_calls_answer_valid_under_the_spec_reads_as_calls():
    data = {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
                "role": "assistant", "content": None, "refusal": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"query":"a"}'}},
                    {"id": "call_2", "type": "function", "function": {"name": "retrieve", "arguments": "not json"}}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}
    assert not list(schemas.OPENAI["CreateChatCompletionResponse"].iter_errors(data))
    parsed = parse_answer("openai_chat", data, tools_sent=True)
    # Arguments that are not JSON stay text: the tool's schema check refuses them, with the reason.
    assert parsed.tool_calls == ({"id": "call_1", "name": "search", "arguments": {"query": "a"}},
                                 {"id": "call_2", "name": "retrieve", "arguments": "not json"})
