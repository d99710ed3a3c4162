"""After a cancel no request leaves the process: not an item's first call, not a later turn, not a judge.

An item stopped under way is not scored: it goes back to pending, keeping a complete generation
so that a resume judges it without asking the model again (docs/runs.md, "Cancel").
"""

import asyncio

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
