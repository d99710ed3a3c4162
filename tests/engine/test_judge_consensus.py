"""Asking judges about one point: requests, repairs, partial failures, the backup, the consensus."""

from __future__ import annotations

import asyncio

import pytest

from runs.engine.judge import (
    FIVE_POINT,
    JUDGE_MAX_TOKENS,
    JudgePlan,
    JudgeSpec,
    JudgeTask,
    JudgeVerdict,
    ask_judge,
    consensus,
    judge_point,
)
from runs.engine.types import ChatRequest, ChatResult, Turn, Usage

from .conftest import ScriptedModels, verdict

TASK = JudgeTask(
    criterion="Mentions the boiling point",
    conversation=(Turn("user", "When does water boil?"), Turn("assistant", "At 100 °C.", generated=True)),
    subject_text="At 100 °C.",
)
A = JudgeSpec("test:a", id="a")
B = JudgeSpec("test:b", approach="standard")
C = JudgeSpec("test:c", id="c", approach="prompt-aware")
BACKUP = JudgeSpec("test:backup", id="backup-b")


def run(coroutine):
    return asyncio.run(coroutine)


def test_each_judge_gets_one_request_with_the_judge_settings():
    models = ScriptedModels({"test:a": verdict("CLASS_EXACTLY_MET"), "test:b": verdict("CLASS_MAJORLY_MET")})
    result = run(judge_point(TASK, JudgePlan(judges=(A, B)), models))
    assert sorted(r.model_id for r in models.requests) == ["test:a", "test:b"]
    for request in models.requests:
        assert request.purpose == "judge" and request.temperature == 0.0 and request.max_tokens == JUDGE_MAX_TOKENS
        assert [m["role"] for m in request.messages] == ["system", "user"]
    assert result.score == 0.88  # mean 0.875, rounded half up
    assert result.judge_model_id == "consensus(a(test:a), standard(test:b))"
    assert result.error is None and result.warning is None
    assert result.std_dev == pytest.approx(0.125)
    assert not result.disagreement


def test_judges_of_one_point_are_asked_at_the_same_time():
    barrier = asyncio.Barrier(3)

    async def complete(request: ChatRequest) -> ChatResult:
        await asyncio.wait_for(barrier.wait(), timeout=2)  # fails unless all three are in flight together
        return ChatResult(text=verdict("CLASS_EXACTLY_MET"))

    result = run(judge_point(TASK, JudgePlan(judges=(A, B, C)), complete))
    assert result.score == 1.0 and len(result.individual) == 3


def test_a_verdict_keeps_the_judges_words_answer_usage_and_latency():
    models = ScriptedModels({"test:a": verdict("CLASS_MAJORLY_MET", "Gives 100 °C but not the pressure.")})
    v = run(ask_judge(A, TASK, JudgePlan(judges=(A,)), models))
    assert v.ok and v.score == 0.75 and v.label == "CLASS_MAJORLY_MET"
    assert v.reflection == "Gives 100 °C but not the pressure."
    assert v.raw_answer == verdict("CLASS_MAJORLY_MET", "Gives 100 °C but not the pressure.")
    assert (v.input_tokens, v.output_tokens, v.latency_ms, v.cost_usd, v.calls) == (100, 20, 5.0, 0.001, 1)


def test_an_unreadable_answer_is_asked_for_once_more_and_the_repair_counts():
    models = ScriptedModels({"test:a": ["Looks good to me!", verdict("CLASS_EXACTLY_MET")]})
    v = run(ask_judge(A, TASK, JudgePlan(judges=(A,)), models))
    assert v.ok and v.score == 1.0
    assert v.raw_answers == ("Looks good to me!", verdict("CLASS_EXACTLY_MET"))
    assert v.calls == 2 and v.input_tokens == 200 and v.cost_usd == pytest.approx(0.002)
    first, second = models.requests
    assert second.messages[1]["content"].startswith(first.messages[1]["content"])
    assert "could not be read (No classification found" in second.messages[1]["content"]


def test_an_answer_unreadable_twice_is_an_error_that_keeps_both_answers():
    models = ScriptedModels({"test:a": ["Looks good!", "<classification>CLASS_SUPERB</classification>"]})
    v = run(ask_judge(A, TASK, JudgePlan(judges=(A,)), models))
    assert not v.ok and v.score is None and v.label is None
    assert v.error == "unreadable answer, also when asked again: Invalid classification value: 'CLASS_SUPERB'"
    assert v.raw_answers == ("Looks good!", "<classification>CLASS_SUPERB</classification>")
    assert len(models.requests) == 2


def test_a_failed_call_is_not_repaired_and_says_why():
    models = ScriptedModels({"test:a": ChatResult(error="429 from test after 3 attempts", retryable=True,
                                                  latency_ms=30.0, attempts=3)})
    v = run(ask_judge(A, TASK, JudgePlan(judges=(A,)), models))
    assert v.error == "the call failed: 429 from test after 3 attempts"
    assert v.raw_answers == () and v.calls == 1 and v.latency_ms == 30.0
    assert v.cost_usd is None  # unknown price, never "free"


def test_a_failed_repair_call_is_an_error_naming_both_problems():
    models = ScriptedModels({"test:a": ["meh", ChatResult(error="timed out after 45 s")]})
    v = run(ask_judge(A, TASK, JudgePlan(judges=(A,)), models))
    assert v.error.startswith("unreadable answer (No classification found")
    assert v.error.endswith("asking again failed: timed out after 45 s")


