"""Re-run one cell afresh, and annotate a response (thumbs and a comment) that the exports carry.
Runs are real (the worker path, tasks inline) against the fake LLM server."""

from __future__ import annotations

import csv
import io
import json

import pytest

from runs import annotations, overrides
from runs.models import Annotation, PointAssessment, PointOverride, Response, Run
from tests.web.conftest import htmx
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider, make_run, script  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _one(run, prompt_id="capital", model="cand-bad") -> Response:
    return Response.objects.get(run=run, prompt_id=prompt_id, model_id__endswith=model)


def test_rerunning_a_cell_asks_the_model_and_judges_again_not_the_cache(client, fake_provider):
    # Not fresh: a second ask of the same prompt would come from the cache.
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",), fresh=False)
    before = _one(run)
    assert before.text == "I think it is Lyon."
    PointOverride.objects.create(assessment=PointAssessment.objects.filter(response=before).first(), score=1.0,
                                 reason="checked by hand")
    annotations.save_annotation(before, thumbs="down", comment="Wrong city.")
    done_before = Run.objects.get(pk=run.pk).items_done
    sent_before = len(fake_provider.requests())
    # The model now answers differently; only a call that skips the cache can see it.
    script(fake_provider, [{"model": "cand-bad", "match": "capital of France", "reply": "Paris, on the Seine."}])

    page = client.get(f"/runs/{run.pk}/responses/{before.pk}/").content.decode()
    assert "Re-run this cell" in page and "Its 1 override goes with the old points." in page
    answer = client.post(f"/runs/{run.pk}/responses/{before.pk}/rerun", follow=True)

    after = _one(run)
    run.refresh_from_db()
    assert after.pk == before.pk and after.text == "Paris, on the Seine." and after.status == "done"
    assert not after.fresh_requested
    assert len(fake_provider.requests()) > sent_before + 1  # the model and the judges, asked again
    assert run.status == "done" and run.items_done == done_before == run.items_total
    assert not PointOverride.objects.filter(assessment__response=after).exists()
    assert Annotation.objects.get(response=after).comment == "Wrong city."  # kept, and marked as earlier
    text = answer.content.decode()
    assert "Re-running capital" in text and "Its 1 override went with its old points." in text
    assert "Written before this response was re-run" in text
    assert after.call_log()[0]["source"] == "provider"  # not "cache"


def test_a_response_still_waiting_cannot_be_rerun(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",))
    row = _one(run)
    Response.objects.filter(pk=row.pk).update(status="running")

    page = client.post(f"/runs/{run.pk}/responses/{row.pk}/rerun", follow=True).content.decode()

    assert "Not re-run: it is running: it runs already" in page
    assert _one(run).text == "I think it is Lyon."
    # The page of a response under way polls until it is stored, then reloads.
    state = client.get(f"/runs/{run.pk}/responses/{row.pk}/state")
    assert state.content == b"running\xe2\x80\xa6" and "HX-Refresh" not in state.headers
    Response.objects.filter(pk=row.pk).update(status="done")
    assert client.get(f"/runs/{run.pk}/responses/{row.pk}/state").headers["HX-Refresh"] == "true"


def test_an_annotation_is_saved_shown_cleared_and_exported(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",))
    row = _one(run)
    url = f"/runs/{run.pk}/responses/{row.pk}/annotation"

    part = client.post(url, {"thumbs": "down", "comment": "Says <b>Lyon</b>.", "who": "Ana"}, **htmx())
    html = part.content.decode()
    assert part.status_code == 200 and "Saved." in html and "Says &lt;b&gt;Lyon&lt;/b&gt;." in html
    assert 'value="down" checked' in html

    exported = client.get(f"/runs/{run.pk}/export.json").json()
    trial = exported["evalsite"]["responses"]["capital"][row.variant_id]["trials"][0]
    assert trial["annotation"]["thumbs"] == "down" and trial["annotation"]["comment"] == "Says <b>Lyon</b>."
    assert trial["annotation"]["who"] == "Ana"
    rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run.pk}/export.csv").content.decode())))
    mine = [r for r in rows if r["prompt_id"] == "capital"]
    assert mine and all(r["thumbs"] == "down" and r["comment"] == "Says <b>Lyon</b>." for r in mine)
    assert all(r["thumbs"] == "" for r in rows if r["prompt_id"] != "capital")

    client.post(url, {"thumbs": "", "comment": "  "}, **htmx())
    assert not Annotation.objects.filter(response=row).exists()
    assert json.dumps(client.get(f"/runs/{run.pk}/export.json").json()).count('"annotation": null') == 3


def test_a_refused_annotation_keeps_what_was_typed_and_saves_nothing(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-bad",), judges=("openai:judge-a",))
    row = _one(run)
    url = f"/runs/{run.pk}/responses/{row.pk}/annotation"

    html = client.post(url, {"thumbs": "sideways", "comment": "Keep me"}, **htmx()).content.decode()
    assert "Not saved: thumbs must be up, down or empty" in html and "Keep me" in html
    html = client.post(url, {"thumbs": "up", "comment": "x" * 10_001}, **htmx()).content.decode()
    assert "keep it under 10,000" in html and 'value="up" checked' in html
    assert not Annotation.objects.filter(response=row).exists()
    # Without htmx: back to the page with the message.
    page = client.post(url, {"thumbs": "sideways"}, follow=True).content.decode()
    assert "Annotation not saved: thumbs must be up, down or empty" in page
