"""The response cache in the database, so every worker on every machine shares it."""

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction

from .models import CachedResponse


def _get(key: str) -> dict | None:
    value = CachedResponse.objects.filter(key=key).values_list("value", flat=True).first()
    return value if isinstance(value, dict) else None


def _set(key: str, value: dict) -> None:
    try:
        with transaction.atomic():
            CachedResponse.objects.update_or_create(key=key, defaults={"value": value})
    except IntegrityError:  # another worker stored the same answer first
        pass


class DatabaseCache:
    """The engine's cache protocol (runs/engine/providers/cache.py) over the ``CachedResponse`` table.

    Async, because the router calls it from its event loop and Django's ORM must
    run outside the loop (in the thread that holds this process's connection).
    """

    async def get(self, key: str) -> dict | None:
        return await sync_to_async(_get)(key)

    async def set(self, key: str, value: dict) -> None:
        await sync_to_async(_set)(key, value)
