"""Every error the JSON API gives is JSON with the reason (issue "Hostile input, third round", case 9): a number
too large to read, a body too large, a chunked body, a server failure; never Django's HTML pages."""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings

from runs.models import Response, Run

pytestmark = pytest.mark.django_db(transaction=True)

OFFLINE = """\
title: Offline
models: [fixtures:x]
fixtures: {responses: {p: {default: "hello world"}}}
---
- id: p
  prompt: Say hello.
  should: [$contains: hello]
"""
HUGE = "9" * 400  # a JSON number Python reads as an int, too large for a float


def is_json_error(response, status: int, words: str) -> None:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    assert words in response.json()["error"], response.json()


def test_a_400_digit_budget_is_a_json_400_at_start_and_on_resume(client):
    body = '{"blueprint": %s, "budgetUsd": %s}' % (json.dumps(OFFLINE), HUGE)
    is_json_error(client.post("/api/runs", data=body, content_type="application/json"), 400,
                  "`budgetUsd`: the budget is too large")
    assert not Run.objects.exists()
    started = client.post("/api/runs", data=json.dumps({"blueprint": OFFLINE}), content_type="application/json")
    assert started.status_code == 201
    run = Run.objects.get(pk=started.json()["id"])
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    Response.objects.filter(run=run).update(status="pending")
    resumed = client.post(f"/api/runs/{run.pk}/resume", data='{"budgetUsd": %s}' % HUGE,
                          content_type="application/json")
    is_json_error(resumed, 400, "the budget is too large")
    run.refresh_from_db()
    assert run.status == "cancelled" and run.budget_usd is None


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2_000)
def test_a_body_too_large_is_a_json_413_naming_the_limit(client):
    body = json.dumps({"blueprint": OFFLINE + "#" * 5_000})
    is_json_error(client.post("/api/runs", data=body, content_type="application/json"), 413,
                  "larger than this server reads (2,000 bytes)")
    # The same when the body is not JSON.
    is_json_error(client.post("/api/runs", data="x" * 5_000, content_type="text/plain"), 413, "larger than")
    assert not Run.objects.exists()


def test_a_chunked_body_is_refused_with_the_reason_not_read_as_empty(client):
    answer = client.generic("POST", "/api/runs", data=b"", content_type="application/json",
                            HTTP_TRANSFER_ENCODING="chunked")
    is_json_error(answer, 411, "send the body with a Content-Length header")
    assert not Run.objects.exists()


def test_a_server_failure_under_the_api_is_json_and_pages_keep_their_html(monkeypatch):
    from runs import api

    def broken(*args, **kwargs):
        raise RuntimeError("internal detail 42")

    monkeypatch.setattr(api, "run_status", broken)
    client = Client(raise_request_exception=False)
    started = client.post("/api/runs", data=json.dumps({"blueprint": OFFLINE}), content_type="application/json")
    is_json_error(started, 500, "the server failed while handling this request (RuntimeError)")
    assert "internal detail" not in started.json()["error"]
    page = client.get("/no/such/page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def _asgi_post(app, path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]):
    """One POST through an ASGI app, its body in ``chunks``; the messages it sent back and the chunks it read."""
    import asyncio

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), *headers], "client": ("127.0.0.1", 5000),
             "server": ("127.0.0.1", 8000)}
    pending = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
               for i, chunk in enumerate(chunks)]
    read, sent = [], []

    async def receive():
        if pending:
            read.append(pending[0]["body"])
            return pending.pop(0)
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    return sent, read


def test_the_served_app_refuses_a_body_past_the_limit_before_reading_it():
    from evalsite.asgi import application

    application.limit = 1_000  # the limit follows the settings; small here
    try:
        sent, read = _asgi_post(application, "/api/runs", [b"{" * 10, b"x" * 600, b"x" * 600, b"x" * 600],
                                [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")])
        assert sent[0]["status"] == 413 and len(read) == 3  # stopped at the chunk that passed the limit
        assert json.loads(sent[1]["body"])["error"].startswith("the body is larger than this server reads (1,000")
        sent, read = _asgi_post(application, "/runs/start", [b"x" * 5_000],
                                [(b"content-length", b"5000"), (b"content-type", b"text/plain")])
        assert sent[0]["status"] == 413 and read == []  # by its Content-Length: nothing read
    finally:
        application.limit = None
