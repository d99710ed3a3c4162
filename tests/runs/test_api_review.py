"""The API's doors to review: re-run one response afresh, annotate it, and read how far to trust each judge.
Runs are real (tasks inline) against the fake LLM server, where judge-a and judge-b disagree on one point."""

from __future__ import annotations

import json

import pytest

from runs import annotations, overrides
from runs.models import PointAssessment, Response
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider, make_run, script  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def post(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def test_annotate_a_response_read_it_back_and_remove_it(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",))
    response = Response.objects.get(run=run, prompt_id="capital")
    url = f"/api/runs/{run.pk}/responses/{response.pk}/annotation"

    assert client.get(url).json() == {"response": response.pk, "annotation": None}
    saved = post(client, url, {"thumbs": "down", "comment": "Lyon again.", "who": "ci"}).json()
    assert saved["annotation"]["thumbs"] == "down" and saved["annotation"]["comment"] == "Lyon again."
    exported = client.get(f"/api/runs/{run.pk}/results").json()
    assert exported["evalsite"]["responses"]["capital"][response.variant_id]["trials"][0]["annotation"]["who"] == "ci"

    bad = post(client, url, {"thumbs": "sideways"})
    assert bad.status_code == 400 and "thumbs must be up, down or empty" in bad.json()["error"]
    assert post(client, url, {"thumbs": 1}).status_code == 400
    assert "unknown key stars" in post(client, url, {"stars": 5}).json()["error"]
    assert client.delete(url).json()["annotation"] is None
    assert client.get(f"/api/runs/{run.pk}/responses/999999/annotation").status_code == 404


def test_rerun_one_response_through_the_api(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",), fresh=False)
    response = Response.objects.get(run=run, prompt_id="capital")
    script(fake_provider, [{"model": "cand-bad", "match": "capital of France", "reply": "Paris, on the Seine."}])

    answer = post(client, f"/api/runs/{run.pk}/responses/{response.pk}/rerun", {})

    assert answer.status_code == 202 and answer.json()["overridesRemoved"] == 0
    response.refresh_from_db()
    assert response.text == "Paris, on the Seine." and response.status == "done"
    assert client.get(f"/api/runs/{run.pk}").json()["status"] == "done"
    Response.objects.filter(pk=response.pk).update(status="running")
    refused = post(client, f"/api/runs/{run.pk}/responses/{response.pk}/rerun", {})
    assert refused.status_code == 409 and "it runs already" in refused.json()["error"]


def test_judge_trust_through_the_api(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-good",))
    seine = PointAssessment.objects.get(response__run=run, response__prompt_id="capital", text__icontains="Seine")
    overrides.apply_override(seine, 1.0, reason="It names the Seine.")

    data = client.get(f"/api/judges?run={run.pk}").json()

    assert data["reviewedResponses"] == 1 and data["overrides"] == 1
    first = data["judges"][0]
    assert first["model"] == "openai:judge-b" and first["wrongCount"] == 1 and first["meanBias"] < 0
    assert first["wrong"][0]["promptId"] == "capital" and first["wrong"][0]["reviewerScore"] == 1.0
    assert client.get("/api/judges?blueprint=results-fixture").json()["overrides"] == 1
    assert client.get("/api/judges?blueprint=nope").status_code == 404
    assert client.get("/api/judges?run=x").status_code == 400
