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


def _set(key: str, value: dict) -> None:
    from django.utils import timezone

    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_TABLE} (key, value, created_at) VALUES (%s, %s, %s) "
            f"ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at",
            [key, json.dumps(value, ensure_ascii=False), timezone.now()],
        )


class DatabaseCache:
    """The engine's cache protocol over the ``CachedResponse`` table (async: the ORM runs off the loop)."""

    async def get(self, key: str) -> dict | None:
        return await sync_to_async(_get)(key)

    async def set(self, key: str, value: dict) -> None:
        await sync_to_async(_set)(key, value)


def response_cache():
    """The cache for this deployment: a SQLite file beside a SQLite database, the database otherwise."""
    if connection.vendor == "sqlite":
        return SqliteCache(Path(settings.EVALSITE_DATA_DIR) / "responses.sqlite3")
    return DatabaseCache()
