"""Judge repeats: each judge asked K times about the same answer, each asking its own cache entry, the score
from the first asking alone, and the flip rate counted from the stored verdicts (runs/engine/repeats.py)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from blueprints.spec.schema import Point
from runs.engine.assess import assess_response, judged_point_assessment
from runs.engine.estimate import CacheProbe, estimate_run
from runs.engine.export_shape import export_response
from runs.engine.judge import (JUDGE_MAX_TOKENS, JUDGE_TEMPERATURE, JudgePlan, JudgeSpec, JudgeTask, JudgeVerdict,
                               build_judge_messages, judge_point)
from runs.engine.providers import MemoryCache, Router, cache_key, settings_from_env
from runs.engine.repeats import flip_report, point_flips
from runs.engine.types import ChatRequest, GeneratedResponse, Turn

from .conftest import ScriptedModels, verdict

IDENTITY = {"provider": "openai", "model": "gpt-4o-mini", "url": "https://api.openai.com/v1/chat/completions"}
HI = [{"role": "user", "content": "hi"}]
PINNED = "d5ff6e6037a02dbbb030fd421cc08e44eb1f4dd727502c203ce26310f2c0ca61"  # test_providers_cache's pinned key

A = JudgeSpec("openai:gpt-4o-mini", "holistic", "judge-a")
B = JudgeSpec("openai:gpt-4.1-mini", "standard", "judge-b")
TASK = JudgeTask(criterion="Names Paris", conversation=(Turn("user", "Capital of France?"),
                                                        Turn("assistant", "Paris.", True)),
                 subject_text="Paris.", all_criteria=("[should] Names Paris",))
MET, MAJOR, UNMET = (verdict("CLASS_EXACTLY_MET", "Names it."), verdict("CLASS_MAJORLY_MET", "Mostly."),
                     verdict("CLASS_UNMET", "It does not."))


def run(coro):
    return asyncio.run(coro)


def by_repeat(first: str, later: str):
    """A judge that answers ``first`` to its first asking and ``later`` to every re-asking."""
    return lambda request: first if request.repeat == 0 else later


# -- the cache key -----------------------------------------------------------------------------


def test_the_first_asking_keeps_the_key_it_always_had_and_each_repeat_gets_its_own():
    assert cache_key(IDENTITY, HI, temperature=0, max_tokens=1500) == PINNED
    assert cache_key(IDENTITY, HI, temperature=0, max_tokens=1500, repeat=0) == PINNED
    keys = {cache_key(IDENTITY, HI, temperature=0, max_tokens=1500, repeat=r) for r in range(5)}
    assert len(keys) == 5
    # A repeat is not a trial: the two never share a key.
    assert cache_key(IDENTITY, HI, temperature=0, max_tokens=1500, repeat=1) != \
        cache_key(IDENTITY, HI, temperature=0, max_tokens=1500, trial=1)


class Answering:
    """An OpenAI-shaped endpoint answering each request with the next of ``texts`` (the last repeats)."""

    def __init__(self, *texts: str):
        self.texts, self.calls = texts, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        return httpx.Response(200, json={"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def judged_through_router(plan: JudgePlan, handler, cache: MemoryCache):
    async def main():
        settings = settings_from_env({"OPENAI_API_KEY": "k"}, max_attempts=1)
        async with Router(settings, cache=cache, transport=httpx.MockTransport(handler)) as router:
            return await judge_point(TASK, plan, router.complete)

    return run(main())


def first_asking_key(judge: JudgeSpec, plan: JudgePlan) -> str:
    """The key a judge's call about TASK had before repeats existed: identity, messages, temperature, limit."""
    identity = {"provider": "openai", "model": judge.model.split(":", 1)[1],
                "url": "https://api.openai.com/v1/chat/completions"}
    return cache_key(identity, build_judge_messages(TASK, judge, plan), temperature=JUDGE_TEMPERATURE,
                     max_tokens=JUDGE_MAX_TOKENS)


