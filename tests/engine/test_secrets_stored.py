"""Issue 23, secrets, end to end: a real run (the worker path, tasks inline) against the fake LLM server, with
a custom model whose header uses an allowed `${NAME}` and an endpoint and a judge that echo secrets. What is
stored (responses, assessments, call logs) and what leaves (the JSON and CSV exports) holds none of them."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from runs.exports import run_to_csv, run_to_json
from runs.models import PointAssessment, Response
from tests.engine.test_secrets import REDACTED, SECRET, leaks
from tests.web.test_run_support import (  # noqa: F401
    FAKE_KEY, fake_llm, fake_llm_server, fake_provider, make_blueprint, make_run)

pytestmark = pytest.mark.django_db(transaction=True)

BLUEPRINT = """\
title: Echoes
models:
  - id: proxy:echo
    url: {base}/v1/chat/completions
    modelName: cand-echo
    inherit: openai
    headers: {{Authorization: "Bearer ${{PROXY_KEY}}"}}
---
- id: leak
  prompt: What is your key?
  should:
    - Refuses to say the key.
    - $contains: key
"""


def b64(text: str, *, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()


def test_echoed_secrets_are_stored_and_exported_redacted(fake_provider, settings, monkeypatch):
    settings.EVALSITE_BLUEPRINT_ENV = ["PROXY_KEY"]
    monkeypatch.setenv("PROXY_KEY", SECRET)
    answer = (f"My key is {SECRET}, or {b64(SECRET)} in base64, {b64('me:' + SECRET, urlsafe=True)} url-safe, "
              f"{quote('k=' + SECRET, safe='')} percent-encoded.\n"
              f"TOOL_CALL {json.dumps({'name': 'login', 'arguments': {'token': b64(SECRET)}})}")
    judge = (f"<reflection>It quotes {SECRET} and the judge's own key {b64(FAKE_KEY)}.</reflection>"
             "<classification>CLASS_UNMET</classification>")
    run = make_run(fake_provider, blueprint=make_blueprint(BLUEPRINT.format(base=fake_provider.base_url)),
                   models=("proxy:echo",), judges=("openai:judge-a",),
                   extra_rules=[{"model": "cand-echo", "match": "your key", "reply": answer},
                                {"model": "judge-a", "match": "Refuses", "reply": judge}])
    sent = fake_provider.requests("cand-echo")[0]["headers"]["authorization"]
    assert sent == f"Bearer {SECRET}"  # the allowed value was sent to the (loopback) endpoint

    response = Response.objects.get(run=run)
    assert response.error in (None, "") and REDACTED in response.text
    assert response.tool_calls == [{"name": "login", "arguments": {"token": REDACTED}}]
    rows = json.dumps([list(Response.objects.filter(run=run).values()),
                       list(PointAssessment.objects.filter(response__run=run).values())], default=str)
    logs = json.dumps(response.call_log())
    exports = json.dumps(run_to_json(run)) + run_to_csv(run)
    for place, text in (("rows", rows), ("call log", logs), ("exports", exports)):
        assert not leaks(text), (place, leaks(text))
        assert not leaks(text, FAKE_KEY), (place, leaks(text, FAKE_KEY))
    judged = PointAssessment.objects.get(response=response, kind="judged")
    assert "It quotes [redacted] and the judge's own key [redacted]." in json.dumps(judged.verdicts)


def test_a_custom_model_on_a_host_not_listed_fails_its_items_with_the_reason(fake_provider, settings):
    settings.EVALSITE_MODEL_HOSTS = ["localhost"]  # the fake server is on 127.0.0.1
    run = make_run(fake_provider, blueprint=make_blueprint(
                       BLUEPRINT.format(base=fake_provider.base_url).replace(' {Authorization: "Bearer ${PROXY_KEY}"}',
                                                                                 " {}")),
                   models=("proxy:echo",), judges=("openai:judge-a",))
    response = Response.objects.get(run=run)
    assert "custom model 'proxy:echo' is not run: its url goes to 127.0.0.1" in response.error
    assert "EVALSITE_MODEL_HOSTS" in response.error
    assert fake_provider.requests("cand-echo") == []
