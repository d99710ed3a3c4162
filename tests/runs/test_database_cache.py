"""runs/cache.py's DatabaseCache (the cache of a PostgreSQL deployment), here on the test database's table."""

import asyncio

import pytest

from runs.cache import DatabaseCache
from runs.models import CachedResponse

pytestmark = pytest.mark.django_db(transaction=True)


def test_answers_are_kept_until_a_batch_or_flush_and_read_back_meanwhile():
    async def scenario():
        cache = DatabaseCache()
        await cache.set("k1", {"text": "one", "model_id": "openai:a"})
        kept = await cache.get("k1")  # not stored yet: read from what is kept
        assert kept == {"text": "one", "model_id": "openai:a"}
        kept["text"] = "changed by a caller"
        assert (await cache.get("k1"))["text"] == "one"  # a copy each time
        assert await asyncio.to_thread(CachedResponse.objects.count) == 0
        await cache.flush()
        assert (await DatabaseCache().get("k1")) == {"text": "one", "model_id": "openai:a"}
        await cache.set("k1", {"text": "again"})  # the same key stored again replaces it
        for i in range(DatabaseCache.WRITE_BATCH - 1):
            await cache.set(f"b{i}", {"text": f"answer {i}"})
        # the 64th answer kept stored the batch without a flush
        assert await asyncio.to_thread(CachedResponse.objects.count) == DatabaseCache.WRITE_BATCH
        assert (await DatabaseCache().get("k1")) == {"text": "again"}
        assert await DatabaseCache().get("missing") is None

    asyncio.run(scenario())
