"""Re-running one response is bounded (issue 23, items 1 and 2): only that item runs, never a cancelled
run's other items; the run is running only while it is in flight and then finishes as it was; one
re-run per cell at a time; at most EVALSITE_RERUNS_PER_MINUTE per run, counted in the database.
Through the worker path (tasks inline) against the fake LLM server."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from blueprints.importing import import_files
from runs import start as run_start
from runs import work as run_work
from runs.models import Response, Run

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = """title: Re-runs
---
- id: one
  prompt: Say one
  should: [$contains: one]
- id: two
  prompt: Say two
  should: [$contains: two]
- id: three
  prompt: Say three
  should: [$contains: three]
- id: four
  prompt: Say four
  should: [$contains: four]
"""


def blueprint(text=TEXT):
    return import_files([("reruns.yml", text, {})], via="test").items[0].blueprint


def ids(run):
    return list(Response.objects.filter(run=run).order_by("prompt_index", "trial").values_list("pk", flat=True))


def cancelled_run(fake_provider, done=1):
    """A run of four items whose first ``done`` items finished before it was cancelled."""
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    run_work.execute_chunk(run.pk, ids(run)[:done])
    run_work.cancel_run(run)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.items_done == done
    fake_provider.reset()
    return run


def prompts_asked(fake_provider):
    return [r["messages"][-1]["content"] for r in fake_provider.requests()]


@pytest.fixture
def held(monkeypatch):
    """Re-runs handed to the workers are held here instead of running at once."""
    handed: list[tuple[int, int]] = []
    monkeypatch.setattr(run_work, "_enqueue_rerun", lambda run_id, rid: handed.append((run_id, rid)))
    return handed


def test_rerunning_one_cell_of_a_cancelled_run_runs_only_that_cell_and_it_ends_cancelled(fake_provider):
    run = cancelled_run(fake_provider)
    first = ids(run)[0]

    run_work.rerun_response(run, first)

    run.refresh_from_db()
    assert prompts_asked(fake_provider) == ["Say one"]  # not the three the cancel stopped
    assert run.status == "cancelled" and run.cancel_requested and run.finished_at is not None
    assert (run.items_done, run.items_failed) == (1, 0)
    assert Response.objects.get(pk=first).status == "done"
    assert sorted(Response.objects.filter(run=run).values_list("status", flat=True)) == \
        ["done", "pending", "pending", "pending"]
    assert "returnsTo" not in run.options["reruns"]
    assert Client().get(f"/api/runs/{run.pk}").json()["status"] == "cancelled"


def test_while_the_rerun_is_in_flight_the_run_is_running_and_nothing_else_is_handed_out(fake_provider, held):
    run = cancelled_run(fake_provider)
    first, *others = ids(run)

    run_work.rerun_response(run, first)

    run.refresh_from_db()
    assert held == [(run.pk, first)] and run.status == "running"
    # A task for the cancelled items (queued before the cancel) runs none of them, and does not end
    # the run under the re-run either.
    run_work.execute_chunk(run.pk, others)
    run.refresh_from_db()
    assert run.status == "running" and fake_provider.requests() == []
    # The worker's stop check reads the cancel flag the run keeps for its other items: not for the re-run.
    assert run.cancel_requested and not run_work._StopCheck(run.pk, rerunning=True)._read()

    # The minute's recovery finds the run running with nothing in flight: it hands out the re-run alone.
    run_work.recover_stale_items()

    run.refresh_from_db()
    assert prompts_asked(fake_provider) == ["Say one"] and run.status == "cancelled"
    assert Response.objects.filter(pk__in=others, status="pending").count() == 3


def test_a_cancel_during_the_rerun_ends_the_run_at_once_and_stops_the_rerun(fake_provider, held):
    run = cancelled_run(fake_provider)
    run_work.rerun_response(run, ids(run)[0])
    run_work.cancel_run(run)
    run.refresh_from_db()
    assert run.status == "cancelled" and "returnsTo" not in run.options["reruns"]
    assert run_work._StopCheck(run.pk, rerunning=True)._read()
    run_work.execute_chunk(run.pk, [held[0][1]])  # the task comes late: it runs nothing
    assert fake_provider.requests() == []


def test_resume_during_the_rerun_of_a_cancelled_run_runs_everything(fake_provider, held):
    run = cancelled_run(fake_provider)
    run_work.rerun_response(run, ids(run)[0])
    run_work.resume_run(run)  # inline: the three waiting items run; the run is no longer cancelled
    run_work.execute_chunk(run.pk, [held[0][1]])
    run.refresh_from_db()
    assert run.status == "done" and run.items_done == 4 and not run.cancel_requested


def test_rerunning_a_done_runs_cell_runs_only_it_and_the_run_is_done_again(fake_provider):
    run = run_start.start_run(blueprint(), models=["openai:steady"])
    run.refresh_from_db()
    took = run.elapsed_s()
    assert run.status == "done"
    fake_provider.reset()

    run_work.rerun_response(run, ids(run)[2])

    run.refresh_from_db()
    assert prompts_asked(fake_provider) == ["Say three"]
    assert run.status == "done" and run.items_done == 4 and run.elapsed_s() >= took


def test_one_rerun_per_cell_at_a_time(fake_provider, held):
    run = run_start.start_run(blueprint(), models=["openai:steady"], trials=2)
    run.refresh_from_db()
    first, second = Response.objects.filter(run=run, prompt_id="one").order_by("trial").values_list("pk", flat=True)
    run_work.rerun_response(run, first)

    with pytest.raises(run_work.RerunRefused) as refused:
        run_work.rerun_response(run, second)
    assert "trial 1 of the same cell is being re-run" in str(refused.value)
    with pytest.raises(run_work.RerunRefused, match="it is pending: it runs already"):
        run_work.rerun_response(run, first)
    other_cell = Response.objects.get(run=run, prompt_id="two", trial=0).pk
    run_work.rerun_response(run, other_cell)  # another cell may be re-run meanwhile
    for run_id, rid in list(held):
        run_work.execute_chunk(run_id, [rid])
    run.refresh_from_db()
    assert run.status == "done"
    run_work.rerun_response(run, second)  # once stored, the other trial may be


def test_reruns_past_the_per_minute_limit_are_refused_with_when_the_next_is_allowed(fake_provider, settings, client):
    settings.EVALSITE_RERUNS_PER_MINUTE = 2
    run = run_start.start_run(blueprint(), models=["openai:steady"])
    first, second, third, _ = ids(run)
    run_work.rerun_response(run, first)
    run_work.rerun_response(run, second)

    with pytest.raises(run_work.RerunRefused) as refused:
        run_work.rerun_response(run, third)
    message = str(refused.value)
    assert "re-run 2 times in the last minute" in message and "EVALSITE_RERUNS_PER_MINUTE=2" in message
    assert 1 <= refused.value.retry_after_s <= 60 and f"allowed in {refused.value.retry_after_s} s" in message
    answer = client.post(f"/api/runs/{run.pk}/responses/{third}/rerun", data=json.dumps({}),
                         content_type="application/json")
    assert answer.status_code == 429 and "EVALSITE_RERUNS_PER_MINUTE" in answer.json()["error"]
    assert int(answer.headers["Retry-After"]) >= 1
    assert Response.objects.get(pk=third).status == "done"  # nothing was reset
    run.refresh_from_db()
    assert run.status == "done"

    # The count is the database's (any web process sees it): a minute later the next is allowed.
    options = run.options
    options["reruns"]["at"] = [t - 61 for t in options["reruns"]["at"]]
    Run.objects.filter(pk=run.pk).update(options=options)
    run_work.rerun_response(run, third)
    run.refresh_from_db()
    assert len(run.options["reruns"]["at"]) == 1 and run.status == "done"


def test_a_burst_of_reruns_sends_at_most_the_limit(fake_provider, settings):
    settings.EVALSITE_RERUNS_PER_MINUTE = 5
    run = run_start.start_run(blueprint(), models=["openai:steady"])
    fake_provider.reset()
    refused = 0
    for _ in range(40):
        for rid in ids(run):
            try:
                run_work.rerun_response(run, rid)
            except run_work.RerunRefused:
                refused += 1
    run.refresh_from_db()
    assert len(fake_provider.requests()) == 5 and refused == 155
    assert run.status == "done" and run.items_done == 4
    assert time.time() - min(run.options["reruns"]["at"]) < 60
