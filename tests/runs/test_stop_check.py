"""How a worker reads the run's cancel flag (``work._StopCheck``): at most every 0.2 s, never sending on a stale
"go on", and without making every call queue behind each read. Against the database, as a worker does."""

from __future__ import annotations

import pytest

from runs import start as run_start
from runs import work as run_work

from .test_top_up import blueprint

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stale_stop_answer_is_read_again_before_a_call_goes_a_fresh_one_is_not_waited_for(fake_provider):
    """The cancel flag is read at most every 0.2 s. A call asking after a quiet spell (its answer older than
    FRESH_S) waits for the new read, so it never leaves on an old "go on"; while calls keep asking, the last
    answer stands and nobody queues behind a read."""
    import asyncio

    from asgiref.sync import sync_to_async

    from runs.models import Run

    run = run_start.start_run(blueprint(), models=["openai:steady"], enqueue=False)
    cancel = sync_to_async(lambda: Run.objects.filter(pk=run.pk).update(cancel_requested=True))

    async def stale_is_waited_for():
        check = run_work._StopCheck(run.pk)
        try:
            assert await check.should_stop() is False  # the first answer: waited for
            await cancel()
            assert await check.should_stop() is False  # read just now: no new read yet
            await asyncio.sleep(0.3)
            assert await check.should_stop() is True  # stale: the new read is waited for
        finally:
            await check.close()

    asyncio.run(stale_is_waited_for())
    Run.objects.filter(pk=run.pk).update(cancel_requested=False)

    async def fresh_goes_on():
        check = run_work._StopCheck(run.pk)
        check.FRESH_S = 60.0  # every answer counts as fresh
        try:
            assert await check.should_stop() is False
            await cancel()
            await asyncio.sleep(0.3)
            assert await check.should_stop() is False  # a read starts; the fresh answer stands meanwhile
            await check._reading
            assert await check.should_stop() is True  # the read is in: stopped
        finally:
            await check.close()

    asyncio.run(fresh_goes_on())
