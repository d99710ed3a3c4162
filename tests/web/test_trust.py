"""How far to trust each judge, from reviewers' overrides: per judge model, how often its verdict stands,
its mean bias and the points it gets wrong; on the run page and across runs. Runs are real (the worker
path) against the fake LLM server, where judge-a and judge-b disagree on one point."""

from __future__ import annotations

import pytest

from runs import annotations, overrides, trust
from runs.models import PointAssessment, Response
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider, make_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _point(run, prompt_id: str, model: str, text: str) -> PointAssessment:
    return PointAssessment.objects.get(response__run=run, response__prompt_id=prompt_id,
                                       response__model_id__endswith=model, text__icontains=text)


def test_an_override_tells_which_judge_stands_and_which_leans(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-good",))
    assert trust.judge_trust(Response.objects.filter(run=run)).empty  # nothing reviewed: nothing claimed
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "No reviewer has overridden or confirmed a point in this run yet" in page

    # On "Mentions the Seine", judge-a says met (1.0), judge-b unmet (0.0); the reviewer sides with judge-a.
    seine = _point(run, "capital", "cand-good", "Seine")
    scores = {v["model"]: v["score"] for v in seine.verdicts}
    assert scores == {"openai:judge-a": 1.0, "openai:judge-b": 0.0}
    overrides.apply_override(seine, 1.0, reason="It does name the Seine.")

    report = trust.judge_trust(Response.objects.filter(run=run))
    by_model = {j.model: j for j in report.judges}
    a, b = by_model["openai:judge-a"], by_model["openai:judge-b"]
    assert report.reviewed_responses == 1 and report.overrides == 1
    # Only the point the reviewer changed counts: the response's other points were not looked at.
    assert a.points == b.points == 1
    assert a.stands == 1 and b.stands == 0
    assert b.mean_bias == pytest.approx(-1.0) and b.leaning == "harsher than the reviewers"
    assert [(w.prompt_id, w.judge_score, w.human_score) for w in b.wrong] == [("capital", 0.0, 1.0)]
    assert report.judges[0].model == "openai:judge-b"  # the least trusted first

    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "How far to trust each judge" in page and "harsher than the reviewers" in page
    assert f"/runs/{run.pk}/responses/{seine.response_id}/#point-{seine.position + 1}" in page


def test_across_runs_the_judges_page_adds_up_every_reviewed_run(client, fake_provider):
    first = make_run(fake_provider, models=("openai:cand-good",))
    second = make_run(fake_provider, blueprint=first.blueprint, models=("openai:cand-good",))
    for run in (first, second):
        overrides.apply_override(_point(run, "capital", "cand-good", "Seine"), 1.0, reason="Named.")

    page = client.get("/judges/?blueprint=results-fixture").content.decode()
    assert "From 2 reviewed responses (2 overrides)" in page
    assert "2 points" in page  # judge-b's two wrong points, one per run
    assert f"(run {first.pk})" in page and f"(run {second.pk})" in page
    unknown = client.get("/judges/?blueprint=nope").content.decode()
    assert "There is no blueprint 'nope': showing every run." in unknown


def test_an_annotation_alone_reviews_no_point_and_a_confirmed_should_not_is_compared_after_inversion(
        client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",))
    lyon = _point(run, "capital", "cand-bad", "Lyon")
    assert lyon.inverted and lyon.score == 0.0  # the judge says it names Lyon: the should-not point fails
    annotations.save_annotation(Response.objects.get(pk=lyon.response_id), thumbs="down", comment="Lyon, no.")
    assert trust.judge_trust(Response.objects.filter(run=run)).empty  # a thumbs down says nothing of a point

    # The reviewer confirms the judge through the page's form: the point counts, the score stays.
    url = f"/runs/{run.pk}/responses/{lyon.response_id}/points/{lyon.position}/confirm"
    page = client.post(url, follow=True).content.decode()
    assert "the judges&#x27; score is confirmed" in page or "the judges' score is confirmed" in page
    lyon.refresh_from_db()
    assert lyon.score == 0.0
    report = trust.judge_trust(Response.objects.filter(run=run))
    judge = report.judges[0]
    assert report.overrides == 0 and judge.points == 1 and judge.stands == 1 and judge.mean_bias == 0

    # The API says the same, and takes it back.
    api = f"/api/runs/{run.pk}/responses/{lyon.response_id}/points/{lyon.position}/confirm"
    gone = client.delete(api)
    assert gone.status_code == 200 and "taken back" in gone.json()["message"]
    assert trust.judge_trust(Response.objects.filter(run=run)).empty
    again = client.post(api, "{}", content_type="application/json")
    assert again.status_code == 200 and not trust.judge_trust(Response.objects.filter(run=run)).empty
    # An overridden point cannot also be confirmed: the reviewer's own score already says what holds.
    overrides.apply_override(lyon, 1.0, reason="It does not name Lyon.")
    refused = client.post(api, "{}", content_type="application/json")
    assert refused.status_code == 409 and "remove it first" in refused.json()["error"]
