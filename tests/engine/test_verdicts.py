"""The pass/fail layer: bands, gates, per-check minimums, analytic bands, trials."""

from __future__ import annotations

import asyncio

import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import Verdicts
from runs.engine.assess import apply_overrides, assess_response
from runs.engine.judge import JudgePlan, JudgeSpec, band_scale, parse_judge_answer
from runs.engine.points import PointResult
from runs.engine.scoring import CheckResult, TrialOutcome, aggregate_trials, band, decide_verdict
from runs.engine.types import GeneratedResponse, Turn

from .conftest import ScriptedModels, criterion_of, verdict

JUDGE = JudgePlan(judges=(JudgeSpec("test:a", id="a"),), configured=True)


@pytest.mark.parametrize(
    ("score", "verdicts", "expected"),
    [
        (0.8, None, "pass"),  # AgentV's bands: >= 0.8 pass
        (0.7999999999, None, "pass"),  # float noise does not flip a verdict
        (0.79, None, "borderline"),
        (0.6, None, "borderline"),
        (0.59, None, "fail"),
        (0.7, Verdicts(pass_at=0.7, borderline_at=None), "pass"),
        (0.69, Verdicts(pass_at=0.7, borderline_at=None), "fail"),  # a threshold: pass or fail only
        (0.0, Verdicts(pass_at=0.0, borderline_at=None), "pass"),
    ],
)
def test_band(score, verdicts, expected):
    assert band(score, verdicts) == expected


def check(label, score, gate=None, min_score=None):
    return CheckResult(id=label, label=label, kind="t", score=score, gate=gate, min_score=min_score)


def test_a_failed_gate_zeroes_the_score_and_names_the_gate():
    outcome = decide_verdict(0.9, [check("contains: DENIED", 0.0, gate=0.8), check("rubrics", 1.0)], None)
    assert (outcome.score, outcome.score_before_gates, outcome.verdict) == (0.0, 0.9, "fail")
    assert outcome.gates_failed == ("contains: DENIED",)
    assert "contains: DENIED" in outcome.reason


def test_a_check_below_its_minimum_fails_without_changing_the_score():
    outcome = decide_verdict(0.9, [check("llm_judge", 0.5, min_score=0.8)], Verdicts(pass_at=0.0, borderline_at=None))
    assert (outcome.score, outcome.verdict, outcome.checks_failed) == (0.9, "fail", ("llm_judge",))


def test_a_gate_that_could_not_be_scored_leaves_the_verdict_undecided_never_pass_or_fail():
    outcome = decide_verdict(0.9, [check("code_judge", None, gate=0.6)], None)
    assert outcome.verdict is None and outcome.score == 0.9
    assert "could not be scored" in outcome.reason


def test_no_score_means_no_verdict():
    assert decide_verdict(None, [check("x", None, gate=0.8)], None).verdict is None


@pytest.mark.parametrize(
    ("aggregation", "trials", "score", "verdict", "pass_at_k", "rule"),
    [
        # pass@k is the unbiased estimate (k = the cell's trials): with k = n, 1 when any trial passed.
        ("mean", [(0, 1.0, "pass"), (1, 0.5, "fail")], 0.75, "borderline", 1.0, None),
        ("best", [(0, 0.2, "fail"), (1, 0.9, "pass"), (2, 0.4, "fail")], 0.9, "pass", 1.0, None),
        # AI Eval's own rule decides its verdict: k = 3 and one passing trial gives 0.70, which fails at 0.8; two
        # give 0.96.
        ("pass_at_k", [(0, 1.0, "pass"), (1, 0.0, "fail"), (2, 0.0, "fail")], 1 / 3, "fail", 1.0, 1 - (2 / 3) ** 3),
        ("pass_at_k", [(0, 1.0, "pass"), (1, 1.0, "pass"), (2, 0.0, "fail")], 2 / 3, "pass", 1.0, 1 - (1 / 3) ** 3),
        ("pass_at_k", [(0, 0.0, "fail"), (1, 0.0, "fail")], 0.0, "fail", 0.0, 0.0),
    ],
)
def test_trials_aggregate_as_the_prompt_asks(aggregation, trials, score, verdict, pass_at_k, rule):
    outcome = aggregate_trials([TrialOutcome(*t) for t in trials], aggregation, use_verdicts=True)
    assert outcome.score == pytest.approx(score)
    assert outcome.verdict == verdict
    assert outcome.pass_at_k == pytest.approx(pass_at_k)
    assert outcome.rule_pass_at_k == (None if rule is None else pytest.approx(rule))
    assert outcome.k == len(trials)


