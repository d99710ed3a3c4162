"""The response cache shared by every worker.

With SQLite (one machine) the cache is its own SQLite file in the data
directory, read and written straight from the event loop: a cache lookup is a
few microseconds, where going through Django's ORM cost two milliseconds a
call. With PostgreSQL (workers on several machines) it is the
``CachedResponse`` table, so every machine shares it.
"""

from __future__ import annotations

import json
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from runs.engine import jsonfast
from runs.engine.providers import SqliteCache

from .models import CachedResponse

_TABLE = CachedResponse._meta.db_table


def _get(key: str) -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT value FROM {_TABLE} WHERE key = %s", [key])
        row = cursor.fetchone()
    if row is None:
        return None
    value = row[0]
    if isinstance(value, str):  # a driver that does not decode JSON columns
        value = json.loads(value)
    return value if isinstance(value, dict) else None


def _set_many(batch: dict[str, dict]) -> None:
    from django.utils import timezone

    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {_TABLE} (key, value, created_at) VALUES (%s, %s, %s) "
            f"ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at",
            [[key, jsonfast.dumps_text(value), now] for key, value in batch.items()],
        )


class DatabaseCache:
    """The engine's cache protocol over the ``CachedResponse`` table (async: the ORM runs off the loop).

    Writes are kept and stored together, ``WRITE_BATCH`` at a time and when the router closes (``flush``), as the
    SQLite file's are: a thread's hop and a round trip per answer were a quarter of a worker's CPU per call on
    PostgreSQL (tests/bench/bench_scale.py). An answer kept but not yet stored is read from here; one lost with
    its process only costs asking the model again."""

    WRITE_BATCH = 64

    def __init__(self) -> None:
        self._pending: dict[str, dict] = {}

    async def get(self, key: str) -> dict | None:
        kept = self._pending.get(key)
        if kept is not None:
            return dict(kept)
        return await sync_to_async(_get)(key)

    async def set(self, key: str, value: dict) -> None:
        self._pending[key] = dict(value)
        if len(self._pending) >= self.WRITE_BATCH:
            await self.flush()

    async def flush(self) -> None:
        batch, self._pending = self._pending, {}
        if batch:
            await sync_to_async(_set_many)(batch)


def response_cache():
    """The cache for this deployment: a SQLite file beside a SQLite database, the database otherwise."""
    if connection.vendor == "sqlite":
        return SqliteCache(Path(settings.EVALSITE_DATA_DIR) / "responses.sqlite3")
    return DatabaseCache()
