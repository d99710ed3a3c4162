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
from blueprints.importing import import_files
from runs import start as run_start
from runs import work as run_work
from runs.models import PointAssessment, PointOverride, Response, Run
from runs.overrides import apply_override

from .conftest import judge_rules

pytestmark = pytest.mark.django_db(transaction=True)

SOURCE = "title: Capitals\nmodels: [openai:cand-a]\n---\n- id: fr\n  prompt: Capital of France?\n  should:\n    - Names Paris\n"


def _blueprint(slug="capitals", text=SOURCE) -> Blueprint:
    return import_files([(f"{slug}.yml", text, {})], via="test").items[0].blueprint


def _finished_run(fake_provider, blueprint) -> Run:
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris."}, *judge_rules()])
    run = run_start.start_run(blueprint, judges=["openai:judge-a"])
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
    run = run_start.start_run(blueprint, judges=["openai:judge-a"], enqueue=False)
    assert run.status == "queued"
    gone = run_work.delete_run(run)
    assert gone == {"responses": 1, "overrides": 0, "was_running": True}
    before = len(fake_provider.requests())
    run_work.execute_chunk(run.pk, [])  # a task queued before the deletion does nothing
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
        _blueprint("other", SOURCE.replace("title: Capitals", "title: Other"))  # the same text would be capitals-v2
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


# --- one run plan from every door (issue: browser runs dropped the blueprint's judges) -------------------

JUDGED = """title: Standard judges
models: [openai:cand-a, openai:cand-b]
evaluationConfig:
  llm-coverage:
    judges:
      - {id: judge-a, model: openai:judge-a, approach: standard}
      - {id: judge-b, model: openai:judge-b, approach: standard}
---
- id: fr
  prompt: Capital of France?
  should:
    - Names Paris
"""


def _form_post(client, slug: str, **changes) -> dict:
    """What a browser posts when the Start button is pressed: every field of the form as the page renders it."""
    import re

    html = client.get(f"/runs/form/{slug}/").content.decode()  # the run form the blueprint page embeds
    form = html.split('<section id="run-form"')[1].split("</form>")[0]
    data: dict[str, list[str]] = {}
    for tag in re.findall(r"<input[^>]*>", form):
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        kind = re.search(r'type="([^"]+)"', tag)
        if not name or (kind and kind.group(1) == "checkbox" and "checked" not in tag):
            continue
        data.setdefault(name.group(1), []).append(value.group(1) if value else "")
    data.update(changes)
    return data


def test_the_browser_the_cli_and_the_api_run_the_same_plan(fake_provider, client, tmp_path):
    fake_provider.script([{"model": "cand-", "match": ".", "reply": "Paris."}, *judge_rules()])
    blueprint = import_files([("standard.yml", JUDGED, {})], via="test").items[0].blueprint

    client.post("/runs/start", _form_post(client, "standard"))
    browser = Run.objects.latest("pk")
    path = tmp_path / "standard.yml"
    path.write_text(JUDGED)
    call_command("run_blueprint", "standard", stdout=io.StringIO(), stderr=io.StringIO())
    cli = Run.objects.latest("pk")
    api = client.post("/api/runs", {"blueprintId": "standard"}, content_type="application/json").json()
    api = Run.objects.get(pk=api["id"])

    assert browser.judges == cli.judges == api.judges
    assert [(j["id"], j["approach"]) for j in browser.judges["judges"]] == [("judge-a", "standard"),
                                                                           ("judge-b", "standard")]
    assert browser.resolved_models == cli.resolved_models == ["openai:cand-a", "openai:cand-b"]
    verdicts = PointAssessment.objects.filter(response__run=browser).first().verdicts
    assert [v["judgeId"] for v in verdicts] == ["judge-a(openai:judge-a)", "judge-b(openai:judge-b)"]
    assert blueprint.runs.count() == 3


def test_the_form_sends_only_what_the_user_changed(fake_provider, client):
    fake_provider.script([{"model": "cand-", "match": ".", "reply": "Paris."}, *judge_rules()])
    import_files([("standard.yml", JUDGED, {})], via="test")
    post = _form_post(client, "standard", judges=["judge-b(openai:judge-b)"], models=["openai:cand-a"],
                      add_models=["openai:cand-c"], trials=["2"], fresh=["on"])
    client.post("/runs/start", post)
    run = Run.objects.latest("pk")
    assert [(j["id"], j["approach"]) for j in run.judges["judges"]] == [("judge-b", "standard")]
    assert run.resolved_models == ["openai:cand-a", "openai:cand-c"]
    assert run.options["trials"] == 2 and run.options["fresh"] is True
    assert run.items_total == 4  # 1 prompt x 2 models x 2 trials

    none = _form_post(client, "standard", judges=[])
    answer = client.post("/runs/start", none, follow=True).content.decode()
    assert "tick at least one judge" in answer
