"""A worker keeps its pipeline full (issue 25, "less of our own time per call"): as the items of its task
finish it takes more of the run's pending items (``work.claim_next``), so its calls never drain to nothing
between two tasks. Through the task the worker runs (``runs.tasks.run_chunk``) against the fake LLM server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from blueprints.importing import import_files
from runs import start as run_start
from runs import tasks
from runs import work as run_work
from runs.models import Response, Run

pytestmark = pytest.mark.django_db(transaction=True)

PROMPTS = 12


def blueprint():
    text = "title: Top up\n---\n" + "".join(
        f"- id: p{i}\n  prompt: Say word {i}\n  should: [$contains: word]\n" for i in range(PROMPTS))
    return import_files([("top-up.yml", text, {})], via="test").items[0].blueprint


def ordered_ids(run):
    return list(Response.objects.filter(run=run).order_by("prompt_index").values_list("pk", flat=True))


def test_one_task_takes_the_runs_other_items_as_its_own_finish(fake_provider, settings):
    settings.EVALSITE_CHUNK_SIZE = 4
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    first, rest = ordered_ids(run)[:4], ordered_ids(run)[4:]

    tasks.run_chunk(run.pk, first)

    run.refresh_from_db()
    assert run.status == "done" and run.items_done == PROMPTS and run.items_failed == 0
    assert len(fake_provider.requests()) == PROMPTS  # each item once: nothing taken twice
    # The tasks queued for the other items find them done, and do nothing.
    tasks.run_chunk(run.pk, rest)
    assert len(fake_provider.requests()) == PROMPTS
    run.refresh_from_db()
    assert run.items_done == PROMPTS


def test_items_are_taken_in_the_runs_order_and_only_pending_unclaimed_ones(fake_provider, settings):
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    ids = ordered_ids(run)
    held = run_work.claim(run.pk, ids[:2], "another-worker")
    assert held == ids[:2]

    taken = run_work.claim_next(run.pk, "this-worker", 3)

    assert taken == ids[2:5]
    assert set(Response.objects.filter(claimed_by="another-worker").values_list("pk", flat=True)) == set(ids[:2])
    assert run_work.claim_next(run.pk, "this-worker", 0) == []


def test_a_direct_chunk_and_a_re_run_work_only_their_own_items(fake_provider, settings):
    settings.EVALSITE_CHUNK_SIZE = 4
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)

    run_work.execute_chunk(run.pk, ordered_ids(run)[:4])  # no top_up: what the CLI and the tests call

    run.refresh_from_db()
    assert run.items_done == 4 and run.status == "running"


def test_a_cancelled_run_takes_no_more_items(fake_provider, settings):
    settings.EVALSITE_CHUNK_SIZE = 4
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    ids = ordered_ids(run)
    run_work.execute_chunk(run.pk, ids[:4])
    run_work.cancel_run(run)

    tasks.run_chunk(run.pk, ids[4:8])

    run.refresh_from_db()
    assert run.status == "cancelled" and run.items_done == 4
    assert len(fake_provider.requests()) == 4



def dead_token() -> str:
    """A claim as a worker of this machine whose process has exited writes it."""
    import socket
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return f"{socket.gethostname()}:{int(child.stdout)}:deadbeef"


def test_once_none_is_pending_a_worker_takes_over_the_items_of_a_worker_that_is_gone(fake_provider, settings):
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    ids = ordered_ids(run)
    alive = run_work.claim(run.pk, ids[:4], run_work.worker_token())  # this process: alive
    dead = run_work.claim(run.pk, ids[4:8], dead_token())
    lapsed = run_work.claim(run.pk, ids[8:10], "elsewhere:1:abcd")  # another machine: only its lease counts
    assert (alive, dead, lapsed) == (ids[:4], ids[4:8], ids[8:10])
    worker_a, worker_b = run_work.worker_token(), run_work.worker_token()  # two tasks of live workers

    assert run_work.claim_next(run.pk, worker_a, 2) == ids[10:12]  # pending items first
    assert run_work.claim_next(run.pk, worker_a, 3) == ids[4:7]  # then a dead worker's, in the run's order
    assert run_work.claim_next(run.pk, worker_b, 3) == [ids[7]]  # worker-a's are not taken from it
    assert run_work.claim_next(run.pk, worker_b, 3) == []  # alive, and a lease not yet lapsed
    Response.objects.filter(pk__in=ids[8:10]).update(
        claimed_at=timezone.now() - run_work.claim_lease() - timedelta(seconds=1))
    assert run_work.claim_next(run.pk, worker_b, 5) == ids[8:10]
    claims = dict(Response.objects.filter(run=run).values_list("pk", "attempts"))
    assert [claims[pk] for pk in ids] == [1] * 4 + [2] * 6 + [1] * 2


def test_resume_hands_back_the_items_of_a_worker_that_is_gone_and_never_a_live_workers(fake_provider, settings):
    """Resume releases stale claims by their condition, as the minute's recovery does: a dead process's items and
    a lapsed lease's go back to pending; a live worker's stay its own."""
    settings.EVALSITE_TASKS_SYNC = False  # nothing runs inline: the rows say what resume did
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    ids = ordered_ids(run)
    alive = run_work.worker_token()
    run_work.claim(run.pk, ids[:3], alive)
    run_work.claim(run.pk, ids[3:5], dead_token())
    run_work.claim(run.pk, ids[5:7], "elsewhere:1:abcd")
    Response.objects.filter(pk__in=ids[5:7]).update(
        claimed_at=timezone.now() - run_work.claim_lease() - timedelta(seconds=1))
    run.refresh_from_db()
    run_work.resume_run(run)
    rows = dict(Response.objects.filter(run=run).values_list("pk", "claimed_by"))
    assert [rows[pk] for pk in ids[:3]] == [alive] * 3
    assert [rows[pk] for pk in ids[3:]] == [""] * (len(ids) - 3)


def test_inline_run_claims_its_first_chunk_then_the_rest_while_the_calls_wait(fake_provider, settings, monkeypatch):
    """``run_blueprint`` (``run_inline``): the first calls leave once the first EVALSITE_CHUNK_SIZE items are claimed
    (issue 37); the others are claimed as those finish, in the run's order, each item sent once."""
    settings.EVALSITE_CHUNK_SIZE = 4
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    ids = ordered_ids(run)
    claimed_first: list[list[int]] = []
    topped_up: list[list[int]] = []
    claim, claim_next = run_work.claim, run_work.claim_next
    monkeypatch.setattr(run_work, "claim", lambda run_id, wanted, token: claimed_first.append(list(wanted))
                        or claim(run_id, wanted, token))
    monkeypatch.setattr(run_work, "claim_next", lambda run_id, token, count: topped_up.append(
        claim_next(run_id, token, count)) or topped_up[-1])

    run = run_work.run_inline(run)

    assert run.status == "done" and run.items_done == PROMPTS and run.items_failed == 0
    assert claimed_first[0] == ids[:4]  # what the first calls waited for: four items, not twelve
    taken = [pk for batch in topped_up for pk in batch]
    assert taken == ids[4:]  # the rest, in the run's order, once each
    assert len(fake_provider.requests()) == PROMPTS


