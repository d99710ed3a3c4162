"""The router: settings, limits, retries, backoff, timeouts, circuit breaker, key hygiene.

Faults come from the fake LLM server on 127.0.0.1 (tests/fakes/llm_server.py),
chosen by words in the model name; concurrency is measured with an async
httpx.MockTransport that counts calls in flight. Backoffs are tiny.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from runs.engine.providers import ProviderSettings, Router, describe_wait, redact, settings_from_env
from runs.engine.types import ChatRequest

KEY = "sk-test-router-key-0123456789"


def run(coro):
    return asyncio.run(coro)


def ask(model_id: str, text: str = "hello", **kwargs) -> ChatRequest:
    return ChatRequest(model_id=model_id, messages=({"role": "user", "content": text},), temperature=0, **kwargs)


def fake_settings(server, **overrides) -> ProviderSettings:
    env = {
        "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url + "/v1",
        "ANTHROPIC_API_KEY": KEY + "-ant", "ANTHROPIC_BASE_URL": server.base_url,
        "GEMINI_API_KEY": KEY + "-gem", "GEMINI_BASE_URL": server.base_url + "/v1beta",
    }
    values = dict(backoff_base_s=0.01, backoff_max_s=0.02, timeout_s=1.0)
    values.update(overrides)
    return settings_from_env(env, **values)


async def complete_all(settings, requests, **router_kwargs):
    async with Router(settings, **router_kwargs) as router:
        return [await router.complete(r) for r in requests]


# -- settings ---------------------------------------------------------------


def test_settings_are_read_from_the_environment():
    settings = settings_from_env({
        "EVALSITE_CONCURRENCY": "7", "EVALSITE_CONCURRENCY_OPENAI": "3", "EVALSITE_CONCURRENCY_X_AI": "2",
        "OPENAI_API_KEY": "k1", "GOOGLE_API_KEY": "g-old", "GEMINI_API_KEY": "g-new",
        "OPENROUTER_BASE_URL": "http://127.0.0.1:9/api/v1/", "EVALSITE_BLUEPRINT_ENV": "ORG_ID, PROXY_KEY,",
        "ORG_ID": "org-1", "NOT_ALLOWED": "nope", "EVALSITE_MAX_ATTEMPTS": "5",
    })
    assert settings.concurrency == 7
    assert settings.provider_concurrency == {"OPENAI": 3, "X_AI": 2}
    assert settings.concurrency_for("openai:gpt-4o") == 3
    assert settings.concurrency_for("anthropic:claude") == 7
    assert settings.api_key("google") == "g-new"  # GEMINI_API_KEY wins over GOOGLE_API_KEY
    assert settings.api_key("anthropic") is None
    assert settings.base_url("openrouter") == "http://127.0.0.1:9/api/v1"
    assert settings.base_url("openai") == "https://api.openai.com/v1"
    assert settings.blueprint_env_names == {"ORG_ID", "PROXY_KEY"}
    assert settings.blueprint_env == {"ORG_ID": "org-1"}  # allowed and set; nothing else is read
    assert settings.max_attempts == 5


def test_settings_never_show_keys_in_their_repr():
    settings = settings_from_env({"OPENAI_API_KEY": "sk-secret-value", "EVALSITE_BLUEPRINT_ENV": "T",
                                  "T": "tok-secret"})
    assert "sk-secret-value" not in repr(settings) and "tok-secret" not in repr(settings)


@pytest.mark.parametrize("env, fragment", [
    ({"EVALSITE_CONCURRENCY": "lots"}, "EVALSITE_CONCURRENCY must be a whole number"),
    ({"EVALSITE_CONCURRENCY_OPENAI": "0"}, "EVALSITE_CONCURRENCY_OPENAI must be at least 1"),
    ({"OPENAI_BASE_URL": "api.openai.com"}, "OPENAI_BASE_URL must start with http"),
    ({"EVALSITE_BLUEPRINT_ENV": "GOOD,bad-name"}, "bad-name"),
])
def test_a_malformed_setting_names_the_variable(env, fragment):
    with pytest.raises(ValueError, match=fragment):
        settings_from_env(env)


def test_the_wait_message_reads_as_a_sentence():
    assert describe_wait("429 from openai", 2, 3, 12.4) == "429 from openai, attempt 2 of 3 in 12 s"
    assert describe_wait("timeout from anthropic", 3, 3, 1.5) == "timeout from anthropic, attempt 3 of 3 in 1.5 s"


def test_redaction_hides_keys_and_fragments_of_keys():
    secret = "sk-proj-abcdefghijklmnop"
    assert redact(f"bad key {secret}.", [secret]) == "bad key [redacted]."
    assert "ijklmnop" not in redact("Incorrect API key provided: sk-proj-****ijklmnop", [secret])
    assert redact("nothing secret here", [secret]) == "nothing secret here"


# -- protocols through real HTTP ----------------------------------------------


def test_each_protocol_round_trips_through_the_fake_server(fake_llm):
    settings = fake_settings(fake_llm)
    results = run(complete_all(settings, [
        ask("openai:echo-model", "one two"), ask("anthropic:echo-model", "three"), ask("google:echo-model", "four"),
    ]))
    assert [r.text for r in results] == ["Echo: one two", "Echo: three", "Echo: four"]
    assert [r.usage.input_tokens for r in results] == [2, 1, 1]
    paths = [r["path"] for r in fake_llm.requests()]
    assert paths == ["/v1/chat/completions", "/v1/messages", "/v1beta/models/echo-model:generateContent"]
    headers = [r["headers"] for r in fake_llm.requests()]
    assert headers[0]["authorization"] == f"Bearer {KEY}"
    assert headers[1]["x-api-key"] == KEY + "-ant" and headers[1]["anthropic-version"] == "2023-06-01"
    assert headers[2]["x-goog-api-key"] == KEY + "-gem"


def test_a_missing_key_fails_the_item_before_any_request(fake_llm):
    settings = settings_from_env({"ANTHROPIC_BASE_URL": fake_llm.base_url})
    result, = run(complete_all(settings, [ask("anthropic:claude-x")]))
    assert result.error == "no API key for anthropic: set ANTHROPIC_API_KEY in the environment to run 'anthropic:claude-x'"
    assert not result.retryable and result.attempts == 0
    assert fake_llm.requests() == []


def test_an_unknown_provider_is_an_error_not_a_crash():
    result, = run(complete_all(ProviderSettings(), [ask("acme:model-1")]))
    assert "unknown provider 'acme'" in result.error and "custom model" in result.error


def test_variant_suffixes_are_stripped_before_routing(fake_llm):
    result, = run(complete_all(fake_settings(fake_llm), [ask("openai:plain[temp:0.7][sp_idx:1]")]))
    assert result.ok and fake_llm.requests()[0]["model"] == "plain"


# -- retries, backoff, timeouts ----------------------------------------------------


def test_a_429_waits_as_long_as_retry_after_says(fake_llm):
    waits = []
    model = "openai:t1-fail-429-then-ok-retry-after-0.3"
    started = time.perf_counter()
    result, = run(complete_all(fake_settings(fake_llm), [ask(model)],
                               on_wait=lambda *args: waits.append(args)))
    assert result.ok and result.attempts == 2
    assert time.perf_counter() - started >= 0.3
    (model_id, reason, attempt, max_attempts, delay), = waits
    assert (model_id, reason, attempt, max_attempts) == ("openai:t1-fail-429-then-ok-retry-after-0.3",
                                                         "429 from openai", 2, 3)
    assert 0.3 <= delay <= 0.35


def test_retry_after_ms_is_honoured_and_on_wait_may_be_async(fake_llm):
    waits = []

    async def on_wait(*args):
        waits.append(args)

    result, = run(complete_all(fake_settings(fake_llm), [ask("openai:t2-fail-429-then-ok-retry-after-ms-120")],
                               on_wait=on_wait))
    assert result.ok
    assert 0.12 <= waits[0][4] <= 0.14


def test_5xx_is_retried_with_growing_backoff_until_it_succeeds(fake_llm):
    waits = []
    settings = fake_settings(fake_llm, backoff_base_s=0.02, backoff_max_s=1.0)
    result, = run(complete_all(settings, [ask("openai:t3-fail-500x2-then-ok")],
                               on_wait=lambda *args: waits.append(args)))
    assert result.ok and result.attempts == 3
    assert [w[2] for w in waits] == [2, 3]
    first, second = waits[0][4], waits[1][4]
    assert 0.01 <= first <= 0.02 and 0.02 <= second <= 0.04  # base * 2**(n-1), half of it jittered


def test_attempts_are_bounded_and_the_reason_says_so(fake_llm):
    result, = run(complete_all(fake_settings(fake_llm), [ask("openai:t4-always-503")]))
    assert result.error == "503 from openai: fake 503 for model t4-always-503 (gave up after 3 attempts)"
    assert result.retryable and result.attempts == 3
    assert len(fake_llm.requests("t4-always-503")) == 3


def test_other_4xx_are_not_retried(fake_llm):
    result, = run(complete_all(fake_settings(fake_llm), [ask("openai:t5-always-404")]))
    assert result.error.startswith("404 from openai: fake 404") and "still serves" in result.error
    assert not result.retryable and result.attempts == 1
    assert len(fake_llm.requests("t5-always-404")) == 1


def test_a_hang_times_out_and_is_retried(fake_llm):
    settings = fake_settings(fake_llm, timeout_s=0.3)
    ok, failed = run(complete_all(settings, [ask("openai:t6-hang-then-ok"), ask("openai:t6-always-hang")]))
    assert ok.ok and ok.attempts == 2
    assert failed.error == "no answer from openai within 0.3 s (timeout) (gave up after 3 attempts)"
    assert failed.retryable


def test_a_dropped_connection_is_retried(fake_llm):
    ok, failed = run(complete_all(fake_settings(fake_llm), [ask("openai:t7-drop-then-ok"),
                                                            ask("openai:t7-always-drop")]))
    assert ok.ok and ok.attempts == 2
    assert failed.error.startswith("connection to openai failed") and failed.retryable and failed.attempts == 3


def test_malformed_json_is_retried(fake_llm):
    ok, failed = run(complete_all(fake_settings(fake_llm), [ask("openai:t8-malformed-then-ok"),
                                                            ask("openai:t8-always-malformed")]))
    assert ok.ok and ok.text == "Echo: hello" and ok.attempts == 2
    assert failed.error.startswith("openai answered with malformed JSON (HTTP 200)") and failed.retryable


def test_an_empty_answer_is_an_error_not_a_response(fake_llm):
    result, = run(complete_all(fake_settings(fake_llm), [ask("openai:t9-empty")]))
    assert result.error == "openai returned an empty answer (finish reason: stop)" and not result.retryable


def test_a_retry_after_longer_than_we_wait_fails_now_and_says_why(fake_llm):
    result, = run(complete_all(fake_settings(fake_llm, retry_after_max_s=5),
                               [ask("openai:t10-always-429-retry-after-3600")]))
    assert result.attempts == 1 and result.retryable
    assert "asked to wait 3600 s, longer than the 5 s we wait; try again later" in result.error


def test_a_provider_that_echoes_the_key_in_a_401_never_gets_it_into_the_error(fake_llm):
    settings = fake_settings(fake_llm)
    openai, anthropic = run(complete_all(settings, [ask("openai:t11-always-401"),
                                                    ask("anthropic:t11-always-401")]))
    assert fake_llm.requests()[0]["headers"]["authorization"] == f"Bearer {KEY}"  # the fake did see it
    for result, key in ((openai, KEY), (anthropic, KEY + "-ant")):
        assert result.error.startswith("401 from ")
        assert key not in result.error and KEY[:12] not in result.error
        assert "[redacted]" in result.error
    assert "(check OPENAI_API_KEY)" in openai.error and "(check ANTHROPIC_API_KEY)" in anthropic.error


# -- circuit breaker ------------------------------------------------------------


def test_the_breaker_opens_after_consecutive_failures_and_stops_sending(fake_llm):
    settings = fake_settings(fake_llm, max_attempts=1, breaker_threshold=3)
    results = run(complete_all(settings, [ask("openai:t12-always-500") for _ in range(6)]))
    assert len(fake_llm.requests("t12-always-500")) == 3
    assert all(r.error.startswith("500 from openai") for r in results[:3])
    for result in results[3:]:
        assert result.error.startswith("Circuit breaker for model 'openai:t12-always-500' is open: 3 calls in a row "
                                       "failed")
        assert "last error: 500 from openai" in result.error and result.attempts == 0


def test_a_success_resets_the_breaker(fake_llm):
    settings = fake_settings(fake_llm, max_attempts=1, breaker_threshold=3)
    mixed = run(complete_all(settings, [ask("openai:t13-fail-500x2-then-ok") for _ in range(5)]))
    assert [r.ok for r in mixed] == [False, False, True, True, True]


def test_a_model_that_only_answers_429_opens_its_breaker_with_the_providers_words(fake_llm):
    # Rate limits used never to count: a key with no quota (insufficient_quota is a 429) held every item until
    # its budget. Now as many calls in a row ending on a 429, with no answer between, open the breaker.
    settings = fake_settings(fake_llm, max_attempts=1, breaker_threshold=3)
    limited = run(complete_all(settings, [ask("openai:t13-noquota-always-429") for _ in range(5)]))
    assert [r.error.startswith("429 from openai: insufficient_quota: no quota") for r in limited[:3]] == [True] * 3
    for result in limited[3:]:
        assert result.error.startswith("Circuit breaker for model 'openai:t13-noquota-always-429' is open: it "
                                       "answered only 429 (rate-limited) 3 times in a row")
        assert "insufficient_quota: no quota" in result.error and result.attempts == 0
    assert len(fake_llm.requests("t13-noquota-always-429")) == 3


def test_429s_with_answers_between_never_open_the_breaker(fake_llm):
    settings = fake_settings(fake_llm, max_attempts=1, breaker_threshold=2)
    fake_llm.script([{"model": "t13-busy", "match": "busy", "status": 429}])
    results = run(complete_all(settings, [ask("openai:t13-busy", "busy" if i % 2 else "fine") for i in range(8)]))
    assert [r.ok for r in results] == [True, False] * 4
    assert not any("Circuit breaker" in (r.error or "") for r in results)


def test_a_model_held_by_its_429s_never_holds_the_slots_its_providers_other_models_need(fake_llm):
    """Calls used to wait out their model's pace (and each 429's hold) while holding one of the provider's
    concurrency slots: a model with no quota beside a healthy one of the same provider starved it."""
    settings = fake_settings(fake_llm, concurrency=1, max_attempts=1, breaker_threshold=50)
    done: dict[str, float] = {}

    async def main():
        async with Router(settings) as router:
            started = time.monotonic()

            async def one(model, i):
                result = await router.complete(ask(model, f"q{i}", use_cache=False))
                done[f"{model}{i}"] = time.monotonic() - started
                return result
            starved = [one("openai:s1-noquota-always-429", i) for i in range(3)]
            healthy = [one("openai:s1-fine", i) for i in range(5)]
            return await asyncio.gather(*starved, *healthy)

    results = run(main())
    assert all(r.ok for r in results[3:]) and not any(r.ok for r in results[:3])
    healthy_done = max(t for k, t in done.items() if "fine" in k)
    assert healthy_done < 1.0, done  # before: after the no-quota model's holds, one after the other (seconds)


def test_a_storm_of_429s_503s_malformed_answers_and_a_retry_after_of_500_s_ends_in_seconds(fake_llm):
    """With the production back-off (1 s, doubling): every failing model's calls end within seconds, each with its
    reason or its breaker's, and a healthy model of the same provider answers meanwhile. A Retry-After of 500 s
    (longer than we wait) used to hold that model's every call for 120 s in the pacer."""
    settings = fake_settings(fake_llm, backoff_base_s=1.0, backoff_max_s=30.0, concurrency=5, timeout_s=5.0)
    models = ["st-always-429", "st-always-503", "st-always-malformed", "st-always-429-retry-after-500", "st-fine"]

    async def main():
        async with Router(settings) as router:
            started = time.monotonic()
            results = await asyncio.wait_for(asyncio.gather(*(
                router.complete(ask(f"openai:{m}", f"q{i}", use_cache=False)) for i in range(8) for m in models)), 60)
            return results, time.monotonic() - started

    results, took = run(main())
    by_model = {m: [r for r, model in zip(results, models * 8) if model == m] for m in models}
    assert took < 20.0, took
    assert all(r.ok for r in by_model["st-fine"])
    for model in models[:-1]:
        assert not any(r.ok for r in by_model[model]), model
        assert any("Circuit breaker" in r.error for r in by_model[model]), (model, [r.error for r in by_model[model]])
    assert all("429" in r.error for r in by_model["st-always-429"] + by_model["st-always-429-retry-after-500"])
    assert any("asked to wait 500 s" in r.error for r in by_model["st-always-429-retry-after-500"])