def test_a_judge_is_asked_k_times_each_a_cache_entry_of_its_own():
    plan = JudgePlan(judges=(A,), repeats=3)
    handler, cache = Answering(MET, MAJOR, MET), MemoryCache()

    result = judged_through_router(plan, handler, cache)

    assert handler.calls == 3 and len(cache) == 3
    assert first_asking_key(A, plan) in cache._data  # the first asking's key is the one of a run asking once
    assert [(v.role, v.repeat) for v in result.verdicts] == [("primary", 0), ("repeat", 1), ("repeat", 2)]
    # Asked again later, every asking comes from its own cache entry: no call, and each its own answer.
    again = judged_through_router(plan, Answering("never sent"), cache)
    assert [v.cached for v in again.verdicts] == [True, True, True]
    assert sorted(v.label for v in again.verdicts) == sorted(v.label for v in result.verdicts)


def test_asking_once_makes_exactly_the_call_and_the_key_of_before():
    plan = JudgePlan(judges=(A,))
    handler, cache = Answering(MET), MemoryCache()

    result = judged_through_router(plan, handler, cache)

    assert handler.calls == 1 and list(cache._data) == [first_asking_key(A, plan)]
    assert [v.to_dict().get("repeat", "absent") for v in result.verdicts] == ["absent"]


def test_every_asking_sends_the_same_request_with_its_repeat_index():
    models = ScriptedModels({A.model: MET, B.model: MET})
    run(judge_point(TASK, JudgePlan(judges=(A, B), repeats=3), models))
    for judge in (A, B):
        calls = models.calls_to(judge.model)
        assert sorted(c.repeat for c in calls) == [0, 1, 2]
        assert all(c.messages == calls[0].messages for c in calls)
    assert any("(asking 3 of 3)" in c.label for c in models.requests)


# -- the score comes from the first asking --------------------------------------------------------


@pytest.mark.parametrize("later", [UNMET, MAJOR, MET, "nonsense, twice"])
def test_three_askings_score_exactly_as_one_when_the_first_answers_are_the_same(later):
    script = {A.model: by_repeat(MET, later), B.model: by_repeat(MAJOR, later)}
    once = run(judge_point(TASK, JudgePlan(judges=(A, B)), ScriptedModels(script)))
    thrice = run(judge_point(TASK, JudgePlan(judges=(A, B), repeats=3), ScriptedModels(script)))

    assert (thrice.score, thrice.reflection, thrice.judge_model_id, thrice.std_dev, thrice.warning) == \
        (once.score, once.reflection, once.judge_model_id, once.std_dev, once.warning) == \
        (0.88, once.reflection, "consensus(judge-a(openai:gpt-4o-mini), judge-b(openai:gpt-4.1-mini))", 0.125,
         None)
    assert thrice.verdicts[:2] == once.verdicts
    assert [v.role for v in thrice.verdicts[2:]] == ["repeat"] * 4
    point = Point(text=TASK.criterion)
    assert judged_point_assessment(point, thrice).individual_judgements == \
        judged_point_assessment(point, once).individual_judgements


def test_a_response_scores_and_exports_as_one_asking_would():
    from blueprints.spec.schema import Message, Prompt

    prompt = Prompt(id="capital", messages=[Message(role="user", content="Capital of France?")],
                    points=[Point(text="Names Paris"), Point(text="Mentions the Seine")])
    response = GeneratedResponse(prompt_id="capital", model_variant_id="m", text="Paris.", final_text="Paris.",
                                 conversation=(Turn("user", "Capital of France?"), Turn("assistant", "Paris.", True)))
    script = {A.model: by_repeat(MET, UNMET), B.model: by_repeat(MAJOR, MET)}

    def assessed(repeats):
        return run(assess_response(prompt, response, judges=JudgePlan(judges=(A, B), repeats=repeats),
                                   complete=ScriptedModels(script)))

    once, thrice = assessed(1), assessed(3)
    assert thrice.score == once.score == 0.88
    assert thrice.judge_agreement == once.judge_agreement
    assert export_response(thrice) == export_response(once)
    # The bill is every asking: three times the calls.
    assert thrice.judge_usage.calls == 3 * once.judge_usage.calls == 12


