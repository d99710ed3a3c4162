"""A run never drives evalsite itself (issue "Hostile input, third round", case 1).

A blueprint's custom model whose url is evalsite's own API, with ``parameters`` filling the body, once renamed
blueprints, cancelled runs and started runs when the blueprint was run. Through the door it came from: a real
run (tasks inline) whose custom model and `$call` point at a real server (pytest-django's live server) holding
the library. Three guards are checked: the send-time refusal of our own address and port, the engine's mark
(``X-Evalsite-Engine``) that the site refuses should a request arrive anyway, and loopback alone no longer
being enough to change anything through the API.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
from django.test import Client

from blueprints.models import Blueprint
from runs import start as run_start
from runs.engine.providers import Router, settings_from_env
from runs.engine.providers.own import ENGINE_HEADER, OwnAddresses
from runs.models import Response, Run

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = """\
title: Drives the site
models:
  - id: local:site
    url: {base}/api/blueprints/victim/rename
    modelName: m
    inherit: openai
    headers: {{X-Evalsite-Engine: "0"}}
    parameters: {{id: pwned}}
  - fixtures:x
fixtures: {{responses: {{p: "x marks the spot"}}}}
---
- id: p
  prompt: hello
  should:
    - $contains: x
    - $call: {{url: "{base}/api/blueprints/victim/rename", id: pwned-by-call}}
