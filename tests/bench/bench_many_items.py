"""Benchmark (issue #33, case 6): a fixtures-only run of many items through the API, on SQLite.

    .venv/bin/python tests/bench/bench_many_items.py [--items 200000]

Prints how long `POST /api/runs` takes to answer, how long the task takes to make the items (in batches),
how many chunk tasks are queued, what deleting the run leaves queued, and the database file's size before
the run, with it, and after it is deleted (VACUUM past EVALSITE_VACUUM_AFTER_ROWS). Tasks are queued in the
ORM broker as on a real site; this process plays the worker for the making of the items only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=200_000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    data = Path(tempfile.mkdtemp(prefix="bench-items-"))
    os.environ["EVALSITE_DATA_DIR"] = str(data)
    os.environ.pop("EVALSITE_TASKS_SYNC", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import logging

    logging.getLogger("django-q").setLevel(logging.WARNING)
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    from blueprints.models import Blueprint
    from runs import tasks
    from runs.models import Response

    db = data / "db.sqlite3"
    trials = 100
    models = max(1, args.items // trials)
    text = ("models: [" + ", ".join(f"fixtures:m{i}" for i in range(models)) + "]\n"
            "fixtures: {responses: {p: {default: \"hello world\"}}}\n---\n- id: p\n  prompt: Say hello.\n"
            "  should: [$contains: hello]\n")
    Blueprint.objects.create(slug="many", title="").save_revision(text)
    client = Client(HTTP_HOST="127.0.0.1", REMOTE_ADDR="127.0.0.1")
    before = db.stat().st_size
    started = time.perf_counter()
    answer = client.post("/api/runs", data=json.dumps({"blueprintId": "many", "trials": trials}),
                         content_type="application/json")
    answered = time.perf_counter() - started
    print(f"POST /api/runs ({models * trials:,} items): {answer.status_code} in {answered:.2f} s, "
          f"{Response.objects.count():,} items made in the request")
    run_id = answer.json()["id"]
    started = time.perf_counter()
    for row in list(OrmQ.objects.all()):
        task = SignedPackage.loads(row.payload)
        if task["func"] == "runs.tasks.make_items":
            row.delete()
            tasks.make_items(*task["args"])
    print(f"the task made {Response.objects.count():,} items in {time.perf_counter() - started:.2f} s; "
          f"{OrmQ.objects.count():,} chunk tasks queued")
    with_run = db.stat().st_size
    started = time.perf_counter()
    deleted = client.delete(f"/api/runs/{run_id}")
    print(f"DELETE /api/runs/{run_id}: {deleted.status_code} in {time.perf_counter() - started:.2f} s; "
          f"{OrmQ.objects.count():,} tasks left queued")
    # The VACUUM task is queued (a worker runs it); run it as the worker would.
    for row in list(OrmQ.objects.all()):
        task = SignedPackage.loads(row.payload)
        if task["func"] == "runs.tasks.reclaim_space":
            row.delete()
            started = time.perf_counter()
            tasks.reclaim_space()
            print(f"VACUUM in {time.perf_counter() - started:.2f} s")
    print(f"database: {before / 1e6:.1f} MB before, {with_run / 1e6:.1f} MB with the run, "
          f"{db.stat().st_size / 1e6:.1f} MB after deleting it")


if __name__ == "__main__":
    main()