def test_the_backup_stands_in_on_the_first_asking_alone_and_is_not_repeated():
    backup = JudgeSpec("openai:backup", "holistic", "backup-x")
    plan = JudgePlan(judges=(A,), backup=backup, repeats=3)
    models = ScriptedModels({A.model: by_repeat("unreadable", MET), backup.model: UNMET})

    result = run(judge_point(TASK, plan, models))

    assert result.backup_used and result.score == 0.0  # the re-askings' MET never makes the score
    assert [(v.role, v.repeat, v.ok) for v in result.verdicts] == \
        [("primary", 0, False), ("backup", 0, True), ("repeat", 1, True), ("repeat", 2, True)]
    assert len(models.calls_to(backup.model)) == 1


def test_a_point_whose_first_askings_all_failed_is_not_scored_by_its_re_askings():
    from blueprints.spec.schema import Message, Prompt

    prompt = Prompt(id="p", messages=[Message(role="user", content="Capital of France?")],
                    points=[Point(text="Names Paris")])
    response = GeneratedResponse(prompt_id="p", model_variant_id="m", text="Paris.", final_text="Paris.",
                                 conversation=(Turn("user", "Capital of France?"), Turn("assistant", "Paris.", True)))
    models = ScriptedModels({A.model: by_repeat("unreadable", MET)})

    assessed = run(assess_response(prompt, response, judges=JudgePlan(judges=(A,), configured=True, repeats=2),
                                   complete=models))

    assert assessed.score is None and assessed.judges_all_failed
    assert "every judge call failed (1 of 1)" in assessed.not_evaluated_reason


def test_a_re_asking_is_stored_and_read_back_with_its_index():
    v = JudgeVerdict(judge=A, role="repeat", repeat=2, score=1.0, label="CLASS_EXACTLY_MET", calls=1)
    stored = json.loads(json.dumps(v.to_dict()))
    assert stored["role"] == "repeat" and stored["repeat"] == 2
    assert JudgeVerdict.from_dict(stored) == v
    assert "repeat" not in JudgeVerdict(judge=A, score=1.0).to_dict()


# -- the flip rate --------------------------------------------------------------------------------


def stored(judge: JudgeSpec, *labels: str | None, backup: str | None = None) -> list[dict]:
    """A judge's askings as stored: the first, then the re-askings (None: an asking that failed)."""
    scores = {"CLASS_UNMET": 0.0, "CLASS_PARTIALLY_MET": 0.25, "CLASS_MAJORLY_MET": 0.75,
              "CLASS_EXACTLY_MET": 1.0, "CLASS_MAJOR": 0.75}
    out = []
    for i, label in enumerate(labels):
        out.append(JudgeVerdict(judge=judge, role="primary" if i == 0 else "repeat", repeat=i, label=label,
                                score=scores.get(label), error=None if label else "the call failed: 503").to_dict())
    if backup:
        out.append(JudgeVerdict(judge=JudgeSpec("openai:backup", id="backup"), role="backup", label=backup,
                                score=scores[backup]).to_dict())
    return out


