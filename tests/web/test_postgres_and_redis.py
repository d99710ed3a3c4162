"""The site on a real PostgreSQL and Redis: migrations, and a worker taking a task.

Django runs in subprocesses (manage.py) with DATABASE_URL and REDIS_URL set,
as a deployment would; this process only looks at the servers directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    import psycopg
    import redis
except ImportError as error:  # pragma: no cover - a setup problem, said plainly
    raise ImportError(
        f"{error}: the service tests need the postgres and redis extras; run `make venv` "
        "or .venv/bin/pip install -e '.[dev,postgres,redis]'"
    ) from None

pytestmark = pytest.mark.services

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"
QUEUE_KEY = "django_q:evalsite:q"  # django-q2's Redis list for the cluster named "evalsite"


@pytest.fixture
def site_env(tmp_path, database_url):
    """The environment of a deployed site: PostgreSQL, tasks in real workers."""
    env = {**os.environ, "DATABASE_URL": database_url, "EVALSITE_DATA_DIR": str(tmp_path / "data")}
    env.pop("EVALSITE_TASKS_SYNC", None)
    env.pop("REDIS_URL", None)
    env["EVALSITE_WORKERS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def manage(*args: str, env: dict, timeout: float = 120) -> str:
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, (
        f"manage.py {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def tables(database_url: str) -> set[str]:
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return {name for (name,) in rows}


def test_migrations_build_the_schema_in_postgresql(site_env, database_url):
    assert tables(database_url) == set()

    manage("migrate", "--no-input", env=site_env)
    manage("migrate", "--check", env=site_env)  # exits non-zero if any migration is unapplied
    manage("check", "--database", "default", env=site_env)

    assert {"django_migrations", "django_q_task", "blueprints_blueprint", "runs_run"} <= tables(
        database_url
    )


def test_a_worker_takes_a_task_from_redis_and_stores_its_result_in_postgresql(
    site_env, database_url, redis_url, tmp_path
):
    env = {**site_env, "REDIS_URL": redis_url}
    queue = redis.Redis.from_url(redis_url)
    queue.flushdb()
    manage("migrate", "--no-input", env=env)

    enqueue = "from django_q.tasks import async_task; print(async_task('math.floor', 2.5))"
    task_id = manage("shell", "--no-imports", "-c", enqueue, env=env).strip()
    # No worker yet: the task waits in Redis, not in the ORM broker's table.
    assert queue.llen(QUEUE_KEY) == 1
    with psycopg.connect(database_url) as connection:
        assert connection.execute("SELECT count(*) FROM django_q_ormq").fetchone() == (0,)

    log = tmp_path / "qcluster.log"
    with open(log, "wb") as output:
        cluster = subprocess.Popen(
            [sys.executable, str(MANAGE), "qcluster"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, to find (and end) every worker it forks
        )
    try:
        assert wait_for_success(database_url, task_id, timeout=30), (
            f"task {task_id} had no stored result after 30 s; qcluster's log:\n{log.read_text()}"
        )
        assert queue.llen(QUEUE_KEY) == 0

        cluster.send_signal(signal.SIGTERM)
        cluster.wait(timeout=30)
        assert cluster.returncode == 0, f"qcluster exited {cluster.returncode}:\n{log.read_text()}"
        assert not group_alive(cluster.pid), "qcluster left processes behind after SIGTERM"
    finally:
        if cluster.poll() is None or group_alive(cluster.pid):
            os.killpg(cluster.pid, signal.SIGKILL)
            cluster.wait(timeout=10)

    stored = f"from django_q.models import Success; print(Success.objects.get(id='{task_id}').result)"
    assert manage("shell", "--no-imports", "-c", stored, env=env).strip() == "2"


def wait_for_success(database_url: str, task_id: str, *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as connection:
        while time.monotonic() < deadline:
            row = connection.execute(
                "SELECT success FROM django_q_task WHERE id = %s", (task_id,)
            ).fetchone()
            if row == (True,):
                return True
            time.sleep(0.2)
    return False


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
