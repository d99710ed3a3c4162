"""Issue #33, case 6: millions of items do not start with no question. Items per run are bounded
(EVALSITE_MAX_ITEMS_PER_RUN, refused with the field named at every door) and confirmed
(EVALSITE_CONFIRM_ITEMS) even when the calls are free; a large run's items are made by a task, in batches,
outside the request; deleting a run deletes its queued tasks; on SQLite a large delete gives the space back."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from blueprints.models import Blueprint
from runs import start as run_start
from runs import tasks
from runs import work as run_work
from runs.bulk import insert
from runs.spec import parsed_blueprint
from runs.models import Response, Run

pytestmark = pytest.mark.django_db(transaction=True)

FREE = """\
title: Free
models: [fixtures:x, fixtures:y]
fixtures: {responses: {p: {default: "hello world"}, q: {default: "hello again"}}}
---
- id: p
  prompt: Say hello.
  should: [$contains: hello]
- id: q
  prompt: Say hello again.
  should: [$contains: hello]
"""


def _blueprint(slug="free", text=FREE):
    blueprint = Blueprint.objects.create(slug=slug, title="")
    blueprint.save_revision(text)
    return blueprint


def _post(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def _form(slug, **extra):
    return {"blueprint": slug, "models_offered": ["fixtures:x", "fixtures:y"], "models": ["fixtures:x", "fixtures:y"],
            "start": "1", **extra}


def test_past_the_most_items_a_run_is_refused_at_every_door_naming_the_field(client, settings):
    settings.EVALSITE_MAX_ITEMS_PER_RUN = 100
    _blueprint()  # 2 prompts x 2 models: 30 trials make 120 items

    api = _post(client, "/api/runs", {"blueprintId": "free", "trials": 30})
    dry = _post(client, "/api/runs", {"blueprintId": "free", "trials": 30, "dryRun": True})
    form = client.post("/runs/form/free/", _form("free", trials="30")).content.decode()
    err = io.StringIO()
    with pytest.raises(SystemExit) as cli:
        call_command("run_blueprint", "free", "--trials", "30", stderr=err, stdout=io.StringIO())

    assert api.status_code == 422 and api.json()["field"] == "trials"
    assert api.json()["error"].startswith("`trials` / `models`: this run would make 120 items (2 prompts x 2 model "
                                          "variants x 30 trials)")
    assert "EVALSITE_MAX_ITEMS_PER_RUN" in api.json()["error"] and "100" in api.json()["error"]
    assert dry.status_code == 422 and dry.json()["field"] == "trials"
    assert "Not started" in form and "Trials / Models: this run would make 120 items" in form
    assert cli.value.code == 2 and "cannot run: --trials / --models: this run would make 120 items" in err.getvalue()
    assert Run.objects.count() == 0 and Response.objects.count() == 0
    # At the limit it starts.
    assert _post(client, "/api/runs", {"blueprintId": "free", "trials": 25}).status_code == 201


def test_a_free_run_of_many_items_asks_first(client, settings):
    settings.EVALSITE_CONFIRM_ITEMS = 50
    _blueprint()

    first = client.post("/runs/form/free/", _form("free", trials="15"))  # 60 items, no calls, $0
    page = first.content.decode()
    asked = run_start.prepare(Blueprint.objects.get(slug="free"), run_start.RunRequest(trials=15))

    assert first.status_code == 200 and Run.objects.count() == 0
    assert "Not started: this run would make 0 calls for about $0.00 (at most $0.00) for 60 items" in page
    assert asked.confirm_needed and "for 0 calls and 60 items" in asked.confirm_label
    assert f'value="{asked.confirm_key}"' in page
    # Ticked, it starts; below the threshold it goes straight on.
    second = client.post("/runs/form/free/", _form("free", trials="15", confirm=asked.confirm_key))
    assert second.status_code == 302 and Run.objects.get().items_total == 60
    third = client.post("/runs/form/free/", _form("free", trials="12"))  # 48 items
    assert third.status_code == 302 and Run.objects.count() == 2


def _queued():
    """(task name, args) of every task waiting in the ORM broker."""
    found = []
    for payload in OrmQ.objects.values_list("payload", flat=True):
        task = SignedPackage.loads(payload)
        found.append((task["func"], task["args"]))
    return found


def _work(func_name):
    """Play one worker: take the queued tasks of this function and run them as django-q would."""
    ran = 0
    for row in list(OrmQ.objects.all()):
        task = SignedPackage.loads(row.payload)
        if task["func"] == func_name:
            row.delete()
            getattr(tasks, func_name.rsplit(".", 1)[1])(*task["args"])
            ran += 1
    return ran


def test_a_large_run_answers_at_once_its_items_are_made_by_a_task_and_its_tasks_go_when_it_is_deleted(
        client, settings, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)  # a real broker (the ORM's): tasks wait for a worker
    monkeypatch.setattr(run_start, "ITEMS_IN_REQUEST", 50, raising=False)  # made in the request up to this many
    monkeypatch.setattr(run_start, "ITEM_BATCH", 40, raising=False)
    settings.EVALSITE_CHUNK_SIZE = 25
    _blueprint()
    _blueprint("other")

    started = _post(client, "/api/runs", {"blueprintId": "free", "trials": 30})  # 120 items
    run = Run.objects.get(pk=started.json()["id"])

    # The API answered with the run; no item was made in its request.
    assert started.status_code == 201 and run.status == "queued" and run.items_total == 120
    assert started.json()["itemsBeingMade"] is True
    assert "120 items are being made by a worker" in client.get(f"/runs/{run.pk}/").content.decode()
    assert Response.objects.filter(run=run).count() == 0
    assert _queued() == [("runs.tasks.make_items", (run.pk,))]
    # A worker looking for dead runs does not finish it (no items yet) nor make a second task.
    run_work.recover_stale_items()
    assert Run.objects.get(pk=run.pk).status == "queued" and len(_queued()) == 1

    assert _work("runs.tasks.make_items") == 1
    assert Response.objects.filter(run=run).count() == 120
    made = set(Response.objects.filter(run=run).values_list("prompt_index", "variant_id", "trial"))
    cells = {(p, v) for p, v, _ in made}
    assert len(cells) == 4 and made == {(p, v, t) for p, v in cells for t in range(30)}
    assert [f for f, _ in _queued()] == ["runs.tasks.run_chunk"] * 5  # 120 items, 25 a chunk
    assert "makingItems" not in Run.objects.get(pk=run.pk).options

    other = Run.objects.get(pk=_post(client, "/api/runs", {"blueprintId": "other", "trials": 2}).json()["id"])
    assert len(_queued()) == 6  # 8 items: made in the request, one chunk

    deleted = client.post(f"/runs/{run.pk}/delete")
    assert deleted.status_code == 302 and not Run.objects.filter(pk=run.pk).exists()
    assert _queued() == [("runs.tasks.run_chunk", (other.pk, list(Response.objects.filter(run=other)
                                                                    .order_by("pk").values_list("pk", flat=True))))]


def test_a_task_that_died_making_items_is_started_again_and_goes_on_from_what_it_made(client, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(run_start, "ITEMS_IN_REQUEST", 50)
    monkeypatch.setattr(run_start, "ITEM_BATCH", 40)
    blueprint = _blueprint()
    run = run_start.start_run(blueprint, trials=30)
    rows = list(run_start.item_rows(run, parsed_blueprint(run.revision), [30, 30]))
    insert(Response, rows[:40])  # one batch made, then the task died
    OrmQ.objects.all().delete()

    run_work.recover_stale_items()  # a worker's minute: the making is handed out again
    assert [f for f, _ in _queued()] == ["runs.tasks.make_items"]
    _work("runs.tasks.make_items")

    assert Response.objects.filter(run=run).count() == 120


def _free_pages():
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA freelist_count")
        return cursor.fetchone()[0]


def test_deleting_a_large_run_gives_the_space_back_on_sqlite(client, settings):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's autovacuum gives the space back")
    settings.EVALSITE_VACUUM_AFTER_ROWS = 1000
    with connection.cursor() as cursor:  # what earlier tests deleted in this database is not this test's to count
        cursor.execute("VACUUM")
    blueprint = _blueprint()
    run = run_start.start_run(blueprint, trials=100, enqueue=False)  # 400 items
    run_start.start_run(blueprint, trials=100, enqueue=False)
    big = run_start.start_run(blueprint, trials=100, enqueue=False)
    Response.objects.filter(run=big).update(text="x" * 2000)  # pages to free
    assert _free_pages() == 0

    client.post(f"/runs/{run.pk}/delete")  # 400 responses: below the setting, nothing is rewritten
    small_free = _free_pages()
    settings.EVALSITE_VACUUM_AFTER_ROWS = 300
    client.post(f"/runs/{big.pk}/delete")

    assert small_free > 0
    assert _free_pages() == 0 and Run.objects.count() == 1


def test_a_run_cancelled_while_its_items_are_made_ends_cancelled_and_stops_making_them(client, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(run_start, "ITEMS_IN_REQUEST", 50, raising=False)
    _blueprint()
    run_id = _post(client, "/api/runs", {"blueprintId": "free", "trials": 30}).json()["id"]

    cancelled = _post(client, f"/api/runs/{run_id}/cancel", {})
    _work("runs.tasks.make_items")

    run = Run.objects.get(pk=run_id)
    assert cancelled.status_code == 200 and run.status == "cancelled"
    assert Response.objects.filter(run=run).count() == 0 and run.items_total == 0


@pytest.mark.services
def test_a_runs_tasks_queued_in_redis_go_with_it(redis_url, monkeypatch):
    from django_q.brokers.redis_broker import Redis
    from django_q.tasks import async_task

    monkeypatch.setattr(Conf, "REDIS", redis_url)
    broker = Redis(list_key="limits-test")
    broker.connection.delete(broker.list_key)
    for run_id in (1, 2, 1):
        async_task("runs.tasks.run_chunk", run_id, [run_id * 10], group=f"run-{run_id}", broker=broker, sync=False)
    broker.connection.rpush(broker.list_key, "not a signed task")

    assert run_work.purge_queued_tasks(1, broker=broker) == 2
    left = broker.connection.lrange(broker.list_key, 0, -1)
    assert [SignedPackage.loads(left[0])["args"], left[1]] == [(2, [20]), b"not a signed task"]


def test_deleting_a_run_takes_its_points_reviews_and_notes_and_nothing_of_another_run(client):
    from django.db.models.signals import post_delete, pre_delete

    from runs.models import Annotation, EarlierAttempt, PointAssessment, PointConfirmation, PointOverride

    # The delete is one statement a table, leaves first: nothing else may hang on these rows, nor listen.
    # include_hidden: a relation named "+" (a Pairs judgement's left and right) hangs on the rows all the same.
    hanging = {M.__name__: sorted(f.related_model.__name__ for f in M._meta.get_fields(include_hidden=True)
                                  if f.auto_created and not f.concrete and (f.one_to_many or f.one_to_one))
               for M in (Response, PointAssessment, PointOverride, PointConfirmation, Annotation, EarlierAttempt)}
    assert hanging == {"Response": ["Annotation", "EarlierAttempt", "PairJudgement", "PairJudgement",
                                    "PointAssessment"],
                       "PointAssessment": ["PointConfirmation", "PointOverride"],
                       "PointOverride": [], "PointConfirmation": [], "Annotation": [], "EarlierAttempt": []}
    for model in (Response, PointAssessment, PointOverride, PointConfirmation, Annotation, EarlierAttempt):
        assert not pre_delete.has_listeners(model) and not post_delete.has_listeners(model)
    _blueprint()
    gone, kept = (_post(client, "/api/runs", {"blueprintId": "free", "trials": 2}).json()["id"] for _ in range(2))
    for run_id in (gone, kept):
        first, second, third = Response.objects.filter(run_id=run_id).order_by("pk").values_list("pk", flat=True)[:3]
        assert _post(client, f"/api/runs/{run_id}/responses/{first}/points/0/override",
                     {"score": 0.5, "reason": "close"}).status_code == 200
        # (a confirmation is of judges; these points are checks, so it is stored as the page would)
        PointConfirmation.objects.create(assessment=PointAssessment.objects.get(response_id=second, position=0))
        assert _post(client, f"/api/runs/{run_id}/responses/{third}/annotation", {"thumbs": "up"}).status_code == 200
        EarlierAttempt.objects.create(run_id=run_id, response_id=first, why="retry")
    kinds = (Response, PointAssessment, PointOverride, PointConfirmation, Annotation, EarlierAttempt)
    before = [M.objects.count() for M in kinds]

    assert client.delete(f"/api/runs/{gone}").status_code == 200

    after = [M.objects.count() for M in kinds]
    assert before == [16, 16, 2, 2, 2, 2] and after == [8, 8, 1, 1, 1, 1]
    assert Response.objects.filter(run_id=kept).count() == 8 and not Run.objects.filter(pk=gone).exists()


def test_the_estimate_reads_earlier_answers_in_one_query_whatever_the_models(client, settings, monkeypatch,
                                                                             django_assert_max_num_queries):
    monkeypatch.setattr(run_start, "OBSERVED_ANSWERS", 3)
    models = "\n".join(f"  - fixtures:m{i}" for i in range(300))
    _blueprint("wide", FREE.replace("models: [fixtures:x, fixtures:y]", f"models:\n{models}"))
    blueprint = _blueprint()
    run = run_start.start_run(blueprint, trials=3)  # fixtures answer "hello world" and "hello again"
    lengths = {}
    for index, row in enumerate(Response.objects.filter(run=run).order_by("pk")):
        Response.objects.filter(pk=row.pk).update(output_tokens=10 + index, cached=False, status="done")
        lengths.setdefault(row.model_id, []).append(10 + index)

    with django_assert_max_num_queries(40):  # 300 models: one query per model was 300 and more
        page = client.get("/runs/form/wide/")
    observed = run_start.observed_answer_tokens(["fixtures:x", "fixtures:y", "fixtures:none"])

    assert page.status_code == 200
    # The reference: each model's latest 3 answers by id, their mean.
    assert observed == {m: (sum(v[-3:]) / 3, 3) for m, v in lengths.items()}


def test_the_command_makes_a_large_runs_items_in_batches_and_runs_them(monkeypatch):
    monkeypatch.setattr(run_start, "ITEMS_IN_REQUEST", 50, raising=False)
    monkeypatch.setattr(run_start, "ITEM_BATCH", 40, raising=False)
    _blueprint()
    err = io.StringIO()

    call_command("run_blueprint", "free", "--trials", "30", stderr=err, stdout=io.StringIO())

    run = Run.objects.get()
    assert run.status == "done" and run.items_total == run.items_done == 120
    assert Response.objects.filter(run=run, status="done").count() == 120
    assert "makingItems" not in run.options and f"run {run.pk}: 120 items" in err.getvalue()