def test_an_inline_replay_works_every_item_it_was_handed_without_topping_up(fake_provider, settings):
    """A replay's items are answered from the original's calls: it never takes other items (``work.tops_up``)."""
    settings.EVALSITE_CHUNK_SIZE = 4
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    run = run_work.run_inline(run)
    run.manifest = {**run.manifest, "replayOf": run.pk}
    assert not run_work.tops_up(run, rerunning=False)
    run.manifest = {k: v for k, v in run.manifest.items() if k != "replayOf"}
    assert run_work.tops_up(run, rerunning=False) and not run_work.tops_up(run, rerunning=True)


def test_a_run_that_is_not_a_dry_run_works_out_no_estimate(tmp_path, fake_provider, monkeypatch, capsys):
    """Issue 37: `run_blueprint` without `--dry-run` shows no estimate and asks no confirmation, so it spends nothing
    working one out before its first call; the dry run still does."""
    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    path = tmp_path / "plain.yml"
    path.write_text("title: Plain\nmodels: [openai:steady]\n---\n- id: p\n  prompt: Say the word\n"
                    "  should: [$contains: word]\n")
    estimated = []
    real = run_start.estimate_start
    monkeypatch.setattr(run_start, "estimate_start", lambda *a, **k: estimated.append(1) or real(*a, **k))

    call_command("run_blueprint", str(path))

    assert estimated == [] and Run.objects.get().status == "done"
    assert "overall 1.000" in capsys.readouterr().out
    call_command("run_blueprint", str(path), "--dry-run")
    assert estimated == [1]


def test_run_blueprint_readies_its_finish_once_the_first_calls_have_left(tmp_path, fake_provider, monkeypatch,
                                                                       capsys):
    """Issue 37: finishing's imports and resamples are made on a thread while the calls wait, started when the first
    item is stored, so that thread does not hold back the first calls; once, whatever the number of items."""
    from runs.management.commands import run_blueprint as command

    fake_provider.script([{"model": "steady", "match": ".", "reply": "the word"}])
    path = tmp_path / "plain.yml"
    path.write_text("title: Plain\nmodels: [openai:steady]\n---\n" + "".join(
        f"- id: p{i}\n  prompt: Say word {i}\n  should: [$contains: word]\n" for i in range(PROMPTS)))
    readied = []
    real = command._ready_the_finish
    monkeypatch.setattr(command, "_ready_the_finish", lambda prompts, *modules: readied.append(
        (prompts, modules, len(fake_provider.requests()))) or real(prompts, *modules))

    call_command("run_blueprint", str(path))

    assert Run.objects.get().status == "done" and "overall 1.000" in capsys.readouterr().out
    assert len(readied) == 1
    prompts, modules, calls_sent = readied[0]
    assert prompts == PROMPTS and modules == ("runs.summaries", "scipy.special")
    assert calls_sent >= 1  # the first calls had left