def test_a_partial_failure_keeps_the_consensus_of_those_that_answered():
    models = ScriptedModels({"test:a": verdict("CLASS_MAJORLY_MET"), "test:b": ChatResult(error="HTTP 500")})
    result = run(judge_point(TASK, JudgePlan(judges=(A, B)), models))
    assert result.score == 0.75
    assert [v.judge_id for v in result.individual] == ["a(test:a)"]
    assert [v.judge_id for v in result.failed] == ["standard(test:b)"]
    assert result.judge_model_id == "consensus(a(test:a))"
    assert result.error is None
    assert result.warning == ("1 of 2 judges failed (standard(test:b): the call failed: HTTP 500); "
                              "partial consensus of the 1 that answered.")
    assert result.warning in result.reflection
    assert result.std_dev is None


def test_when_every_judge_fails_there_is_no_score_and_the_reasons_are_given():
    models = ScriptedModels({})  # no key for any judge
    result = run(judge_point(TASK, JudgePlan(judges=(A, B), configured=True), models))
    assert result.score is None
    assert result.error == ("All judges failed in consensus mode. "
                            "a(test:a): the call failed: no API key is configured for test:a; "
                            "standard(test:b): the call failed: no API key is configured for test:b")
    assert len(result.verdicts) == 2 and result.individual == ()


def test_the_backup_judge_serves_only_when_every_default_judge_failed():
    models = ScriptedModels({"test:backup": verdict("CLASS_MODERATELY_MET")})
    result = run(judge_point(TASK, JudgePlan(judges=(A, B), backup=BACKUP), models))
    assert result.score == 0.5 and result.backup_used
    assert result.judge_model_id == "consensus(backup-b(test:backup))"
    assert [v.role for v in result.verdicts] == ["primary", "primary", "backup"]
    assert "NOTE: Backup judge was used because all 2 judges failed" in result.reflection
    assert result.error is None

    models = ScriptedModels({"test:a": verdict("CLASS_EXACTLY_MET"), "test:backup": verdict("CLASS_UNMET")})
    result = run(judge_point(TASK, JudgePlan(judges=(A, B), backup=BACKUP), models))
    assert result.score == 1.0 and not result.backup_used
    assert models.calls_to("test:backup") == []  # one default judge answered: no backup (deviation 17)


def test_a_failed_backup_leaves_the_point_without_a_score():
    result = run(judge_point(TASK, JudgePlan(judges=(A,), backup=BACKUP), ScriptedModels({})))
    assert result.score is None and result.error.startswith("All judges failed in consensus mode.")
    assert "backup-b(test:backup)" in result.error


def test_blueprint_judges_never_call_the_sites_backup():
    # The plan decides whether a backup serves (plan_judges: the site's only for a blueprint without judges;
    # a run may name one of its own, runs.start.judge_plan_for); judge_point asks the backup the plan holds.
    from blueprints.spec.schema import CoverageConfig, Judge
    from runs.engine.judge import plan_judges

    models = ScriptedModels({"test:backup": verdict("CLASS_EXACTLY_MET")})
    plan = plan_judges(CoverageConfig(judges=[Judge(model="test:a", approach="holistic", id="a")]),
                       default_judges=["test:d"], backup_judge="test:backup")
    assert plan.configured and plan.backup is None
    assert run(judge_point(TASK, plan, models)).score is None
    assert models.calls_to("test:backup") == []


def test_without_judges_no_call_is_made_and_the_point_says_why():
    models = ScriptedModels({})
    result = run(judge_point(TASK, JudgePlan(judges=()), models))
    assert result.score is None and "EVALSITE_DEFAULT_JUDGES" in result.error
    assert models.requests == []


def _v(judge: JudgeSpec, score: float) -> JudgeVerdict:
    return JudgeVerdict(judge=judge, score=score, label="x", reflection="r")


@pytest.mark.parametrize("scores, mean, std, disagreement", [
    ([0.125], 0.13, None, False),  # halves round up, as JavaScript's Math.round
    ([0.001, 0.0], 0.0, 0.0005, False),
    ([0.0, 1.0], 0.5, 0.5, True),
    ([0.25, 0.75, 1.0], 0.67, 0.3118, True),
    ([0.5, 0.75, 1.0], 0.75, 0.2041, False),
])
def test_consensus_is_the_mean_rounded_with_a_population_spread(scores, mean, std, disagreement):
    judges = [JudgeSpec(f"m:{i}", id=f"j{i}") for i in range(len(scores))]
    result = consensus([_v(j, s) for j, s in zip(judges, scores)])
    assert result.score == mean
    assert result.std_dev == (None if std is None else pytest.approx(std, abs=1e-4))
    assert result.disagreement is disagreement


def test_the_scale_maps_classifications_to_scores_before_the_mean():
    models = ScriptedModels({"test:a": verdict("CLASS_TRACE"), "test:b": verdict("CLASS_UNMET")})
    from runs.engine.judge import NINE_POINT

    result = run(judge_point(TASK, JudgePlan(judges=(A, B), scale=NINE_POINT), models))
    assert [v.score for v in result.individual] == [0.125, 0.001]
    assert result.score == 0.06  # (0.125 + 0.001) / 2 = 0.063, rounded

    five = run(judge_point(TASK, JudgePlan(judges=(A,), scale=FIVE_POINT),
                           ScriptedModels({"test:a": verdict("CLASS_TRACE")})))
    assert five.score is None  # CLASS_TRACE is not on the 5-point scale, even after a repair


def test_a_cached_verdict_is_marked():
    models = ScriptedModels({"test:a": ChatResult(text=verdict("CLASS_EXACTLY_MET"), cached=True, usage=Usage())})
    v = run(ask_judge(A, TASK, JudgePlan(judges=(A,)), models))
    assert v.cached and v.input_tokens is None
