"""The per-item budget holds when the time goes in synchronous code (issue 23, item 3).

An asyncio timeout stops an item only at an ``await``: a point check that blocks (a slow regex, a slow
sync function, many of them) held the event loop past the budget, and the item was stored done. The
pipeline runs sync checks off the loop, where the timeout can leave them, and fails an item whose
clock passed its budget anyway.
"""

from __future__ import annotations

import asyncio
import time

from blueprints.spec.limits import Limits
from blueprints.spec.parse import parse_blueprint
from runs.engine.config import EngineConfig
from runs.engine.generate import expand_variants
from runs.engine.judge import JudgePlan, JudgeSpec
from runs.engine.pipeline import PipelineOptions, WorkItem, run_items
from runs.engine.points import PointResult, evaluate_point
from runs.engine.types import ChatResult

BUDGET_REASON = "took longer than 1 s (the per-item budget, EVALSITE_ITEM_BUDGET_S)"
CATASTROPHIC = r"^(a|a)+$"


def _prompt(text: str):
    parsed = parse_blueprint(text, fmt="yaml")
    assert parsed.ok, [e.message for e in parsed.errors]
    return parsed.blueprint.prompts


VARIANT = expand_variants(parse_blueprint("models: [openai:cand]\n---\n- prompt: x\n", fmt="yaml").blueprint)[0]


async def _answer(request):
    await asyncio.sleep(0.01)
    if request.purpose == "judge":
        return ChatResult(text="<reflection>Yes.</reflection><classification>CLASS_EXACTLY_MET</classification>")
    return ChatResult(text="a" * 40 + "b")


def _run(prompts, *, budget_s=1.0, evaluate=evaluate_point, config=None, judges=()):
    results = {}

    async def keep(result):
        results[result.item.key] = result

    async def main():
        options = PipelineOptions(item_budget_s=budget_s, evaluate_point=evaluate, config=config)
        items = [WorkItem(key=p.id, prompt=p, variant=VARIANT) for p in prompts]
        await run_items(items, complete=_answer, judges=JudgePlan(judges=judges), on_result=keep, options=options)

    started = time.monotonic()
    asyncio.run(main())
    return results, time.monotonic() - started


def _failed_for_time(result):
    assert result.assessment is None and result.internal_error, result
    assert result.response.error.startswith(BUDGET_REASON), result.response.error


def test_a_slow_sync_check_is_failed_at_the_budget_not_stored_done():
    def slow(fn, args, response, **kwargs):
        time.sleep(4)  # a sync function that never hands the loop back
        return PointResult(score=1.0)

    (prompt,) = _prompt("- id: p\n  prompt: hi\n  should: [$contains: a]\n")
    results, elapsed = _run([prompt], evaluate=slow)
    _failed_for_time(results["p"])
    assert elapsed < 3.5  # failed at about 1 s, not after the check's 4 s (the thread ends on its own)


def test_many_short_sync_checks_that_add_up_past_the_budget_fail_the_item():
    def quarter(fn, args, response, **kwargs):
        time.sleep(0.25)
        return PointResult(score=1.0)

    points = "".join(f"\n    - $contains: a{i}" for i in range(12))  # 3 s of checks, 1 s of budget
    (prompt,) = _prompt(f"- id: p\n  prompt: hi\n  should:{points}\n")
    results, elapsed = _run([prompt], evaluate=quarter)
    _failed_for_time(results["p"])
    assert elapsed < 2.8


def test_slow_regexes_in_one_item_are_failed_at_the_budget():
    # Six points with a catastrophic pattern, each stopped by the regex limit (0.5 s of CPU): 3 s in sync code.
    config = EngineConfig(limits=Limits(regex_timeout_s=0.5))
    points = "".join(f"\n    - $matches: '{CATASTROPHIC}'" for _ in range(6))
    (prompt,) = _prompt(f"- id: p\n  prompt: hi\n  should:{points}\n")
    results, elapsed = _run([prompt], config=config)
    _failed_for_time(results["p"])
    assert elapsed < 2.8
    # Within the budget, the same check is not evaluated for its regex, with the reason: never a score.
    results, _ = _run([prompt], budget_s=30, config=EngineConfig(limits=Limits(regex_timeout_s=0.05)))
    assert all(p.score is None and "took longer than 0.05 s" in p.error
               for p in results["p"].assessment.point_assessments)


def test_an_item_that_held_the_loop_past_its_budget_is_failed_when_it_returns():
    async def blocking(fn, args, response, **kwargs):  # async, but blocks the loop: left on it
        time.sleep(1.5)
        return PointResult(score=1.0)

    (prompt,) = _prompt("- id: p\n  prompt: hi\n  should: [$contains: a]\n")
    results, _ = _run([prompt], evaluate=blocking)
    _failed_for_time(results["p"])


def test_other_items_calls_go_on_while_a_slow_check_runs():
    def slow_on_one(fn, args, response, **kwargs):
        time.sleep(3)
        return PointResult(score=1.0)

    slow, judged = _prompt("- id: slow\n  prompt: hi\n  should: [$contains: a]\n"
                           "- id: judged\n  prompt: hi\n  should: [Says hello]\n")
    done_at = {}

    async def keep_time(result):
        done_at[result.item.key] = time.monotonic()

    async def main():
        options = PipelineOptions(item_budget_s=1.0, evaluate_point=slow_on_one)
        items = [WorkItem(key=p.id, prompt=p, variant=VARIANT) for p in (slow, judged)]
        await run_items(items, complete=_answer, judges=JudgePlan(judges=(JudgeSpec("openai:judge"),)),
                        on_result=keep_time, options=options)

    started = time.monotonic()
    asyncio.run(main())
    # The judged item's calls are answered while the slow check holds its thread, not after it.
    assert done_at["judged"] - started < 0.9, done_at["judged"] - started


def test_checks_within_the_budget_score_as_before():
    (prompt,) = _prompt("- id: p\n  prompt: hi\n  should: [$contains: a, '$matches: \"b$\"']\n")
    results, _ = _run([prompt], budget_s=30)
    assessment = results["p"].assessment
    assert results["p"].internal_error is None and assessment.score == 1.0


def test_only_our_substring_checks_on_bounded_text_skip_the_lane():
    from runs.engine.pipeline import QUICK_ARG_CHARS, QUICK_TEXT_CHARS, _quick

    assert _quick(("contains", "a", "text"))
    assert _quick(("icontains_at_least_n_of", [2, ["a", "b", "c"]], "text"))
    assert not _quick(("matches", "^(a|a)+$", "text"))  # a regex: always the lane (its own time limit)
    assert not _quick(("contains", "a", "x" * (QUICK_TEXT_CHARS + 1)))
    assert not _quick(("contains_any_of", ["y" * (QUICK_ARG_CHARS + 1)], "text"))
    assert not _quick(("contains",))

    # A substring check run by an evaluator that is not ours still leaves the loop (the test above: 4 s).
    seen = []

    def spy(fn, args, response, **kwargs):
        import threading
        seen.append(threading.current_thread().name)
        return PointResult(score=1.0)

    (prompt,) = _prompt("- id: p\n  prompt: hi\n  should: [$contains: a]\n")
    _run([prompt], evaluate=spy)
    assert seen and seen[0].startswith("evalsite-points")
