"""What bounds one item of a run: its wall-clock budget, how often it may be claimed, a cancel that
does not wait for it, and an item whose every judge call failed. Through the worker path (tasks
inline, the fake LLM server as models and judges); real qcluster workers are in test_workers.py."""

import csv
import io
import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from blueprints.importing import import_files
from runs import start as run_start
from runs import work as run_work
from runs.api import run_status
from runs.exports import run_to_csv, run_to_json
from runs.models import Response, Run

from .conftest import judge_rules

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = """title: Limits
---
- id: one
  prompt: Say one
  should: [$contains: one]
- id: two
  prompt: Say two
  should: [$contains: two]
"""

JUDGED = """title: Judged
---
- id: judged
  prompt: Say hello
  should:
    - Greets the reader
    - $contains: hello
"""


def blueprint(text=TEXT):
    return import_files([("limits.yml", text, {})], via="test").items[0].blueprint


@pytest.fixture
def small_budget(settings):
    settings.EVALSITE_LIMITS = replace(settings.EVALSITE_LIMITS, item_budget_s=1.0)


def test_an_item_over_its_budget_is_failed_with_the_reason_and_the_run_finishes(fake_provider, small_budget):
    run = run_start.start_run(blueprint(), models=["openai:steady", "openai:budget-always-hang"])
    run.refresh_from_db()
    assert run.status == "done", list(Response.objects.filter(run=run).values("status", "error", "attempts"))
    assert (run.items_total, run.items_done, run.items_failed) == (4, 4, 2)
    stuck = Response.objects.filter(run=run, model_id="openai:budget-always-hang")
    assert {r.status for r in stuck} == {"failed"}
    assert all(r.score is None and r.error.startswith("took longer than 1 s") for r in stuck), stuck[0].error
    assert all("EVALSITE_ITEM_BUDGET_S" in r.not_evaluated_reason for r in stuck)
    assert {r.status for r in Response.objects.filter(run=run, model_id="openai:steady")} == {"done"}
    assert run.aggregates["variants"]["openai:budget-always-hang[temp:0]"]["failed"] == 2
    page = Client().get(f"/runs/{run.pk}/")
    assert page.status_code == 200


def _stale(run, *, attempts, lapsed=True):
    row = Response.objects.filter(run=run).order_by("pk").first()
    Response.objects.filter(pk=row.pk).update(
        status="running", claimed_by="elsewhere:4242:abcd1234", attempts=attempts,
        claimed_at=timezone.now() - (run_work.claim_lease() + timedelta(seconds=5) if lapsed else timedelta(0)))
    return row.pk


def test_an_item_whose_lease_lapsed_too_often_is_failed_not_handed_out_again(fake_provider):
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    stuck = _stale(run, attempts=run_work.MAX_CLAIMS)
    run_work.recover_stale_items()  # hands the run out again: the chunk fails the item instead of running it
    run.refresh_from_db()
    assert run.status == "done" and (run.items_done, run.items_failed) == (2, 1)
    row = Response.objects.get(pk=stuck)
    assert row.status == "failed" and row.score is None
    assert f"stopped answering {run_work.MAX_CLAIMS} times" in row.error
    assert [r["messages"][-1]["content"] for r in fake_provider.requests()] == ["Say two"]
    # "Retry failed" starts its count afresh and runs it.
    assert run_work.retry_failed(run) == 1
    row = Response.objects.get(pk=stuck)
    run.refresh_from_db()
    assert row.status == "done" and row.attempts == 1 and run.items_failed == 0


def test_an_item_with_claims_left_is_run_again(fake_provider):
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    stuck = _stale(run, attempts=run_work.MAX_CLAIMS - 1)
    run_work.recover_stale_items()
    run.refresh_from_db()
    assert run.status == "done" and run.items_failed == 0
    assert Response.objects.get(pk=stuck).attempts == run_work.MAX_CLAIMS


