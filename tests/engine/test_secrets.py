"""Issue 23, secrets: what a blueprint may use as a secret never comes back out of the engine, and custom
models reach only the hosts the operator lists.

A secret is a provider key or the value of a variable the operator allowed in EVALSITE_BLUEPRINT_ENV (a
custom model's `${NAME}` header). An endpoint that echoes one, as is or encoded, must not get it into the
answer, the conversation, a tool call, an error, the call log, the cache or a judge's verdict
(runs/engine/providers/redaction.py). A custom model whose URL goes to a host not in EVALSITE_MODEL_HOSTS
is refused with the reason before any request leaves.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from urllib.parse import quote, quote_plus

import httpx
import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import CustomModel
from runs.engine import calls as call_log
from runs.engine.config import EngineConfig
from runs.engine.generate import expand_variants, generate
from runs.engine.judge import JudgePlan, JudgeSpec, JudgeTask, judge_point
from runs.engine.providers import MemoryCache, Router, check_models, settings_from_env
from runs.engine.providers.cache import cache_key
from runs.engine.providers.redaction import REDACTED, Redactor, redactor_for
from runs.engine.providers.settings import DEFAULT_MODEL_HOSTS, ProviderSettings
from runs.engine.types import ChatRequest, Turn

SECRET = "proxy-secret-0123456789abcdef"  # the value of an allowed ${PROXY_KEY}
KEY = "sk-test-provider-key-9876543210"  # a provider key
ENV = {"EVALSITE_BLUEPRINT_ENV": "PROXY_KEY,ORG", "PROXY_KEY": SECRET, "ORG": "acme", "OPENAI_API_KEY": KEY}


def b64(data: bytes, *, urlsafe: bool = False, pad: bool = True) -> str:
    text = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return text if pad else text.rstrip("=")


def encodings(secret: str) -> dict[str, str]:
    """Ways an endpoint may echo ``secret``, each inside some neighbouring text."""
    raw = secret.encode()
    forms = {"raw": secret, "hex": raw.hex(), "HEX": raw.hex().upper(),
             "percent": quote("token=" + secret + "/x", safe=""),
             "percent-lower": quote("token=" + secret + " x", safe="").lower(),
             "quote_plus": quote_plus(secret + " & more"), "json": json.dumps({"k": secret})}
    for prefix in (b"", b"u:", b"ab:", b"user:"):  # every byte alignment of the secret in a longer blob
        for urlsafe in (False, True):
            for pad in (True, False):
                name = f"b64{'-url' if urlsafe else ''}{'' if pad else '-nopad'}-{len(prefix)}"
                forms[name] = b64(prefix + raw + b" trailing", urlsafe=urlsafe, pad=pad)
                forms[name + "-end"] = b64(prefix + raw, urlsafe=urlsafe, pad=pad)
    return forms


def leaks(text: str, secret: str = SECRET) -> list[str]:
    """Which recognisable forms of ``secret`` are in ``text`` (the secret itself, or 8+ characters of an
    encoding's core)."""
    found = [name for name, form in _cores(secret).items() if form in text]
    return found


def _cores(secret: str) -> dict[str, str]:
    raw = secret.encode()
    cores = {"raw": secret, "hex": raw.hex(), "HEX": raw.hex().upper(), "percent": quote(secret, safe="")}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        core = encoded[-(-8 * offset // 6):(8 * (offset + len(raw))) // 6]
        cores[f"b64-{offset}"] = core
        cores[f"b64-url-{offset}"] = core.replace("+", "-").replace("/", "_")
    return cores


# -- the Redactor ------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(encodings(SECRET)))
def test_every_encoding_of_a_secret_is_redacted(name):
    form = encodings(SECRET)[name]
    redactor = Redactor([SECRET])
    shown = redactor.text(f"before {form} after")
    assert REDACTED in shown and not leaks(shown), (name, shown)
    assert shown.startswith("before ") and shown.endswith(" after")


@pytest.mark.parametrize("spelled", [
    "".join(f"&#{ord(c)};" for c in SECRET),  # decimal character references: markdown renders them
    "".join(f"&#x{ord(c):X};" for c in SECRET),  # hexadecimal, upper case
    "".join(f"&#{ord(c):07d};" for c in SECRET[:10]) + SECRET[10:],  # zero-padded, then as is
    SECRET.replace("-", "&#45;").replace("p", "&#x70"),  # mixed, one without its semicolon
    "".join(f"\\u{ord(c):04x}" for c in SECRET),  # every character \u-escaped (a JSON body)
    "".join(f"\\u{ord(c):04x}" if i % 2 else f"&#{ord(c)};" for i, c in enumerate(SECRET)),
])
def test_a_secret_spelled_the_way_a_page_decodes_is_found(spelled):
    import html as html_module

    redactor = Redactor([SECRET])
    shown = redactor.text(f'{{"note": "a \\"quote\\" and &amp; stay", "k": "{spelled}"}}')
    decoded = html_module.unescape(json.loads(shown)["k"])
    assert decoded == REDACTED and SECRET not in html_module.unescape(json.loads(shown)["note"]), shown
    assert json.loads(shown)["note"] == 'a "quote" and & stay'  # still JSON; the quote kept escaped
    assert redactor.found(spelled)


def test_what_is_not_a_secret_is_left_alone():
    redactor = Redactor([SECRET, KEY])
    text = "Paris is the capital of France. proxy-secret-xyz dXNlcjpwYXNz 70726f78 %41%42"
    assert redactor.text(text) is text and not redactor.found(text)
    assert Redactor([]).text(text) is text and not Redactor([]).active


def test_short_values_are_redacted_only_as_whole_words_and_never_encoded():
    redactor = Redactor(["acme", "eu", "1"])
    assert redactor.text("acme-eu for Acme, acmeology and xacme: acme.") == \
        "[redacted]-eu for Acme, acmeology and xacme: [redacted]."
    # Under 8 characters the encodings are not looked for (base64 of four letters turns up by chance).
    assert redactor.text(b64(b"acme")) == b64(b"acme")
    # Under 4 characters a value is no secret: "1" and "eu" stay, or every answer that counts would break.
    assert redactor.text("1 + 1 = 2 in the eu") == "1 + 1 = 2 in the eu"


def test_messages_also_lose_words_sharing_eight_characters_with_a_secret():
    redactor = Redactor([KEY])
    assert redactor.message("Incorrect API key provided: sk-test-****-9876543210 (check it)") == \
        "Incorrect API key provided: [redacted] (check it)"
    assert redactor.text("partial sk-test-provider only") == "partial sk-test-provider only"  # answers: whole only


def test_scrub_walks_a_whole_result_and_keeps_what_did_not_change():
    redactor = Redactor([SECRET])
    clean = {"a": [1, "x", ("y", None)], "b": Turn("assistant", "hello")}
    assert redactor.scrub(clean) is clean
    dirty = {"calls": [{"answer": f"echo {SECRET}", "n": 3}], "turn": Turn("assistant", f"k={SECRET}", True)}
    scrubbed = redactor.scrub(dirty)
    assert scrubbed == {"calls": [{"answer": "echo [redacted]", "n": 3}],
                        "turn": Turn("assistant", "k=[redacted]", True)}
    assert SECRET in dirty["calls"][0]["answer"]  # a copy: the original is untouched


def _reference_scrub(redactor, value):
    """The walk as plainly as it can be written: every value recursed into, the same object back when nothing
    inside it changed (what ``Redactor.scrub`` does, however it cuts its calls)."""
    import dataclasses as dc

    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, dict):
        items = {k: _reference_scrub(redactor, v) for k, v in value.items()}
        return items if any(items[k] is not v for k, v in value.items()) else value
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        items = [_reference_scrub(redactor, v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if dc.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dc.fields(value):
            if not f.init or f.type in ("int", "float", "bool", "int | None", "float | None", "bool | None"):
                continue
            after = _reference_scrub(redactor, getattr(value, f.name))
            if after is not getattr(value, f.name):
                changes[f.name] = after
        return dc.replace(value, **changes) if changes else value
    return value


def test_scrub_is_the_plain_walk_over_results_of_every_shape():
    """Held to the plain walk (above) over real results' dataclasses nested every way, the secret anywhere or
    nowhere, empty tuples and Nones among them: the same values, and the same objects where nothing changed."""
    import random

    from runs.engine.assess import PointAssessment, ResponseAssessment
    from runs.engine.judge import JudgeVerdict
    from runs.engine.types import GeneratedResponse, Usage

    redactor = Redactor([SECRET])
    rng = random.Random(37)

    def text():
        return rng.choice(["", "plain", f"says {SECRET}", SECRET, "x" * 40, None])

    def verdict():
        return JudgeVerdict(judge=JudgeSpec(rng.choice(["openai:m", f"custom:{SECRET}"])), score=rng.choice([None, 1.0]),
                            reflection=text(), raw_answers=tuple(t for t in (text(), text()) if t is not None),
                            error=text())

    def result():
        turns = tuple(Turn(rng.choice(["user", "assistant"]), text() or "", rng.random() < 0.5)
                      for _ in range(rng.randrange(3)))
        response = GeneratedResponse("q", "m", turns, text() or "", text(), error=text(), usage=Usage(1, 2),
                                     tool_calls=tuple({"name": text(), "arguments": {"a": text()}}
                                                      for _ in range(rng.randrange(2))))
        points = tuple(PointAssessment(point=None, score=rng.choice([None, 0.5]), reflection=text(), error=text(),
                                       verdicts=tuple(verdict() for _ in range(rng.randrange(3))))
                       for _ in range(rng.randrange(3)))
        return {"response": response, "assessment": ResponseAssessment("q", "m", 0, points, None),
                "error": text(), "list": [text(), (), (text(),)]}

    changed = 0
    for _ in range(300):
        value = result()
        ours, plain = redactor.scrub(value), _reference_scrub(redactor, value)
        assert ours == plain
        for key in value:
            assert (ours[key] is value[key]) == (plain[key] is value[key])
        changed += ours is not value
    assert 0 < changed < 300  # both kinds were walked


def test_the_redactor_is_built_once_per_set_of_secrets_and_from_the_config():
    assert redactor_for([SECRET, KEY]) is redactor_for([KEY, SECRET, ""])
    config = EngineConfig(providers=settings_from_env(ENV))
    assert config.redactor is redactor_for([KEY, SECRET, "acme"])
    assert config.redactor.text(f"x {SECRET} {KEY}") == "x [redacted] [redacted]"
    assert SECRET not in repr(config.redactor) and KEY not in repr(config.redactor)


def test_redaction_is_cheap_on_a_two_kilobyte_answer():
    text = ("The capital of France is Paris, on the Seine; the Louvre holds the Mona Lisa. " * 30)[:2048]
    nothing, some = Redactor([]), Redactor([SECRET, KEY, "acme", *(f"sk-other-{i}-0123456789abcdef" for i in range(5))])

    def per_call_ms(redactor: Redactor, n: int) -> float:
        best = float("inf")
        for _ in range(3):  # best of three: the machine is shared
            started = time.perf_counter()
            for _ in range(n):
                redactor.text(text)
            best = min(best, (time.perf_counter() - started) / n * 1000)
        return best

    assert per_call_ms(nothing, 20_000) < 0.005  # measured: about 0.0001 ms
    assert per_call_ms(some, 2_000) < 0.5  # measured: about 0.05 ms with 8 secrets


# -- through the router: custom endpoints that echo ---------------------------------------------


def custom(**fields) -> CustomModel:
    base = {"id": "proxy:echo", "url": "http://127.0.0.1:9/v1/chat/completions", "modelName": "m",
            "inherit": "openai", "headers": {"Authorization": "Bearer ${PROXY_KEY}", "X-Org": "${ORG}"}}
    base.update(fields)
    return CustomModel.model_validate(base)


def chat_answer(text: str) -> dict:
    return {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5}}


class EchoEndpoint:
    """An httpx handler that answers with text built from the request's Authorization header."""

    def __init__(self, reply, status: int = 200):
        self.reply, self.status, self.requests = reply, status, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        sent = request.headers.get("authorization", "").removeprefix("Bearer ")
        body = self.reply(sent)
        return httpx.Response(self.status, json=chat_answer(body) if self.status == 200 else body)


def route(handler, requests, *, env=ENV, models=(), cache=None, record=True, **settings_overrides):
    settings = settings_from_env(env, backoff_base_s=0.001, backoff_max_s=0.001, **settings_overrides)

    async def main():
        async with Router(settings, custom_models=list(models), cache=cache,
                          transport=httpx.MockTransport(handler)) as router:
            results = []
            with call_log.recording() as log:
                for request in requests:
                    results.append(await router.complete(request))
            return results, log

    return asyncio.run(main())


def ask(model_id: str, text: str = "hi", **fields) -> ChatRequest:
    return ChatRequest(model_id=model_id, messages=({"role": "user", "content": text},), **fields)


def everything(results, log) -> str:
    return json.dumps([[r.text, r.error] for r in results]) + json.dumps(log)


def test_a_custom_endpoint_that_echoes_its_header_value_gets_redacted_in_the_answer_and_the_log():
    forms = encodings(SECRET)
    endpoint = EchoEndpoint(lambda sent: "Your key: " + " | ".join(
        f"{name}={form.replace(SECRET, sent)}" for name, form in forms.items()))
    (result,), log = route(endpoint, [ask("proxy:echo")], models=[custom()])
    assert endpoint.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # it was sent, and echoed
    assert result.ok and result.text.startswith("Your key: raw=[redacted] |")
    assert not leaks(result.text), leaks(result.text)
    assert not leaks(json.dumps(log)), leaks(json.dumps(log))
    assert log[0]["answer"].count(REDACTED) >= len(forms) - 1


def test_a_401_that_echoes_the_key_base64_encoded_is_redacted_everywhere():
    for model, models, secret in (("openai:gpt-4o-mini", (), KEY), ("proxy:echo", [custom()], SECRET)):
        def reply(sent: str) -> dict:
            basic = b64(f"user:{sent}".encode())
            bare = b64(sent.encode(), urlsafe=True, pad=False)
            return {"error": {"message": f"Invalid credentials Basic {basic} (urlsafe {bare})"}}

        endpoint = EchoEndpoint(reply, status=401)
        (result,), log = route(endpoint, [ask(model)], models=models,
                               base_urls={"openai": "http://127.0.0.1:9/v1"})
        assert len(endpoint.requests) == 1 and result.error.startswith("401 from ")
        assert REDACTED in result.error and not leaks(result.error, secret), result.error
        assert not leaks(json.dumps(log), secret) and REDACTED in log[0]["answer"]


def test_a_retried_error_body_and_the_wait_reason_are_redacted():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(503, json={"error": {"message": f"overloaded for {quote(SECRET, safe='')}"}})
        return httpx.Response(200, json=chat_answer("fine"))

    waits = []
    settings = settings_from_env(ENV, backoff_base_s=0.001, backoff_max_s=0.001)

    async def main():
        async with Router(settings, custom_models=[custom()], transport=httpx.MockTransport(handler),
                          on_wait=lambda *args: waits.append(args)) as router:
            with call_log.recording() as log:
                return await router.complete(ask("proxy:echo")), log

    result, log = asyncio.run(main())
    assert result.text == "fine" and len(seen) == 2
    assert not leaks(json.dumps(log)) and not leaks(json.dumps(waits))
    assert REDACTED in log[0]["attempts"][0]["body"]


def test_a_secret_in_a_custom_models_parameters_or_a_message_never_reaches_the_call_log():
    model = custom(parameters={"user": b64(SECRET.encode())})
    endpoint = EchoEndpoint(lambda sent: "ok")
    (result,), log = route(endpoint, [ask("proxy:echo")], models=[model])
    assert result.text == "ok" and log[0]["request"]["user"] == REDACTED
    (result,), log = route(endpoint, [ask("proxy:echo", f"is {SECRET} right?")], models=[custom()])
    assert log[0]["request"]["messages"] == [{"role": "user", "content": "is [redacted] right?"}]


def test_the_cache_keeps_the_redacted_answer_and_redacts_an_old_entry_on_the_way_out():
    cache = MemoryCache()
    endpoint = EchoEndpoint(lambda sent: f"echo {sent}")
    (first,), _ = route(endpoint, [ask("proxy:echo")], models=[custom()], cache=cache)
    assert first.text == "echo [redacted]"
    assert not leaks(json.dumps(list(cache._data.values())))
    # An entry stored before (an older version, or a value allowed since): served redacted.
    model = custom()
    settings = settings_from_env(ENV)
    router = Router(settings, custom_models=[model], transport=httpx.MockTransport(endpoint))
    identity = router.endpoint(model.id).cache_identity()
    asyncio.run(router.aclose())
    old = cache_key(identity, ({"role": "user", "content": "old"},), temperature=None, max_tokens=1500, trial=0)
    cache.set(old, {"text": f"stale {SECRET}", "input_tokens": 1, "output_tokens": 1})
    (hit,), log = route(endpoint, [ask("proxy:echo", "old")], models=[model], cache=cache)
    assert hit.cached and hit.text == "stale [redacted]" and not leaks(json.dumps(log))


def test_generation_keeps_no_secret_in_text_conversation_or_tool_calls():
    answer = (f"Here it is: {SECRET}\nTOOL_CALL {json.dumps({'name': 'login', 'arguments': {'token': SECRET}})}\n"
              f"and encoded {b64(SECRET.encode(), urlsafe=True)}")
    endpoint = EchoEndpoint(lambda sent: answer)
    parsed = parse_blueprint(
        "models:\n  - id: proxy:echo\n    url: http://localhost:9/v1/chat/completions\n    modelName: m\n"
        "    inherit: openai\n    headers: {Authorization: 'Bearer ${PROXY_KEY}'}\n---\n"
        "- id: p\n  messages:\n    - user: first\n    - assistant: null\n    - user: second\n"
        "  should: [$contains: x]\n", fmt="yaml")
    assert parsed.ok, [e.message for e in parsed.errors]
    bp = parsed.blueprint
    variant, = expand_variants(bp)
    settings = settings_from_env(ENV, backoff_base_s=0.001)

    async def main():
        async with Router(settings, custom_models=bp.custom_models,
                          transport=httpx.MockTransport(endpoint)) as router:
            return await generate(bp.prompts[0], variant, router.complete)

    response = asyncio.run(main())
    assert response.error is None and len(endpoint.requests) == 2
    stored = json.dumps([response.text, response.final_text, [(t.role, t.content) for t in response.conversation],
                         list(response.tool_calls), list(response.tool_call_problems)])
    assert not leaks(stored), leaks(stored)
    assert response.tool_calls[0]["arguments"] == {"token": REDACTED}
    # The second turn was asked with the redacted first answer: the model never gets the secret back either.
    second = json.loads(endpoint.requests[1].content)["messages"]
    assert not leaks(json.dumps(second))


def test_a_judge_that_echoes_a_secret_keeps_it_out_of_its_reflection_and_raw_answer():
    def reply(sent: str) -> str:
        return (f"<reflection>The answer quotes {SECRET} and {b64(SECRET.encode())}.</reflection>"
                "<classification>CLASS_EXACTLY_MET</classification>")

    endpoint = EchoEndpoint(reply)
    judge = JudgeSpec(model="proxy:echo", approach="holistic")
    plan = JudgePlan(judges=(judge,))
    task = JudgeTask(criterion="Quotes the key.", conversation=(Turn("user", "key?"), Turn("assistant", "here", True)),
                     subject_text="here", all_criteria=("[should] Quotes the key.",), prompt_id="p")
    settings = settings_from_env(ENV, backoff_base_s=0.001)

    async def main():
        async with Router(settings, custom_models=[custom()], transport=httpx.MockTransport(endpoint)) as router:
            return await judge_point(task, plan, router.complete)

    consensus = asyncio.run(main())
    verdict, = consensus.verdicts
    stored = json.dumps([verdict.to_dict(), consensus.reflection])
    assert verdict.ok and REDACTED in stored and not leaks(stored), stored


# -- custom model hosts ------------------------------------------------------------------------


def test_a_custom_model_on_a_host_not_listed_is_refused_before_any_request():
    endpoint = EchoEndpoint(lambda sent: "should never be asked")
    model = custom(url="https://collector.evil.example/v1/chat/completions")
    (result,), log = route(endpoint, [ask("proxy:echo")], models=[model], model_hosts=DEFAULT_MODEL_HOSTS)
    assert endpoint.requests == [] and log == []
    assert result.error == (
        "custom model 'proxy:echo' is not run: its url goes to collector.evil.example, and collector.evil.example "
        "is not in EVALSITE_MODEL_HOSTS, the hosts custom models may reach (now: 127.0.0.1, ::1, localhost); to "
        "allow it, add collector.evil.example to EVALSITE_MODEL_HOSTS (a comma-separated list of hosts) and "
        "restart. No request was sent.")
    assert not result.retryable and result.attempts == 0
    # The run form says the same before the run starts, naming the setting.
    settings = settings_from_env(ENV, model_hosts=DEFAULT_MODEL_HOSTS)
    problem, = check_models([model], settings)
    assert (problem.model_id, problem.message, problem.variable) == ("proxy:echo", result.error, "EVALSITE_MODEL_HOSTS")


def test_a_model_the_operator_lists_is_reached_and_ports_and_ipv6_are_understood():
    def allowed(url: str, hosts: str) -> bool:
        settings = settings_from_env({**ENV, "EVALSITE_MODEL_HOSTS": hosts})
        return not check_models([custom(url=url)], settings)

    assert allowed("https://llm.lab.internal/v1/chat/completions", "llm.lab.internal, gpu.lab.internal")
    assert allowed("https://LLM.Lab.Internal:8443/v1", "llm.lab.internal")  # a bare host allows any port
    assert allowed("http://gpu:8000/v1", "gpu:8000") and not allowed("http://gpu:8001/v1", "gpu:8000")
    assert allowed("http://[::1]:11434/v1", "[::1]") and allowed("http://[::1]:11434/v1", "[::1]:11434")
    assert allowed("https://anything.example/v1", "*")
    assert not allowed("http://127.0.0.1:11434/v1", "")  # set but empty: no custom model runs
    assert not allowed("http://127.0.0.2:11434/v1", "127.0.0.1")
    empty = settings_from_env({**ENV, "EVALSITE_MODEL_HOSTS": ""})
    problem, = check_models([custom()], empty)
    assert "no host is allowed (EVALSITE_MODEL_HOSTS is empty)" in problem.message


def test_built_in_providers_and_their_base_urls_are_not_limited():
    endpoint = EchoEndpoint(lambda sent: "hello")
    (result,), _ = route(endpoint, [ask("openai:gpt-4o-mini")], model_hosts=frozenset(),
                         base_urls={"openai": "https://proxy.corp.example/v1"})
    assert result.text == "hello" and str(endpoint.requests[0].url).startswith("https://proxy.corp.example/")


def test_the_engine_alone_has_no_host_limit_and_unparseable_urls_are_refused():
    assert ProviderSettings().model_hosts is None and settings_from_env({}).model_hosts is None
    assert not check_models([custom(url="https://anywhere.example/v1")], settings_from_env(ENV))
    problem, = check_models([custom(url="ftp://files.example/x")], settings_from_env(ENV))
    assert "is not an http or https URL" in problem.message


def test_a_refused_custom_model_sends_nothing_to_a_real_server(fake_llm):
    # The fake server listens on 127.0.0.1; the operator allowed only "localhost".
    model = custom(url=fake_llm.base_url + "/v1/chat/completions", modelName="echo-model")
    settings = settings_from_env(ENV, model_hosts=frozenset({"localhost"}))

    async def main():
        async with Router(settings, custom_models=[model]) as router:
            return await router.complete(ask("proxy:echo"))

    result = asyncio.run(main())
    assert "its url goes to 127.0.0.1" in result.error and "EVALSITE_MODEL_HOSTS" in result.error
    assert fake_llm.requests() == []
    allowed = settings_from_env(ENV, model_hosts=DEFAULT_MODEL_HOSTS)

    async def again():
        async with Router(allowed, custom_models=[model]) as router:
            return await router.complete(ask("proxy:echo", "hello there"))

    assert asyncio.run(again()).text == "Echo: hello there" and len(fake_llm.requests()) == 1


def test_the_setting_reaches_the_engine_with_this_machine_as_the_default(settings):
    from evalsite.engine import engine_config

    assert engine_config().providers.model_hosts == {"127.0.0.1", "localhost", "::1"}
    settings.EVALSITE_MODEL_HOSTS = ["LLM.lab.internal", "[::1]:11434", " "]
    assert engine_config().providers.model_hosts == {"llm.lab.internal", "::1:11434"}


# -- `$call`: text from a service, not from the router ---------------------------------------


def _call_item_result(through_run_items: bool = False):
    """One item through the pipeline: a fixtures answer, one `$call` point whose service echoes its header.
    ``process_item`` alone, or ``run_items`` (what a worker runs: it scrubs every result)."""
    from functools import partial

    from runs.engine.judge import JudgePlan
    from runs.engine.pipeline import PipelineOptions, WorkItem, process_item, run_items
    from runs.engine.points import CallTransport, evaluate_point

    def service(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"].removeprefix("Bearer ")
        return httpx.Response(200, json={"score": 1, "explain": f"checked with {b64(sent.encode())}"})

    parsed = parse_blueprint(
        "models: [fixtures:a]\nfixtures: {responses: {p: 'an answer'}}\nexternalServices:\n"
        "  checker: {url: 'https://scores.example.org/check', headers: {Authorization: 'Bearer ${PROXY_KEY}'}}\n"
        "---\n- id: p\n  prompt: hi\n  should: [{$call: {service: checker}}]\n", fmt="yaml")
    assert parsed.ok, [e.message for e in parsed.errors]
    bp = parsed.blueprint
    config = EngineConfig(call_hosts=frozenset({"scores.example.org"}), providers=settings_from_env(ENV))
    transport = CallTransport(client=httpx.Client(transport=httpx.MockTransport(service)))
    options = PipelineOptions(external_services=bp.external_services, config=config,
                              evaluate_point=partial(evaluate_point, call_transport=transport))
    from runs.engine.providers import fixtures_from_blueprint

    fixtures, _ = fixtures_from_blueprint(bp.fixtures, {})

    async def main():
        async with Router(config.providers, fixtures=fixtures) as router:
            item = WorkItem(key=1, prompt=bp.prompts[0], variant=expand_variants(bp)[0])
            if not through_run_items:
                return await process_item(item, complete=router.complete, judges=JudgePlan(judges=()),
                                          options=options)
            results = []

            async def keep(result):
                results.append(result)

            await run_items([item], complete=router.complete, judges=JudgePlan(judges=()), on_result=keep,
                            options=options)
            return results[0]

    return asyncio.run(main()), config


def test_the_config_redactor_clears_a_whole_item_result_a_call_service_echoed_into():
    result, config = _call_item_result()
    point, = result.assessment.point_assessments
    assert point.score == 1
    scrubbed = config.redactor.scrub(result)
    assert scrubbed.assessment.point_assessments[0].reflection == "checked with [redacted]"
    assert scrubbed.item is result.item and scrubbed.response is result.response  # nothing else copied


def test_a_call_services_explanation_is_redacted_by_the_pipeline():
    result, _ = _call_item_result(through_run_items=True)
    assert not leaks(result.assessment.point_assessments[0].reflection)
