"""The JSON API: start a run from text or an id, read status and results, control it; token and loopback rules."""

import json

import pytest
from django.test import override_settings

from blueprints.models import Blueprint
from runs.models import Run

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


def post(client, url, body, **headers):
    return client.post(url, data=json.dumps(body), content_type="application/json", **headers)


def test_a_run_starts_from_text_and_its_status_and_results_can_be_read(client):
    response = post(client, "/api/runs", {"blueprint": OFFLINE})
    assert response.status_code == 201
    data = response.json()
    assert data["status"] == "done" and data["items"] == {"total": 1, "done": 1, "failed": 0}
    assert data["models"]["fixtures:x[temp:0]"]["mean"] == 1.0
    status = client.get(f"/api/runs/{data['id']}").json()
    assert status["score"] == 1.0 and status["blueprint"] == "offline"
    results = client.get(f"/api/runs/{data['id']}/results").json()
    assert results["evaluationResults"]["llmCoverageScores"]["p"]["fixtures:x[temp:0]"]["avgCoverageExtent"] == 1.0


def test_a_run_starts_from_a_stored_blueprint_id(client):
    blueprint = Blueprint.objects.create(slug="stored", title="Stored")
    blueprint.save_revision(OFFLINE)
    response = post(client, "/api/runs", {"blueprintId": "stored", "models": ["fixtures:x"]})
    assert response.status_code == 201 and response.json()["blueprint"] == "stored"


def test_a_blueprint_with_errors_is_refused_with_its_lines_and_nothing_is_kept(client):
    response = post(client, "/api/runs", {"blueprint": "- prompt: hi\n  should:\n    - $contians: x\n"})
    assert response.status_code == 422
    body = response.json()
    assert "has errors" in body["error"] and ":3:7: error: Unknown point function" in body["problems"][0]
    assert not Blueprint.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize("body, status, words", [
    ("not json", 400, "not JSON"),
    ([1, 2], 400, "JSON object"),
    ({}, 400, "send `blueprint`"),
    ({"blueprintId": "missing"}, 404, "no blueprint"),
    ({"blueprint": OFFLINE, "models": 3}, 400, "list of model ids"),
    # Hostile bodies (issue 12): each a 400 with a clear message, never a 500, and nothing kept.
    ({"blueprint": OFFLINE, "trials": "x"}, 400, "`trials` must be a whole number from 1 to 100"),
    ('{"blueprint": "x", "trials": 1e400}', 400, "`trials` must be a whole number"),
    ({"blueprint": OFFLINE, "trials": [1]}, 400, "`trials` must be a whole number"),
    ({"blueprint": OFFLINE, "trials": True}, 400, "`trials` must be a whole number"),
    ('{"blueprint": "x", "trials": NaN}', 400, "`NaN` is not a JSON value"),
    ('{"trials": ' + "1" * 5000 + "}", 400, "not usable JSON"),
    ("[" * 100_000 + "]" * 100_000, 400, "nested too deeply"),
    (b"\xff\xfe{}", 400, "the body is not"),
])
def test_bad_requests_get_a_clear_message(client, body, status, words):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    response = client.post("/api/runs", data=data, content_type="application/json")
    assert response.status_code == status and words in response.json()["error"]
    assert not Run.objects.exists()


def test_a_trials_count_that_is_a_whole_float_is_accepted(client):
    response = post(client, "/api/runs", {"blueprint": OFFLINE, "trials": 2.0})
    assert response.status_code == 201 and response.json()["items"]["total"] == 2


def test_an_alias_bomb_sent_as_the_blueprint_is_refused_with_the_limit(client):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(7))
    response = post(client, "/api/runs", {"blueprint": bomb})
    assert response.status_code == 422
    assert any("100,000 values" in p and "EVALSITE_MAX_NODES" in p for p in response.json()["problems"])


def test_a_form_post_is_refused_so_other_sites_cannot_start_runs(client):
    response = client.post("/api/runs", {"blueprint": OFFLINE})
    assert response.status_code == 415


def test_without_a_token_only_loopback_may_call(client):
    assert client.get("/api/runs/1", REMOTE_ADDR="10.1.2.3").status_code == 403
    assert client.get("/api/runs/1", REMOTE_ADDR="::1").status_code == 404


@override_settings(EVALSITE_API_TOKEN="s3cret-token")
def test_with_a_token_every_call_needs_it(client):
    assert client.get("/api/runs/1").status_code == 401
    assert client.get("/api/runs/1", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/api/runs/1", HTTP_AUTHORIZATION="Bearer s3cret-token",
                      REMOTE_ADDR="10.1.2.3").status_code == 404


def test_controls_answer_with_the_status(client):
    run_id = post(client, "/api/runs", {"blueprint": OFFLINE}).json()["id"]
    response = post(client, f"/api/runs/{run_id}/retry-failed", {})
    assert response.status_code == 200 and response.json()["status"] == "done"
    assert post(client, f"/api/runs/{run_id}/explode", {}).status_code == 404


def test_a_run_past_the_variant_limit_is_refused_before_it_expands(client):
    from blueprints.spec.limits import Limits

    with override_settings(EVALSITE_LIMITS=Limits(max_variants=2)):
        response = post(client, "/api/runs", {"blueprint": OFFLINE, "models": ["fixtures:a", "fixtures:b",
                                                                               "fixtures:c"]})
    assert response.status_code == 422
    assert "3 model variants, more than the limit of 2" in response.json()["error"]
    assert not Run.objects.exists()


@pytest.mark.parametrize("key", ["models", "judges"])
def test_an_empty_list_of_models_or_judges_is_refused_naming_it_and_nothing_starts(client, key):
    blueprint = Blueprint.objects.create(slug="stored", title="Stored")
    blueprint.save_revision(OFFLINE)

    response = post(client, "/api/runs", {"blueprintId": "stored", key: []})
    dry = post(client, "/api/runs", {"blueprint": OFFLINE, key: [" "], "dryRun": True})

    assert response.status_code == 400 and dry.status_code == 400
    body = response.json()
    assert body["field"] == key and body["error"].startswith(f"`{key}`: no {key} chosen: send at least one")
    assert not Run.objects.exists() and Blueprint.objects.count() == 1


def test_a_backup_judge_and_the_two_cost_figures(client, settings):
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    judged = OFFLINE.replace("should: [$contains: hello]", "should: [$contains: hello, Greets the reader.]")

    dry = post(client, "/api/runs", {"blueprint": judged, "dryRun": True, "backupJudge": "openai:gpt-4o-mini"}).json()
    bad = post(client, "/api/runs", {"blueprint": judged, "backupJudge": "gpt"})

    cost = dry["cost"]
    assert dry["calls"]["total"] == 1 and dry["calls"]["possibleExtra"]["backupJudge"] == 1
    assert cost["mostUsd"] == dry["costUsd"] and 0 < cost["expectedUsd"] < cost["mostUsd"]
    assert cost["unpricedCalls"] == 0
    assert "judge 'openai:gpt-4.1-mini': 150 tokens an answer" in cost["expectedBasis"][0]
    assert bad.status_code == 400 and bad.json()["field"] == "backupJudge" and "has no provider" in bad.json()["error"]
