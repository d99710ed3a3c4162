"""Deleting and renaming blueprints, runs and collections: in the browser, the CLI and the API.

A deleted run that is still going stops: its worker sends no new call (the fake
provider's request log says so), and what it finishes is dropped.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from blueprints.models import Blueprint, BlueprintRevision, ModelCollection
from blueprints.services import import_files
from runs import services
from runs.models import PointAssessment, PointOverride, Response, Run
from runs.review import apply_override

from .conftest import judge_rules

pytestmark = pytest.mark.django_db(transaction=True)

SOURCE = "title: Capitals\nmodels: [openai:cand-a]\n---\n- id: fr\n  prompt: Capital of France?\n  should:\n    - Names Paris\n"


def _blueprint(slug="capitals") -> Blueprint:
    return import_files([(f"{slug}.yml", SOURCE, {})], via="test").items[0].blueprint


def _finished_run(fake_provider, blueprint) -> Run:
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris."}, *judge_rules()])
    run = services.start_run(blueprint, judges=["openai:judge-a"])
    run.refresh_from_db()
    assert run.status == "done", run.error
    return run


def test_deleting_a_blueprint_in_the_browser_asks_first_and_takes_its_runs(fake_provider, client):
    blueprint = _blueprint()
    run = _finished_run(fake_provider, blueprint)
    point = PointAssessment.objects.get(response__run=run)
    apply_override(point, 0.5, reason="half right")

    page = client.get(f"/blueprints/{blueprint.slug}/delete/").content.decode()
    assert "1 revision" in page and "1 run," in page and "1 response" in page and "Keep it" in page
    assert Blueprint.objects.filter(pk=blueprint.pk).exists()  # GET deletes nothing

    answer = client.post(f"/blueprints/{blueprint.slug}/delete/")
    assert answer.status_code == 302
    assert not Blueprint.objects.filter(slug="capitals").exists()
    assert not BlueprintRevision.objects.filter(blueprint_id=blueprint.pk).exists()
    message = client.get("/runs/").content.decode()  # the message shows on the next page
    assert "Deleted the blueprint &#x27;capitals&#x27; with 1 revision and 1 run." in message
    assert not Run.objects.exists() and not Response.objects.exists() and not PointOverride.objects.exists()
    assert client.get(f"/runs/{run.pk}/").status_code == 404


def test_a_run_is_renamed_and_deleted_in_the_browser(fake_provider, client):
    run = _finished_run(fake_provider, _blueprint())
    client.post(f"/runs/{run.pk}/rename", {"name": "  baseline   before prompt fix "})
    run.refresh_from_db()
    assert run.name == "baseline before prompt fix"
    assert "baseline before prompt fix" in client.get("/runs/").content.decode()
    assert "<h1>baseline before prompt fix" in client.get(f"/runs/{run.pk}/").content.decode()

    confirm = client.get(f"/runs/{run.pk}/delete").content.decode()
    assert "1 response" in confirm and "The blueprint and its revisions stay" in confirm
    client.post(f"/runs/{run.pk}/delete")
    assert not Run.objects.exists() and Blueprint.objects.count() == 1


def test_a_run_still_going_is_cancelled_and_sends_nothing_after_it_is_deleted(fake_provider):
    blueprint = _blueprint()
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris."}, *judge_rules()])
    run = services.start_run(blueprint, judges=["openai:judge-a"], enqueue=False)
    assert run.status == "queued"
    gone = services.delete_run(run)
    assert gone == {"responses": 1, "overrides": 0, "was_running": True}
    before = len(fake_provider.requests())
    services.execute_chunk(run.pk, [])  # a task queued before the deletion does nothing
    assert len(fake_provider.requests()) == before and not Run.objects.exists()


def test_collections_are_renamed_deleted_and_may_be_empty_in_the_browser(client):
    answer = client.post("/collections/", {"name": "frontier", "models": ""}, follow=True)
    assert "Saved the collection FRONTIER" in answer.content.decode()
    assert ModelCollection.objects.get(name="FRONTIER").models == []
    client.post("/collections/FRONTIER/rename/", {"new_name": "next"})
    assert list(ModelCollection.objects.values_list("name", flat=True)) == ["NEXT"]
    refused = client.post("/collections/NEXT/rename/", {"new_name": "not valid!"}, follow=True).content.decode()
    assert "A collection name is upper case" in refused
    client.post("/collections/NEXT/delete/")
    assert not ModelCollection.objects.exists()


def test_the_cli_deletes_only_with_yes_and_renames(fake_provider):
    blueprint = _blueprint()
    run = _finished_run(fake_provider, blueprint)
    with pytest.raises(CommandError, match="Add --yes"):
        call_command("library", "delete", "run", str(run.pk))  # no terminal to ask on
    assert Run.objects.filter(pk=run.pk).exists()
    out = io.StringIO()
    call_command("library", "rename", "run", str(run.pk), "first try", stdout=out)
    assert Run.objects.get(pk=run.pk).name == "first try"
    call_command("library", "rename", "blueprint", "capitals", "capitals-v2", stdout=out)
    call_command("library", "list", "runs", stdout=out)
    assert "first try" in out.getvalue()
    with pytest.raises(CommandError, match="already used"):
        _blueprint("other")
        call_command("library", "rename", "blueprint", "other", "capitals-v2")
    call_command("library", "delete", "blueprint", "capitals-v2", "--yes", stdout=out)
    assert "deleted the blueprint 'capitals-v2' with 1 revision(s), 1 run(s)" in out.getvalue()
    assert not Run.objects.exists()
    with pytest.raises(CommandError, match="no run '999'"):
        call_command("library", "delete", "run", "999", "--yes")


def test_the_api_deletes_and_renames_and_answers_json_errors(fake_provider, client):
    blueprint = _blueprint()
    run = _finished_run(fake_provider, blueprint)
    ModelCollection.store("CORE", ["openai:cand-a"])

    renamed = client.post(f"/api/runs/{run.pk}/rename", {"name": "nightly"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "nightly"
    moved = client.post("/api/blueprints/capitals/rename", {"id": "caps"}, content_type="application/json")
    assert moved.json()["id"] == "caps"
    bad = client.post("/api/collections/CORE/rename", {"name": "no good"}, content_type="application/json")
    assert bad.status_code == 400 and "upper case" in bad.json()["error"]
    assert client.post("/api/collections/CORE/rename", {"name": "main"},
                       content_type="application/json").json()["name"] == "MAIN"

    deleted = client.delete(f"/api/runs/{run.pk}")
    assert deleted.json() == {"deleted": {"run": run.pk, "responses": 1, "overrides": 0}, "wasRunning": False}
    assert client.delete("/api/blueprints/caps").json()["deleted"]["revisions"] == 1
    assert client.delete("/api/collections/MAIN").json() == {"deleted": {"collection": "MAIN"}}

    for missing in (f"/api/runs/{run.pk}", "/api/blueprints/caps", "/api/collections/MAIN", "/api/nothing-here"):
        answer = client.get(missing)
        assert answer.status_code == 404 and answer["Content-Type"] == "application/json", missing
        assert answer.json()["error"]
    wrong = client.put("/api/blueprints/x")
    assert wrong.status_code in (404, 405) and wrong["Content-Type"] == "application/json"


def test_a_missing_page_answers_in_the_sites_layout(client):
    page = client.get("/runs/424242/")
    assert page.status_code == 404
    html = page.content.decode()
    assert "<h1>Not found</h1>" in html and 'href="/runs/"' in html and "<main" in html
