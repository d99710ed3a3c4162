"""After a cancel, an item whose first call is still waiting for a slot does not start; calls of started
items (later turns, judges) go on."""

import asyncio

from runs.engine.providers import Router, settings_from_env
from runs.engine.types import NOT_STARTED_CANCELLED, ChatRequest


def test_a_cancelled_run_sends_no_first_call_but_finishes_what_started(fake_llm):
    settings = settings_from_env({"OPENAI_BASE_URL": fake_llm.base_url + "/v1", "OPENAI_API_KEY": "sk-x"})

    async def stop():
        return True

    async def main():
        async with Router(settings, should_stop=stop) as router:
            def ask(purpose, turn):
                return router.complete(ChatRequest(model_id="openai:m", purpose=purpose, turn=turn,
                                                   messages=({"role": "user", "content": f"{purpose} {turn}"},)))
            return await asyncio.gather(ask("candidate", 0), ask("candidate", 1), ask("judge", 0))

    first, later_turn, judge = asyncio.run(main())
    assert first.error == NOT_STARTED_CANCELLED and first.attempts == 0
    assert later_turn.text == "Echo: candidate 1" and judge.text == "Echo: judge 0"
    assert [r["messages"][-1]["content"] for r in fake_llm.requests()] in (
        ["candidate 1", "judge 0"], ["judge 0", "candidate 1"])
