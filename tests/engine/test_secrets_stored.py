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
from tests.web.run_support import (  # noqa: F401
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


# -- forms a page turns back into the secret (issue "Hostile input, third round", case 7) ---------------


class _HostileEndpoint:
    """A chat endpoint on 127.0.0.1 that echoes its Authorization header in the forms pages decode: HTML
    character references in the answer (markdown renders them), a body with every character ``\\u``-escaped
    (the "Every call" page decodes it), and a body whose secret straddles the call log's 64,000-character cut."""

    def __init__(self):
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                secret = self.headers["Authorization"].removeprefix("Bearer ")
                body = outer.body(data["messages"][-1]["content"], secret)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"

    @staticmethod
    def body(prompt: str, secret: str) -> bytes:
        decimal = "".join(f"&#{ord(c)};" for c in secret)
        hexa = "".join(f"&#x{ord(c):x};" for c in secret)
        named = secret.replace("-", "&#45;").replace("_", "&lowbar;")
        if "escaped" in prompt:  # the whole content \u-escaped, the secret as is and as entities inside it
            content = f"My key: {secret}, or **{decimal}**, or {hexa}, or {named}."
            escaped = "".join(f"\\u{ord(c):04x}" for c in content)
            return ('{"choices": [{"message": {"role": "assistant", "content": "%s"}, "finish_reason": "stop"}], '
                    '"usage": {"prompt_tokens": 1, "completion_tokens": 1}}' % escaped).encode()
        # The raw body is cut at 64,000 characters for the call log: the cut falls on the secret's last character.
        head = '{"choices": [{"message": {"role": "assistant", "content": "'
        padding = "x" * (64_000 - len(head) - (len(secret) - 1))
        content = padding + secret + " and more"
        return (head + content + '"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, '
                '"completion_tokens": 1}}').encode()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


HOSTILE = """\
title: Hostile echoes
models:
  - id: proxy:echo
    url: {url}
    modelName: m
    inherit: openai
    headers: {{Authorization: "Bearer ${{PROXY_KEY}}"}}
---
- id: escaped
  prompt: Answer escaped.
  should: [$contains: key]
- id: long
  prompt: Answer long.
  should: [$contains: more]
"""


def test_secrets_a_page_would_decode_or_a_cut_would_halve_never_reach_a_page(client, settings, monkeypatch):
    from runs import start as run_start

    settings.EVALSITE_BLUEPRINT_ENV = ["PROXY_KEY"]
    monkeypatch.setenv("PROXY_KEY", SECRET)
    endpoint = _HostileEndpoint()
    try:
        run = run_start.start_run(make_blueprint(HOSTILE.format(url=endpoint.url), slug="hostile-echoes"),
                                  models=["proxy:echo"], judges=[], fresh=True)
    finally:
        endpoint.close()
    run.refresh_from_db()
    assert run.is_finished, run.status
    escaped = Response.objects.get(run=run, prompt_id="escaped")
    long = Response.objects.get(run=run, prompt_id="long")
    assert not escaped.error and not long.error, (escaped.error, long.error)
    pages = {
        "response page": client.get(f"/runs/{run.pk}/responses/{escaped.pk}/"),
        "every call (escaped)": client.get(f"/runs/{run.pk}/responses/{escaped.pk}/calls"),
        "every call (cut)": client.get(f"/runs/{run.pk}/responses/{long.pk}/calls"),
        "prompt page": client.get(f"/runs/{run.pk}/prompts/{escaped.prompt_index}/"),
        "report": client.get(f"/runs/{run.pk}/report.html"),
    }
    for place, page in pages.items():
        assert page.status_code == 200, place
        html = b"".join(page.streaming_content).decode() if page.streaming else page.content.decode()
        assert SECRET not in html and SECRET[:24] not in html, place
        assert not leaks(html), (place, leaks(html))
    assert escaped.text.startswith("My key: [redacted], or **[redacted]**, or [redacted], or [redacted].")
    # The body was cut after it was redacted: the cut never halves a secret.
    answer = json.dumps(long.call_log()[0]["answer"])
    assert SECRET[:20] not in answer and REDACTED in answer