@pytest.mark.parametrize("verdicts, flips, pairs", [
    (stored(A, "CLASS_EXACTLY_MET", "CLASS_EXACTLY_MET", "CLASS_EXACTLY_MET"), 0, 1),
    (stored(A, "CLASS_EXACTLY_MET", "CLASS_EXACTLY_MET", "CLASS_UNMET"), 1, 1),
    (stored(A, "CLASS_EXACTLY_MET", None, "CLASS_MAJORLY_MET"), 1, 1),  # two answered: counted
    (stored(A, "CLASS_EXACTLY_MET", None, None), 0, 0),  # one answer cannot flip
    (stored(A, None, "CLASS_UNMET", "CLASS_EXACTLY_MET"), 1, 1),
    # The 9-point scale's two spellings of one class are one label.
    (stored(A, "CLASS_MAJOR", "CLASS_MAJORLY_MET"), 0, 1),
    (stored(A, "CLASS_EXACTLY_MET", "CLASS_UNMET") + stored(B, "CLASS_UNMET", "CLASS_UNMET"), 1, 2),
    (stored(A, "CLASS_EXACTLY_MET") + stored(B, "CLASS_UNMET"), 0, 0),  # asked once: nothing to count
    (stored(A, None, None, backup="CLASS_UNMET"), 0, 0),  # the backup is never re-asked
])
def test_a_point_flips_when_a_judge_gives_different_labels(verdicts, flips, pairs):
    point = point_flips(verdicts)
    assert (point.flips, point.pairs, point.flipped) == (flips, pairs, flips > 0)
    assert point_flips([JudgeVerdict.from_dict(v) for v in verdicts]).flips == flips


def test_the_run_flip_rate_counts_points_pairs_and_judges():
    points = [
        stored(A, "CLASS_EXACTLY_MET", "CLASS_UNMET", "CLASS_EXACTLY_MET")  # A flips, spread 1
        + stored(B, "CLASS_EXACTLY_MET", "CLASS_EXACTLY_MET", "CLASS_EXACTLY_MET"),
        stored(A, "CLASS_MAJORLY_MET", "CLASS_MAJORLY_MET", "CLASS_MAJORLY_MET")
        + stored(B, "CLASS_MAJORLY_MET", "CLASS_EXACTLY_MET", None),  # B flips, spread 0.25
        stored(A, "CLASS_UNMET", "CLASS_UNMET", "CLASS_UNMET")
        + stored(B, "CLASS_UNMET", None, None),  # B answered once here: not counted
        stored(A, "CLASS_UNMET"),  # a point of a run asking once: not counted at all
        [],  # a function point
    ]
    report = flip_report(points, repeats=3)

    assert (report.points.flipped, report.points.n, report.points.rate) == (2, 3, 2 / 3)
    assert (report.pairs.flipped, report.pairs.n) == (2, 5)
    judges = {j.judge_id: j.count for j in report.judges}
    assert [j.judge_id for j in report.judges] == [A.judge_id, B.judge_id]
    assert (judges[A.judge_id].flipped, judges[A.judge_id].n, judges[A.judge_id].spread_max) == (1, 3, 1.0)
    assert (judges[B.judge_id].flipped, judges[B.judge_id].n) == (1, 2)
    assert judges[B.judge_id].mean_spread == pytest.approx(0.125)
    out = report.to_json()
    assert out["points"] == {"flipped": 2, "n": 3, "rate": 0.6667, "meanSpread": 0.4167, "maxSpread": 1.0}
    assert out["judges"][1] == {"judgeId": B.judge_id, "model": B.model, "flipped": 1, "n": 2, "rate": 0.5,
                                "meanSpread": 0.125, "maxSpread": 0.25}


def test_no_repeats_no_flip_rate():
    report = flip_report([stored(A, "CLASS_UNMET"), stored(B, "CLASS_EXACTLY_MET")], repeats=1)
    assert report.empty and report.points.rate is None and report.to_json()["pairs"]["rate"] is None


# -- the estimate is the bill ---------------------------------------------------------------------


BLUEPRINT = """title: Bill
models: [openai:cand-a, openai:cand-b]
---
- id: capital
  prompt: Capital of France?
  should:
    - Names Paris
    - Mentions the Seine
    - $contains: Paris
- id: sum
  prompt: 2 + 2?
  should:
    - Gives 4
"""


