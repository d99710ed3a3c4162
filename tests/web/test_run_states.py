"""Every page of a run answers, whatever state the run ended in: all failed, some failed, cancelled,
not evaluated, none scored. Each run here is made by a real run through the worker path."""

from __future__ import annotations

import pytest

from blueprints.importing import import_files
from runs import start as run_start
from runs import work as run_work
from runs.models import Response, Run

from tests.fakes.pytest_fixtures import FAKE_KEY, fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

JUDGED = "title: {title}\nmodels: [{models}]\n---\n- id: fr\n  prompt: Capital of France?\n  should:\n    - {point}\n"


def _run(text: str, **kwargs) -> Run:
    blueprint = import_files([("states.yml", text, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, **kwargs)
    run.refresh_from_db()
    return run


def _pages(client, run: Run) -> dict[str, int]:
    urls = [f"/runs/", f"/runs/?blueprint={run.blueprint.slug}", f"/runs/{run.pk}/", f"/runs/{run.pk}/heatmap",
            f"/runs/{run.pk}/results", f"/runs/{run.pk}/results?filter=errors&q=paris",
            f"/runs/{run.pk}/prompts/0/", f"/runs/{run.pk}/export.json", f"/runs/{run.pk}/export.csv",
            f"/runs/{run.pk}/report.html", f"/api/runs/{run.pk}", f"/api/runs/{run.pk}/results",
            f"/blueprints/{run.blueprint.slug}/", "/"]
    urls += [f"/runs/{run.pk}/responses/{pk}/{page}" for pk in Response.objects.filter(run=run).values_list("pk", flat=True)
             for page in ("", "cell")]
    return {url: client.get(url).status_code for url in urls}


def _all_ok(client, run):
    codes = _pages(client, run)
    assert {url: code for url, code in codes.items() if code != 200} == {}


def test_a_run_whose_every_item_failed(client, fake_provider, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    run = _run(JUDGED.format(title="All failed", models="anthropic:claude-x", point="Names Paris"),
               judges=["openai:judge"])
    assert run.status == "done" and run.items_failed == run.items_total == 1
    assert run.overall_score is None
    _all_ok(client, run)
    assert "All failed" in client.get("/runs/").content.decode()


def test_a_run_where_one_model_failed_and_one_answered(client, fake_provider, monkeypatch):
    from tests.runs.conftest import judge_rules

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    fake_provider.script([{"model": "cand", "match": ".", "reply": "Paris."}, *judge_rules()])
    run = _run(JUDGED.format(title="Some failed", models="openai:cand, anthropic:claude-x", point="Names Paris"),
               judges=["openai:judge"])
    assert (run.items_total, run.items_failed) == (2, 1)
    _all_ok(client, run)


def test_a_cancelled_run(client, fake_provider):
    run = _run(JUDGED.format(title="Cancelled", models="openai:cand", point="$contains: Paris"), enqueue=False)
    run_work.cancel_run(run)
    run.refresh_from_db()
    assert run.status == "cancelled"
    _all_ok(client, run)


def test_a_run_whose_points_could_not_be_evaluated(client, fake_provider, settings):
    settings.EVALSITE_DEFAULT_JUDGES = []
    settings.EVALSITE_BACKUP_JUDGE = ""
    fake_provider.script([{"model": "cand", "match": ".", "reply": "Paris."}])
    run = _run("title: No judges\nmodels: [openai:cand]\n---\n- id: fr\n  prompt: Capital?\n  should:\n"
               "    - $imatches: '(?'\n")
    assert run.status == "done"
    row = Response.objects.get(run=run)
    assert row.score is None and row.not_evaluated_reason
    _all_ok(client, run)


def test_a_run_with_nothing_to_score(client, fake_provider):
    fake_provider.script([{"model": "cand", "match": ".", "reply": "Paris."}])
    run = _run("title: Nothing to score\nmodels: [openai:cand]\n---\n- id: fr\n  prompt: Capital?\n")
    assert run.status == "done" and Response.objects.get(run=run).score is None
    _all_ok(client, run)