def test_trial_consistency_and_unscored_trials():
    outcome = aggregate_trials([TrialOutcome(0, 1.0, "pass"), TrialOutcome(1, None, None),
                                TrialOutcome(2, 1.0, "pass"), TrialOutcome(3, 0.0, "fail")], "mean")
    assert outcome.score == pytest.approx(2 / 3)  # the unscored trial is left out, not counted as 0
    assert outcome.agreement == pytest.approx(2 / 3)
    assert outcome.passed_trials == 2 and outcome.judged_trials == 3
    assert outcome.verdict is None  # no verdict layer asked for
    assert outcome.pass_at_k is None  # 3 judged trials of 4: no unbiased pass@4 exists
    assert aggregate_trials([TrialOutcome(0, None)], "best").score is None


def test_one_trial_keeps_the_existing_cell_meaning():
    outcome = aggregate_trials([TrialOutcome(0, 0.42, None)])
    assert (outcome.score, outcome.verdict, outcome.score_std) == (0.42, None, 0.0)


# --- through assess_response ----------------------------------------------------------------------


def prompt_of(text: str):
    result = parse_blueprint(text, fmt="yaml")
    assert not result.errors, [e.format() for e in result.errors]
    return result.blueprint.prompts[0]


def respond(prompt, text):
    conversation = (*(Turn(m.role, m.content) for m in prompt.messages), Turn("assistant", text, generated=True))
    return GeneratedResponse(prompt_id=prompt.id, model_variant_id="test:m[temp:0]", conversation=conversation,
                             text=text, final_text=text, latency_ms=1200.0, cost_usd=0.002)


def assess(prompt, text, judge_answers=None):
    models = ScriptedModels({"test:a": lambda request: verdict(judge_answers[criterion_of(request)])} if judge_answers
                            else {})
    return asyncio.run(assess_response(prompt, respond(prompt, text), judges=JUDGE, complete=models))


GATED = """\
threshold: 0.7
---
- id: screen
  prompt: Screen Huawei
  should:
    - $contains: DENIED
      required: true
    - text: Cites the Entity List
"""


def test_a_blueprint_gate_sets_the_score_to_zero_and_the_verdict_to_fail():
    prompt = prompt_of(GATED)
    result = assess(prompt, "Approved, no problem.", {"Cites the Entity List": "CLASS_EXACTLY_MET"})
    assert result.score == 0.0 and result.score_before_gates == 0.5
    assert result.verdict == "fail" and result.passed is False
    assert result.gates_failed == ('$contains: "DENIED"',)


def test_a_blueprint_without_extension_keys_has_no_verdict():
    prompt = prompt_of("- prompt: hi\n  should:\n    - $contains: hi\n")
    result = assess(prompt, "hi there")
    assert (result.score, result.verdict, result.check_results) == (1.0, None, ())


def test_a_passing_response_gets_the_threshold_verdict():
    prompt = prompt_of(GATED)
    result = assess(prompt, "DENIED.", {"Cites the Entity List": "CLASS_MAJORLY_MET"})
    assert result.score == 0.88 and result.verdict == "pass"
    assert [c.to_dict()["passed"] for c in result.check_results] == [True]


def test_metric_points_receive_what_generation_recorded():
    prompt = prompt_of("- prompt: hi\n  should:\n    - $latency_under: 1000\n    - $cost_under: 0.01\n")
    result = assess(prompt, "hello")
    assert [pa.score for pa in result.point_assessments] == [0.0, 1.0]  # 1200 ms is over, $0.002 is under
    assert "1,200 ms" in result.point_assessments[0].reflection