def test_cancel_ends_the_run_at_once_while_a_worker_is_stuck_in_an_item(fake_provider):
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    stuck = _stale(run, attempts=1, lapsed=False)  # a live worker elsewhere, in the middle of it
    run_work.cancel_run(run)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.finished_at is not None
    assert Client().get(f"/runs/{run.pk}/").status_code == 200
    assert run_status(run, type("R", (), {"build_absolute_uri": lambda self, u: u})())["status"] == "cancelled"

    # Its lease lapses: the item goes back to pending (it did not run), the run stays cancelled.
    Response.objects.filter(pk=stuck).update(claimed_at=timezone.now() - run_work.claim_lease() * 2)
    run_work.recover_stale_items()
    run.refresh_from_db()
    assert Response.objects.get(pk=stuck).status == "pending" and run.status == "cancelled"
    assert not fake_provider.requests()


def test_a_worker_that_comes_back_after_a_cancel_is_counted_in_the_aggregates(fake_provider):
    run = run_start.start_run(blueprint(), models=["openai:returns-after-cancel-latency-1500ms"], enqueue=False)
    first = list(Response.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))[:1]
    worker = threading.Thread(target=run_work.execute_chunk, args=(run.pk, first))
    worker.start()
    try:
        deadline = time.monotonic() + 120  # generous: on a loaded machine the worker's first queries can queue
        while time.monotonic() < deadline and not any(r["model"] == "returns-after-cancel-latency-1500ms"
                                                      for r in fake_provider.requests()):
            time.sleep(0.05)
        assert fake_provider.requests("returns-after-cancel-latency-1500ms"), "the worker never sent its call"
        run_work.cancel_run(run)  # while the worker waits for its model's answer
        run.refresh_from_db()
        assert run.status == "cancelled" and Response.objects.get(pk=first[0]).status == "running"
        assert run.aggregates["overall"]["mean"] is None
    finally:
        worker.join(60)
    # The worker finished the item it held: stored, and the cancelled run's aggregates include it.
    run.refresh_from_db()
    assert Response.objects.filter(pk=first[0]).values("status", "error", "attempts")[0]["status"] == "done", \
        Response.objects.filter(pk=first[0]).values("status", "error", "attempts")[0]
    assert run.status == "cancelled" and run.items_done == 1
    assert run.aggregates["overall"]["mean"] == 1.0


def test_an_item_whose_every_judge_call_failed_is_failed_and_not_evaluated_everywhere(fake_provider):
    fake_provider.script(judge_rules())
    run = run_start.start_run(blueprint(JUDGED), models=["openai:steady"], judges=["openai:judge-always-401"])
    run.refresh_from_db()
    assert run.status == "done"
    assert (run.items_done, run.items_failed, run.judge_calls_failed) == (1, 1, 1)
    row = Response.objects.get(run=run)
    assert row.status == "failed" and row.score is None and row.judge_errors == 1
    assert row.not_evaluated_reason.startswith("every judge call failed")
    assert row.text  # the generation is kept: "retry failed" judges it again without generating
    assert run.aggregates["variants"]["openai:steady[temp:0]"] | {} and \
        run.aggregates["variants"]["openai:steady[temp:0]"]["failed"] == 1
    assert run.aggregates["variants"]["openai:steady[temp:0]"]["mean"] is None
    client = Client()
    page = client.get(f"/runs/{run.pk}/responses/{row.pk}/") if False else client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    status = client.get(f"/api/runs/{run.pk}").json()
    assert status["items"] == {"total": 1, "done": 1, "failed": 1}
    exported = run_to_json(run)
    assert "every judge call failed" in str(exported)
    rows = list(csv.DictReader(io.StringIO(run_to_csv(run))))
    assert rows and all(r["response_score"] == "" for r in rows)


def test_results_a_worker_stores_while_it_stops_are_never_dropped(monkeypatch):
    """The half-second flush may be waiting for the database thread when the work ends; the final
    store must wait for it, not cancel it (a cancelled flush lost its batch and the item went back
    to pending)."""
    import asyncio

    stored, started = [], threading.Event()

    def slow_save(run_id, token, batch):
        started.set()
        time.sleep(0.2)
        stored.extend(batch)
        return []

    monkeypatch.setattr(run_work, "save_results", slow_save)

    async def work():
        saver = run_work._Saver(1, "token")
        saver.start(every_s=0.01)
        await saver.add("an item")
        while not started.is_set():  # the timer's flush has taken the batch and waits for the database
            await asyncio.sleep(0.005)
        await saver.close()
        return list(stored)

    assert asyncio.run(work()) == ["an item"]