def parsed():
    from blueprints.spec import parse_blueprint

    result = parse_blueprint(BLUEPRINT)
    assert result.blueprint is not None, result.errors
    return result.blueprint


@pytest.mark.parametrize("repeats", [1, 2, 5])
def test_the_estimate_counts_every_asking(repeats):
    bp = parsed()
    once = estimate_run(bp, bp.models, JudgePlan(judges=(A, B)))
    asked = estimate_run(bp, bp.models, JudgePlan(judges=(A, B), repeats=repeats))

    # 2 models x (2 + 1) judged points x 2 judges, each asked `repeats` times
    assert once.judge_calls == 2 * 3 * 2 == 12
    assert asked.judge_calls == repeats * 12 and asked.generation_calls == once.generation_calls == 4
    for line_once, line in zip(once.judges, asked.judges):
        assert (line.input_tokens, line.output_tokens) == (repeats * line_once.input_tokens,
                                                           repeats * line_once.output_tokens)
        assert line_once.cost and line.cost == pytest.approx(repeats * line_once.cost)  # the judges have prices
    assert asked.repair_calls == repeats * 12
    assert asked.to_json()["calls"]["judge"] == repeats * 12


def test_the_estimate_counts_a_cached_first_asking_free_and_its_re_askings_as_calls():
    bp = parsed()
    plan = JudgePlan(judges=(A,), configured=True, repeats=3)
    settings = settings_from_env({"OPENAI_API_KEY": "k"})
    store: dict[str, dict] = {}
    probe = CacheProbe(settings, store.get)

    def cached(model: str, messages, *, trial=0, repeat=0, max_tokens=None, temperature=0.0):
        identity = {"provider": "openai", "model": model.split(":", 1)[1],
                    "url": "https://api.openai.com/v1/chat/completions"}
        key = cache_key(identity, messages, temperature=temperature, trial=trial, repeat=repeat,
                        max_tokens=max_tokens if max_tokens is not None else 1500)
        store[key] = {"text": MET}

    # Every generation is cached, and every judge's first asking: only the re-askings are left to send.
    from runs.engine.assess import judge_tasks
    from runs.engine.generate import expand_variants

    for prompt in bp.prompts:
        for variant in expand_variants(bp, bp.models):
            cached(variant.base_model_id, [{"role": "user", "content": prompt.messages[0].content}],
                   temperature=variant.temperature_for(prompt))
            conversation = (Turn("user", prompt.messages[0].content), Turn("assistant", MET, True))
            response = GeneratedResponse(prompt_id=prompt.id, model_variant_id="", conversation=conversation,
                                         text=MET, final_text=MET)
            for task in judge_tasks(prompt, response):
                cached(A.model, build_judge_messages(task, A, plan), max_tokens=JUDGE_MAX_TOKENS,
                       temperature=JUDGE_TEMPERATURE)

    estimate = estimate_run(bp, bp.models, plan, cache=probe)

    assert estimate.generation_calls == 0
    (judge,) = estimate.judges
    assert (judge.cached, judge.calls) == (2 * 3, 2 * 3 * 2)


def test_the_ask_function_gets_the_repeat_index_only_for_re_askings():
    asked = []

    async def ask(judge, task, plan, complete, role, *rest):
        asked.append((judge.id, role, rest))
        return JudgeVerdict(judge=judge, role=role, repeat=rest[0] if rest else 0, score=1.0, label="CLASS_EXACTLY_MET")

    async def unused(request: ChatRequest):
        raise AssertionError("the mocked judges make no calls")

    run(judge_point(TASK, JudgePlan(judges=(A,)), unused, ask=ask))
    assert asked == [("judge-a", "primary", ())]
    asked.clear()
    run(judge_point(TASK, JudgePlan(judges=(A,), repeats=3), unused, ask=ask))
    assert sorted(asked) == [("judge-a", "primary", ()), ("judge-a", "repeat", (1,)), ("judge-a", "repeat", (2,))]