def test_a_caller_evaluator_without_the_new_keywords_still_works():
    prompt = prompt_of("- prompt: hi\n  should:\n    - $contains: hi\n")

    def evaluate(fn, args, response, *, messages, model_id, tool_calls, prompt_id, external_services):
        return PointResult(score=1.0)

    result = asyncio.run(assess_response(prompt, respond(prompt, "hi"), judges=JUDGE, complete=ScriptedModels({}),
                                         evaluate_point=evaluate))
    assert result.score == 1.0


BANDS = """\
- id: greet
  prompt: Hello, I am Alice
  should:
    - text: Contains a greeting phrase
      score_ranges:
        0: No greeting present
        5: Generic greeting
        10: Personalized greeting
"""


def test_a_judged_point_with_score_ranges_is_judged_on_the_bands():
    prompt = prompt_of(BANDS)
    asked = []

    def judge(request):
        asked.append(request.messages[-1]["content"])
        return verdict("CLASS_SCORE_7")

    result = asyncio.run(assess_response(prompt, respond(prompt, "Hi Alice!"), judges=JUDGE,
                                         complete=ScriptedModels({"test:a": judge})))
    assert result.point_assessments[0].score == 0.7
    assert "Generic greeting (band 5-9)" in asked[0] and "CLASS_SCORE_10" in asked[0]


def test_band_answers_are_read_exactly():
    scale = band_scale([])
    assert parse_judge_answer(verdict("CLASS_SCORE_1"), scale).score == 0.1
    assert parse_judge_answer(verdict("CLASS_SCORE_10"), scale).score == 1.0
    assert parse_judge_answer(verdict("CLASS_EXACTLY_MET"), scale).error


def test_overrides_recompute_the_verdict_when_given_the_prompt():
    prompt = prompt_of(GATED)
    result = assess(prompt, "Approved.", {"Cites the Entity List": "CLASS_EXACTLY_MET"})
    assert result.verdict == "fail"
    fixed = apply_overrides(result, {0: 1.0}, prompt)
    assert (fixed.score, fixed.verdict, fixed.gates_failed) == (1.0, "pass", ())


# A finish reads every stored verdict of a run through ``primary_tally``: held here to ``JudgeVerdict.from_dict``
# (what every other reader builds), over the shapes stored verdicts take.
def _stored_verdicts():
    from runs.engine.judge import JudgeSpec, JudgeVerdict

    judges = [JudgeSpec("openai:gpt-4o-mini"), JudgeSpec("openai:gpt-4o-mini", "standard"),
              JudgeSpec("anthropic:claude-3-5-haiku", "holistic", "strict"), JudgeSpec("x:m(1)", "standard", "id(x)")]
    shapes = [dict(score=1.0), dict(score=0.0, label="CLASS_UNMET"), dict(score=None, error="the call failed: 503"),
              dict(score=0.5, error="read twice"), dict(score=None), dict(role="backup", score=0.75),
              dict(role="repeat", score=0.25, repeat=1), dict(role="repeat", score=None, error="timeout", repeat=2)]
    out = [JudgeVerdict(judge=j, **shape).to_dict() for j in judges for shape in shapes]
    legacy = {"judgeId": "holistic(openai:gpt-4o-mini)", "model": "openai:gpt-4o-mini", "score": 0.8}  # no role
    return out + [legacy, {**legacy, "role": None, "approach": None}, {"score": 1.0}]


def test_primary_tally_reads_stored_verdicts_as_from_dict_does():
    import itertools
    import json

    from runs.engine.judge import JudgeVerdict, primary_tally

    stored = json.loads(json.dumps(_stored_verdicts()))
    for size in (0, 1, 2, 3):
        for group in itertools.islice(itertools.combinations(stored, size), 400):
            verdicts = [JudgeVerdict.from_dict(v) for v in group]
            primary = [v for v in verdicts if v.role == "primary"]
            ok = sum(1 for v in primary if v.ok)
            expected = (ok, len(primary) - ok, [(v.judge, v.score) for v in primary if v.score is not None])
            assert primary_tally(list(group)) == expected
    # Not vacuous: the shapes include answered, failed and unscored primaries, and others' roles.
    assert primary_tally(stored)[0] > 0 and primary_tally(stored)[1] > 0
    assert {label for label in (JudgeVerdict.from_dict(v).judge.label for v in stored)} >= {"holistic", "standard",
                                                                                             "strict", "id(x)"}