def test_the_breaker_is_per_model(fake_llm):
    settings = fake_settings(fake_llm, max_attempts=1, breaker_threshold=2)
    results = run(complete_all(settings, [ask("openai:t14-always-500"), ask("openai:t14-always-500"),
                                          ask("openai:t14-always-500"), ask("openai:t14-fine")]))
    assert "Circuit breaker" in results[2].error
    assert results[3].ok


# -- OpenAI parameter quirks (reference 5.8) ----------------------------------------


def test_an_openai_model_that_rejects_max_tokens_or_temperature_is_asked_again_its_way():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if "max_tokens" in body:
            return httpx.Response(400, json={"error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                           "Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}})
        if body.get("temperature", 1) != 1:
            return httpx.Response(400, json={"error": {
                "message": "Unsupported value: 'temperature' does not support 0 with this model. Only the default "
                           "(1) value is supported.",
                "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}})
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    settings = settings_from_env({"OPENAI_API_KEY": KEY})
    first, second = run(complete_all(settings, [ask("openai:o-model", max_tokens=50), ask("openai:o-model")],
                                     transport=httpx.MockTransport(handler)))
    assert first.ok and first.attempts == 1 and second.ok
    assert [("max_tokens" in b, "max_completion_tokens" in b, "temperature" in b) for b in bodies] == [
        (True, False, True), (False, True, True), (False, True, False),  # learned on the first item
        (False, True, False),  # and remembered for the next
    ]
    assert bodies[-1]["max_completion_tokens"] == 1500


def test_an_anthropic_model_for_which_temperature_is_deprecated_is_asked_again_without_it():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if "temperature" in body:
            return httpx.Response(400, json={"type": "error", "error": {
                "type": "invalid_request_error", "message": "`temperature` is deprecated for this model."}})
        return httpx.Response(200, json={"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                                         "usage": {"input_tokens": 1, "output_tokens": 1}})

    settings = settings_from_env({"ANTHROPIC_API_KEY": KEY})
    first, second = run(complete_all(settings, [ask("anthropic:claude-new"), ask("anthropic:claude-new")],
                                     transport=httpx.MockTransport(handler)))
    assert first.ok and second.ok
    assert ["temperature" in b for b in bodies] == [True, False, False]  # learned once, remembered


# -- concurrency limits ------------------------------------------------------------------


class InFlight:
    """An async MockTransport handler that answers after a short wait and records peak concurrency per model."""

    def __init__(self, delay: float = 0.02):
        self.delay = delay
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        self.now[model] = self.now.get(model, 0) + 1
        total = sum(self.now.values())
        self.peak[model] = max(self.peak.get(model, 0), self.now[model])
        self.peak["*"] = max(self.peak.get("*", 0), total)
        await asyncio.sleep(self.delay)
        self.now[model] -= 1
        return httpx.Response(200, json={"choices": [{"message": {"content": f"hi from {model}"}}]})


async def _burst(settings, models: list[str], handler, **kwargs):
    async with Router(settings, transport=httpx.MockTransport(handler), **kwargs) as router:
        return await asyncio.gather(*(router.complete(ask(m)) for m in models))


def test_calls_to_a_provider_never_exceed_its_limit():
    handler = InFlight()
    env = {"OPENAI_API_KEY": "a", "TOGETHER_API_KEY": "b", "EVALSITE_CONCURRENCY": "5",
           "EVALSITE_CONCURRENCY_OPENAI": "2"}
    results = run(_burst(settings_from_env(env), ["openai:m1"] * 12 + ["together:m2"] * 12, handler))
    assert all(r.ok for r in results)
    assert handler.peak["m1"] == 2
    assert handler.peak["m2"] == 5


def test_a_blueprint_can_lower_the_limit_but_never_raise_it():
    env = {"OPENAI_API_KEY": "a", "EVALSITE_CONCURRENCY": "3"}
    lowered, raised = InFlight(), InFlight()
    run(_burst(settings_from_env(env), ["openai:m"] * 8, lowered, blueprint_concurrency=1))
    run(_burst(settings_from_env(env), ["openai:m"] * 8, raised, blueprint_concurrency=50))
    assert lowered.peak["m"] == 1
    assert raised.peak["m"] == 3


# -- answers read together ------------------------------------------------------


def _held_transport(events: list[str], held: dict[str, asyncio.Future]):
    """A transport whose answers the test gives (``held[text].set_result``); it notes each call as it leaves."""
    from runs.engine.providers.transport import PooledTransport

    class Held(PooledTransport):
        async def post(self, url, headers, content, *, timeout_s, connect_timeout_s):
            text = json.loads(content)["messages"][0]["content"]
            events.append(f"sent {text}")
            held[text] = asyncio.get_running_loop().create_future()
            return await held[text]

    return Held()


def _held_answer(status: int = 200):
    from runs.engine.providers.transport import Answer

    body = {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}} if status == 200 else \
        {"error": {"message": "bad request", "type": "invalid_request_error"}}
    return Answer(status, [(b"content-type", b"application/json")], json.dumps(body).encode())


async def _until(held: dict, count: int) -> None:
    for _ in range(100):
        if len(held) >= count:
            return
        await asyncio.sleep(0)


def _held_settings(concurrency: int, **overrides) -> ProviderSettings:
    return settings_from_env({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                              "EVALSITE_CONCURRENCY": str(concurrency)}, **overrides)


def test_calls_waiting_for_a_slot_leave_before_the_answers_read_together_are_worked_on():
    """Two slots, four calls: the first two answers arrive at one moment. The two waiting calls are sent before
    either answer goes back to its caller (whose checks, judges and storing would otherwise hold them back, with
    both slots standing empty meanwhile)."""
    events: list[str] = []
    held: dict[str, asyncio.Future] = {}

    async def main():
        async with Router(_held_settings(2), transport=_held_transport(events, held)) as router:
            async def call(text: str) -> None:
                result = await router.complete(ask("openai:m", text))
                assert result.ok, result.error
                events.append(f"worked on {text}")

            calls = [asyncio.create_task(call(text)) for text in "abcd"]
            await _until(held, 2)
            for text in "ab":  # read in one turn of the loop, as answers to calls sent together are
                held[text].set_result(_held_answer())
            await _until(held, 4)
            for text in "cd":
                held[text].set_result(_held_answer())
            await asyncio.gather(*calls)

    run(main())
    assert events[:6] == ["sent a", "sent b", "sent c", "sent d", "worked on a", "worked on b"]
    assert sorted(events[6:]) == ["worked on c", "worked on d"]


def test_a_failure_opens_the_breaker_before_a_waiting_call_is_sent():
    """Only an answer lets the waiting calls go first: a failure is counted before, so a breaker it opens keeps
    the call waiting for its slot from being sent."""
    events: list[str] = []
    held: dict[str, asyncio.Future] = {}

    async def main():
        # A short timeout: a call sent by mistake is never answered, and fails the test in two seconds.
        settings = _held_settings(1, breaker_threshold=1, max_attempts=1, timeout_s=2.0)
        async with Router(settings, transport=_held_transport(events, held)) as router:
            calls = [asyncio.create_task(router.complete(ask("openai:m", text))) for text in "ab"]
            await _until(held, 1)
            held["a"].set_result(_held_answer(400))
            return await asyncio.gather(*calls)

    first, second = run(main())
    assert events == ["sent a"]
    assert "400" in first.error
    assert "Circuit breaker" in second.error and second.attempts == 0