"""


def _victim() -> Blueprint:
    victim = Blueprint.objects.create(slug="victim", title="Victim")
    victim.save_revision("title: Victim\nmodels: [fixtures:x]\n---\n- prompt: hi\n  should: [$contains: hi]\n")
    return victim


def _run(base: str) -> tuple[Response, Response]:
    """The custom model's response, and the fixtures model's (whose answer the `$call` point sends)."""
    blueprint = Blueprint.objects.create(slug=f"hostile-{Blueprint.objects.count()}", title="")
    blueprint.save_revision(HOSTILE.format(base=base))
    run = run_start.start_run(blueprint, models=["local:site", "fixtures:x"], judges=[], fresh=True)
    run.refresh_from_db()
    assert run.is_finished, run.status
    responses = Response.objects.filter(run=run)
    return (next(r for r in responses if r.model_id.startswith("local:site")),
            next(r for r in responses if r.model_id.startswith("fixtures:x")))


def _everything(response: Response) -> str:
    from runs.models import PointAssessment

    points = list(PointAssessment.objects.filter(response=response).values("reflection", "error", "score"))
    return json.dumps({"error": response.error, "points": points}, default=str)


def test_a_custom_model_or_call_aimed_at_our_own_port_is_refused_before_it_leaves(live_server, settings):
    _victim()
    port = int(live_server.url.rsplit(":", 1)[1])
    settings.EVALSITE_PORT = port
    settings.EVALSITE_CALL_HOSTS = ["127.0.0.1", "localhost"]
    for base in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://0.0.0.0:{port}"):
        if "0.0.0.0" in base:
            settings.EVALSITE_MODEL_HOSTS = ["127.0.0.1", "localhost", "0.0.0.0"]
            settings.EVALSITE_CALL_HOSTS = ["0.0.0.0"]
        response, called = _run(base)
        assert "is evalsite itself" in response.error and "No request was sent" in response.error, response.error
        assert f":{port}" in response.error
        stored = _everything(called)
        assert "`$call` is not sent" in stored and "is evalsite itself" in stored, stored
        assert Blueprint.objects.filter(slug="victim").exists() and not Blueprint.objects.filter(
            slug__startswith="pwned").exists()


def test_a_request_that_arrives_anyway_carries_the_mark_and_is_refused(live_server, settings):
    """The send-time check does not know this port (a proxy in front, a name that resolved elsewhere)."""
    _victim()
    settings.EVALSITE_PORT = 1  # not the live server's port: only the mark can stop it
    settings.EVALSITE_CALL_HOSTS = ["127.0.0.1", "localhost"]
    response, called = _run(live_server.url)
    assert response.error.startswith("403 from custom model 'local:site'"), response.error
    assert "came from evalsite's own engine" in response.error
    stored = _everything(called)
    assert "HTTP 403" in stored and "came from evalsite's own engine" in stored, stored
    assert Blueprint.objects.filter(slug="victim").exists()
    assert not Blueprint.objects.filter(slug__startswith="pwned").exists()


def test_embeddings_aimed_at_our_own_port_are_refused():
    custom = {"id": "local:emb", "url": "http://127.0.0.1:8765/v1/chat/completions", "modelName": "m",
              "inherit": "openai"}
    from blueprints.spec.schema import CustomModel

    settings = settings_from_env({}, own_addresses=OwnAddresses(ports=frozenset({8765})))

    async def main():
        async with Router(settings, custom_models=[CustomModel.model_validate(custom)]) as router:
            return await router.embed("local:emb", ["a text"])

    reason = asyncio.run(main())
    assert isinstance(reason, str) and "embeddings request is not sent" in reason and "127.0.0.1:8765" in reason


def test_every_request_the_engine_sends_carries_the_mark_a_blueprint_cannot_remove():
    import httpx

    from blueprints.spec.schema import CustomModel
    from runs.engine.types import ChatRequest

    seen = []

    def handler(request):
        seen.append(request.headers)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})

    model = CustomModel.model_validate({"id": "local:m", "url": "http://127.0.0.1:9/v1/chat/completions",
                                        "modelName": "m", "inherit": "openai",
                                        "headers": {"x-evalsite-engine": "0"}})

    async def main():
        async with Router(settings_from_env({"OPENAI_API_KEY": "sk-x" * 4}), custom_models=[model],
                          transport=httpx.MockTransport(handler)) as router:
            for model_id in ("local:m", "openai:gpt-4o-mini"):
                await router.complete(ChatRequest(model_id=model_id, messages=({"role": "user", "content": "hi"},)))

    asyncio.run(main())
    assert [h.get_list(ENGINE_HEADER) for h in seen] == [["1"], ["1"]]


def _post(url: str, body: dict, **headers) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_loopback_alone_may_read_the_api_but_not_change_anything(live_server, settings):
    _victim()
    url = f"{live_server.url}/api/blueprints/victim/rename"
    status, body = _post(url, {"id": "renamed"})
    assert status == 403 and "needs EVALSITE_API_TOKEN, even on this machine" in body["error"], body
    with urllib.request.urlopen(f"{live_server.url}/api/blueprints/victim", timeout=10) as answer:
        assert answer.status == 200  # reading stays open on loopback
    status, body = _post(url, {"id": "renamed"}, **{ENGINE_HEADER: "1"})
    assert status == 403 and "own engine" in body["error"]
    assert Blueprint.objects.filter(slug="victim").exists()
    # A page of this site in the browser, with its CSRF token, may (the Django client as a browser).
    browser = Client(enforce_csrf_checks=True)
    assert browser.post("/api/blueprints/victim/rename", data='{"id": "renamed"}',
                        content_type="application/json").status_code == 403
    browser.get("/")
    token = browser.cookies["csrftoken"].value
    answer = browser.post("/api/blueprints/victim/rename", data='{"id": "renamed"}', content_type="application/json",
                          HTTP_X_CSRFTOKEN=token)
    assert answer.status_code == 200, answer.content
    # A script sets the token on the server and sends it.
    settings.EVALSITE_API_TOKEN = "tok-" + "z" * 24
    status, body = _post(f"{live_server.url}/api/blueprints/renamed/rename", {"id": "again"},
                         Authorization="Bearer " + settings.EVALSITE_API_TOKEN)
    assert status == 200, body
    assert Blueprint.objects.filter(slug="again").exists()
    assert Run.objects.count() == 0
