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
