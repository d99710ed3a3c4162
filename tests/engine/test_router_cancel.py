"""After a cancel no request leaves the process: not an item's first call, not a later turn, not a judge.

An item stopped under way is not scored: it goes back to pending, keeping a complete generation
so that a resume judges it without asking the model again (docs/runs.md, "Cancel").
"""

import asyncio
import time

from blueprints.spec.parse import parse_blueprint
from runs.engine.generate import expand_variants
from runs.engine.judge import JudgePlan, JudgeSpec
from runs.engine.pipeline import PipelineOptions, WorkItem, run_items
from runs.engine.providers import Router, settings_from_env
from runs.engine.types import NOT_SENT_CANCELLED, NOT_STARTED_CANCELLED, ChatRequest


def _settings(fake_llm):
    return settings_from_env({"OPENAI_BASE_URL": fake_llm.base_url + "/v1", "OPENAI_API_KEY": "sk-x"})


def test_a_cancelled_run_sends_nothing_more(fake_llm):
    async def stop():
        return True

    async def main():
        async with Router(_settings(fake_llm), should_stop=stop) as router:
            def ask(purpose, turn):
                return router.complete(ChatRequest(model_id="openai:m", purpose=purpose, turn=turn,
                                                   messages=({"role": "user", "content": f"{purpose} {turn}"},)))
            return await asyncio.gather(ask("candidate", 0), ask("candidate", 1), ask("judge", 0))

    first, later_turn, judge = asyncio.run(main())
    assert first.error == NOT_STARTED_CANCELLED and first.attempts == 0
    assert later_turn.error == NOT_SENT_CANCELLED and judge.error == NOT_SENT_CANCELLED
    assert fake_llm.requests() == []


def test_an_item_generated_before_the_cancel_is_kept_unjudged_and_judges_are_not_asked(fake_llm):
    prompt = parse_blueprint("- id: p\n  prompt: Capital of France?\n  should:\n    - Names Paris\n",
                             fmt="yaml").blueprint.prompts[0]
    (variant,) = expand_variants(parse_blueprint("models: [openai:cand]\n---\n- prompt: x\n", fmt="yaml").blueprint)
    cancelled = asyncio.Event()
    results = []

    async def stop():
        return cancelled.is_set()

    async def main():
        async with Router(_settings(fake_llm), should_stop=stop) as router:
            async def complete(request):
                answer = await router.complete(request)
                if request.purpose == "candidate":
                    cancelled.set()  # the cancel lands while the candidate's answer is on its way back
                return answer

            async def on_result(result):
                results.append(result)

            return await run_items([WorkItem(1, prompt, variant)], complete=complete,
                                   judges=JudgePlan(judges=(JudgeSpec("openai:judge"),)), on_result=on_result,
                                   should_stop=stop, options=PipelineOptions())

    assert asyncio.run(main()) == (0, 1)
    (result,) = results
    assert result.stopped and result.assessment is None
    assert result.response.text.startswith("Echo:") and not result.response.error
    assert [r["model"] for r in fake_llm.requests()] == ["cand"]  # the judge was never asked


# --- a cancel ends every wait -----------------------------------------------------------------------


def _cancel_after(seconds: float):
    """``should_stop`` that says yes ``seconds`` after the first time it is asked."""
    first: list[float] = []

    async def stop():
        now = time.monotonic()
        first.append(now)
        return now - first[0] >= seconds

    return stop


async def _timed(coro, limit: float = 10.0):
    started = time.monotonic()
    result = await asyncio.wait_for(coro, limit)  # on the old code: TimeoutError, the waits ran their course
    return result, time.monotonic() - started


def test_a_cancel_ends_a_retrys_back_off_at_once(fake_llm):
    """The provider asks to wait 60 s before the retry: a cancel 0.3 s in ends the wait, nothing more is sent."""
    async def main():
        async with Router(_settings(fake_llm), should_stop=_cancel_after(0.3)) as router:
            return await _timed(router.complete(ChatRequest(
                model_id="openai:c1-always-429-retry-after-60", purpose="judge",
                messages=({"role": "user", "content": "q"},))))

    result, took = asyncio.run(main())
    assert result.error == NOT_SENT_CANCELLED and took < 2.0, (result.error, took)
    assert len(fake_llm.requests("c1-always-429-retry-after-60")) == 1


def test_a_cancel_ends_a_pacing_hold_and_a_wait_for_a_slot(fake_llm):
    """One call's 429 holds its model for 60 s (every other call of it waits in the pacer); another model's call
    waits for the provider's only slot, held by a call that never answers. A cancel ends both waits."""
    settings = settings_from_env({"OPENAI_BASE_URL": fake_llm.base_url + "/v1", "OPENAI_API_KEY": "sk-x",
                                  "EVALSITE_CONCURRENCY": "1"}, timeout_s=30, max_attempts=1)

    def ask(model, text):
        return ChatRequest(model_id=model, messages=({"role": "user", "content": text},))

    async def main():
        async with Router(settings, should_stop=_cancel_after(0.5)) as router:
            held = await router.complete(ask("openai:c2-always-429-retry-after-60", "first"))  # holds the model
            hang = asyncio.ensure_future(router.complete(ask("openai:c2-hang-always-hang", "hang")))
            await asyncio.sleep(0.05)  # the hanging call has the slot
            paced = asyncio.ensure_future(router.complete(ask("openai:c2-always-429-retry-after-60", "second")))
            queued = asyncio.ensure_future(router.complete(ask("openai:c2-fine", "third")))
            (paced_result, queued_result), took = await _timed(asyncio.gather(paced, queued))
            hang.cancel()
            return held, paced_result, queued_result, took

    held, paced, queued, took = asyncio.run(main())
    assert held.error.startswith("429 from openai") and took < 2.0, (held.error, took)
    assert paced.error == NOT_STARTED_CANCELLED and queued.error == NOT_STARTED_CANCELLED
    assert [r["messages"][-1]["content"] for r in fake_llm.requests()] == ["first", "hang"]


def test_an_items_own_timeout_while_it_waits_for_a_slot_is_not_taken_for_a_cancel(fake_llm):
    """A wait that a cancel can end is ended by cancelling the waiting task (``Router._wait_or_stop``); a timeout of
    the item's own (its budget) cancels the same task, and must stay a timeout: never read as the run's cancel,
    never swallowed. The slot it waited for is not lost: the next call gets it."""
    settings = settings_from_env({"OPENAI_BASE_URL": fake_llm.base_url + "/v1", "OPENAI_API_KEY": "sk-x",
                                  "EVALSITE_CONCURRENCY": "1"}, timeout_s=30, max_attempts=1)

    async def never():
        return False

    def ask(model, text):
        return ChatRequest(model_id=model, messages=({"role": "user", "content": text},))

    async def main():
        async with Router(settings, should_stop=never) as router:
            busy = asyncio.ensure_future(router.complete(ask("openai:t3-slow-latency-600ms", "busy")))
            await asyncio.sleep(0.1)  # it has the only slot
            timed_out = False
            try:
                async with asyncio.timeout(0.2):
                    await router.complete(ask("openai:t3-fine", "waits"))
            except TimeoutError:
                timed_out = True
            first = await busy
            after = await router.complete(ask("openai:t3-fine", "after"))
            return timed_out, first, after

    timed_out, first, after = asyncio.run(main())
    assert timed_out
    assert first.ok and after.ok and after.text.startswith("Echo:")
    assert [r["messages"][-1]["content"] for r in fake_llm.requests()] == ["busy", "after"]
