"""assess_response: one response's points scored by functions and judges, then its score; and its export shape."""

from __future__ import annotations

import asyncio

import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import Point, Prompt
from runs.engine.assess import apply_overrides, assess_response, judge_tasks, run_textbook_alpha
from runs.engine.export_shape import evalsite_details, export_response
from runs.engine.judge import JudgePlan, JudgeSpec, plan_judges
from runs.engine.points import InvalidPoint, PointResult
from runs.engine.types import ChatResult, GeneratedResponse, Turn

from .conftest import ScriptedModels, criterion_of, verdict

JUDGE_A = JudgeSpec("test:a", id="a")
JUDGE_B = JudgeSpec("test:b", id="b")
TWO_JUDGES = JudgePlan(judges=(JUDGE_A, JUDGE_B), configured=True)


def prompt_from(yaml_prompt: str) -> Prompt:
    result = parse_blueprint(yaml_prompt, fmt="yaml")
    assert not result.errors, [e.message for e in result.errors]
    return result.blueprint.prompts[0]


def response_to(prompt: Prompt, text: str | None = "Paris is the capital of France.", **fields) -> GeneratedResponse:
    conversation = (*(Turn(m.role, m.content) for m in prompt.messages), Turn("assistant", text, generated=True))
    defaults = dict(prompt_id=prompt.id, model_variant_id="test:model[temp:0]", conversation=conversation,
                    text=text, final_text=text)
    return GeneratedResponse(**{**defaults, **fields})


def judges_by_criterion(answers: dict[str, str]):
    """A judge answering by the criterion it is asked about: criterion -> classification."""
    return lambda request: verdict(answers[criterion_of(request)], f"About '{criterion_of(request)}'.")


class FakeEvaluator:
    """Stands in for runs.engine.points.evaluate_point: a result per argument, every call recorded."""

    def __init__(self, results: dict[object, PointResult]):
        self.results = results
        self.calls: list[tuple] = []

    def __call__(self, fn, args, response, **context):
        self.calls.append((fn, args, response, context))
        return self.results[str(args)]


def assess(prompt, response, *, judges=TWO_JUDGES, models=None, **kwargs):
    return asyncio.run(assess_response(prompt, response, judges=judges, complete=models or ScriptedModels({}),
                                       **kwargs))


RUBRIC = """\
- id: capital
  prompt: What is the capital of France?
  should:
    - Names Paris
    - $contains: Paris
  should_not:
    - Is condescending
    - $contains: London
"""


def test_points_are_scored_in_rubric_order_with_should_not_inverted():
    prompt = prompt_from(RUBRIC)
    evaluator = FakeEvaluator({"Paris": PointResult(score=1.0), "London": PointResult(score=0.0, explain="absent")})
    models = ScriptedModels({"test:a": judges_by_criterion({"Names Paris": "CLASS_EXACTLY_MET",
                                                            "Is condescending": "CLASS_PARTIALLY_MET"}),
                             "test:b": judges_by_criterion({"Names Paris": "CLASS_MAJORLY_MET",
                                                            "Is condescending": "CLASS_UNMET"})})
    result = assess(prompt, response_to(prompt), models=models, evaluate_point=evaluator,
                    external_services={"svc": {"url": "http://127.0.0.1:1"}})

    names = [pa.key_point_text for pa in result.point_assessments]
    assert names == ["Names Paris", 'Function: contains("Paris")', "Is condescending", 'Function: contains("London")']
    paris, contains, condescending, london = result.point_assessments
    assert (paris.score, paris.raw_score, paris.kind) == (0.88, 0.88, "judged")
    assert paris.judge_model_id == "consensus(a(test:a), b(test:b))"
    assert [v.reflection for v in paris.individual_judgements] == ["About 'Names Paris'."] * 2
    assert (contains.score, contains.reflection, contains.kind) == (1.0, "Function 'contains' evaluated to 1.00.",
                                                                     "function")
    assert (condescending.score, condescending.raw_score, condescending.inverted) == (0.87, 0.13, True)
    assert condescending.reflection.startswith("[INVERTED] Consensus of 2 judges: average score 0.13")
    assert (london.score, london.raw_score, london.reflection) == (1.0, 0.0, "absent")  # no prefix on functions
    assert result.score == pytest.approx(round((0.88 + 1.0 + 0.87 + 1.0) / 4, 2))
    assert result.score_basis == "coverage" and result.not_evaluated_reason is None
    assert result.key_points_count == 4

    fn, args, text, context = evaluator.calls[0]
    assert (fn, args, text) == ("contains", "Paris", "Paris is the capital of France.")
    assert context["model_id"] == "test:model[temp:0]" and context["prompt_id"] == "capital"
    assert context["messages"][-1] == {"role": "assistant", "content": "Paris is the capital of France."}
    assert context["external_services"] == {"svc": {"url": "http://127.0.0.1:1"}}
    assert context["tool_calls"] is None  # no parsed trace: the function reads the response itself
    assert len(models.requests) == 4  # one call per text point and judge


def test_the_real_point_evaluator_is_the_default():
    prompt = prompt_from("- prompt: q\n  should:\n    - $icontains: paris\n    - $word_count_between: [1, 3]\n")
    result = assess(prompt, response_to(prompt))
    assert result.point_assessments[0].score == 1.0
    assert result.point_assessments[1].score < 1.0  # five words is outside [1, 3]


def test_an_async_point_evaluator_is_awaited():
    prompt = prompt_from("- prompt: q\n  should:\n    - $contains: x\n")

    async def evaluate(fn, args, response, **context):
        await asyncio.sleep(0)
        return PointResult(score=0.4)

    assert assess(prompt, response_to(prompt), evaluate_point=evaluate).score == 0.4


def test_a_failed_generation_is_not_evaluated_and_nothing_is_asked():
    prompt = prompt_from(RUBRIC)
    models = ScriptedModels({})
    evaluator = FakeEvaluator({})
    result = assess(prompt, response_to(prompt, None, error="HTTP 500 from test after 3 attempts"), models=models,
                    evaluate_point=evaluator)
    assert result.score is None and result.point_assessments == ()
    assert result.not_evaluated_reason == "Generation failed: HTTP 500 from test after 3 attempts"
    assert models.requests == [] and evaluator.calls == []
    assert export_response(result) == {"avgCoverageExtent": None,
                                       "error": "Generation failed: HTTP 500 from test after 3 attempts"}


def test_an_empty_response_is_not_evaluated():
    prompt = prompt_from(RUBRIC)
    result = assess(prompt, response_to(prompt, "  "))
    assert result.score is None and result.not_evaluated_reason == "Generation failed: the response is empty"


def test_when_no_judge_can_be_reached_judged_points_say_why_and_the_response_is_not_evaluated():
    prompt = prompt_from("- prompt: q\n  should:\n    - Names Paris\n    - $contains: Paris\n")
    evaluator = FakeEvaluator({"Paris": PointResult(score=1.0)})
    result = assess(prompt, response_to(prompt), evaluate_point=evaluator)  # no model has a key
    judged, function = result.point_assessments
    assert judged.score is None and function.score == 1.0
    assert judged.error.startswith("All judges failed in consensus mode. a(test:a): the call failed: no API key")
    assert judged.reflection == f"Error: {judged.error}"
    # A judging outage is not a score of the function points alone: not evaluated, with the reason.
    assert result.score is None and result.judges_all_failed
    assert result.not_evaluated_reason.startswith("every judge call failed (2 of 2)")
    # A reviewer who scores the judged point gives the response its score back.
    assert apply_overrides(result, {0: 0.5}).score == 0.75


def test_a_judged_point_that_errored_among_answered_ones_is_left_out_not_counted_as_zero():
    prompt = prompt_from("- prompt: q\n  should:\n    - Names Paris\n    - Is short\n")
    models = ScriptedModels({"test:a": judges_by_criterion({"Names Paris": "CLASS_EXACTLY_MET", "Is short": "nonsense"})})
    result = assess(prompt, response_to(prompt), models=models, judges=JudgePlan(judges=(JUDGE_A,)))
    first, second = result.point_assessments
    assert first.score == 1.0 and second.score is None and not result.judges_all_failed
    assert result.score == 1.0  # deviation 1: the errored point is left out


def test_a_response_whose_points_all_errored_is_not_evaluated_never_zero():
    prompt = prompt_from("- prompt: q\n  should:\n    - Names Paris\n    - Is short\n")
    result = assess(prompt, response_to(prompt), judges=plan_judges(None, default_judges=[]))
    assert result.score is None and result.score_basis is None
    assert result.not_evaluated_reason.startswith("no point could be scored: no judges are configured")
    exported = export_response(result)
    assert exported["avgCoverageExtent"] is None and exported["error"] == result.not_evaluated_reason
    assert exported["keyPointsCount"] == 2
    assert [pa.get("coverageExtent") for pa in exported["pointAssessments"]] == [None, None]


def test_different_errors_are_summarised():
    prompt = prompt_from("- prompt: q\n  should:\n    - $contains: a\n    - $contains: b\n")
    evaluator = FakeEvaluator({"a": PointResult(score=None, error="boom"), "b": PointResult(score=None, error="bang")})
    result = assess(prompt, response_to(prompt), evaluate_point=evaluator)
    assert result.not_evaluated_reason == "no point could be scored (2 errors; the first: boom)"


def test_alternative_paths_and_should_not_paths_are_worked_out_step_by_step():
    prompt = prompt_from("""\
- prompt: q
  should:
    - $contains: required
    - - $contains: p0a
      - $contains: p0b
    - - $contains: p1
  should_not:
    - - $contains: n0
    - - $contains: n1a
      - $contains: n1b
""")
    scores = {"required": 1.0, "p0a": 1.0, "p0b": 0.0, "p1": 0.75, "n0": 0.0, "n1a": 1.0, "n1b": 0.0}
    evaluator = FakeEvaluator({k: PointResult(score=v) for k, v in scores.items()})
    result = assess(prompt, response_to(prompt), evaluate_point=evaluator)
    assert [pa.path_id for pa in result.point_assessments] == [None, "path_1", "path_1", "path_2", "not_path_0",
                                                               "not_path_1", "not_path_1"]
    calc = result.calculation
    assert calc.required.mean == 1.0
    assert calc.best_path.path_id == "path_2" and calc.best_path.mean == 0.75
    assert calc.worst_not_path.path_id == "not_path_1" and calc.worst_not_path.mean == 0.5
    assert result.score == pytest.approx(round((1.0 + 0.75 + 0.5) / 3, 2))


def test_an_ideal_only_prompt_is_scored_by_similarity_when_embeddings_are_configured():
    prompt = prompt_from("- prompt: q\n  ideal: Paris.\n")
    texts = []

    async def embed(batch):
        texts.append(list(batch))
        return [[1.0, 1.0], [1.0, 0.0]]

    result = assess(prompt, response_to(prompt), embed=embed)
    assert texts == [["Paris is the capital of France.", "Paris."]]
    assert result.similarity == pytest.approx(0.7071, abs=1e-4)
    assert (result.score, result.score_basis) == (0.71, "similarity")
    assert export_response(result) == {"keyPointsCount": 0, "avgCoverageExtent": None, "pointAssessments": []}
    assert evalsite_details(result)["scoreBasis"] == "similarity"


def test_an_ideal_only_prompt_without_embeddings_is_not_evaluated_with_the_reason():
    prompt = prompt_from("- prompt: q\n  ideal: Paris.\n")
    result = assess(prompt, response_to(prompt))
    assert result.score is None and result.similarity is None
    assert "needs an embeddings model (set EVALSITE_EMBEDDINGS_MODEL" in result.not_evaluated_reason

    async def broken(batch):
        return "HTTP 401 from openai"

    failed = assess(prompt, response_to(prompt), embed=broken)
    assert failed.score is None and failed.similarity_error == "embedding failed: HTTP 401 from openai"
    assert failed.not_evaluated_reason.endswith(
        "similarity to its ideal failed: embedding failed: HTTP 401 from openai")


def test_with_points_the_score_is_the_coverage_and_similarity_is_kept_beside_it():
    prompt = prompt_from("- prompt: q\n  ideal: Paris.\n  should:\n    - $contains: Paris\n")

    async def embed(batch):
        return [[0.0, 1.0], [1.0, 0.0]]

    result = assess(prompt, response_to(prompt), evaluate_point=FakeEvaluator({"Paris": PointResult(score=0.5)}),
                    embed=embed)
    assert (result.score, result.score_basis, result.similarity) == (0.5, "coverage", 0.0)


def test_a_point_with_text_and_a_function_is_a_bug_and_raises():
    prompt = Prompt(id="prompt-invalid", messages=[{"role": "user", "content": "q"}],
                    points=[Point(text="some text", fn="contains", fn_args="word", has_args=True)])
    with pytest.raises(InvalidPoint, match="Point object cannot have both 'text' and a function"):
        assess(prompt, response_to(prompt))


def test_judge_usage_and_agreement_are_reported_per_response():
    prompt = prompt_from("- prompt: q\n  should:\n    - One\n    - Two\n")
    models = ScriptedModels({"test:a": verdict("CLASS_EXACTLY_MET"), "test:b": ["nonsense", verdict("CLASS_UNMET")]})
    result = assess(prompt, response_to(prompt), models=models)
    usage = result.judge_usage
    # a: 2 calls; b: one point answered nonsense then was repaired (2 calls), the other answered at once.
    assert (usage.calls, usage.failed_verdicts, usage.input_tokens, usage.output_tokens) == (5, 0, 500, 100)
    assert usage.cost_usd == pytest.approx(0.005)
    agreement = result.judge_agreement
    assert agreement.num_items == 2 and agreement.interpretation == "unreliable"
    assert [u.judge_id for u in agreement.judges_used] == ["a", "b"]
    assert all(pa.disagreement for pa in result.point_assessments)  # 1.0 against 0.0: std-dev 0.5


def test_overrides_replace_a_points_score_and_keep_the_original():
    prompt = prompt_from("- prompt: q\n  should:\n    - $contains: a\n    - $contains: b\n")
    evaluator = FakeEvaluator({"a": PointResult(score=1.0), "b": PointResult(score=None, error="boom")})
    result = assess(prompt, response_to(prompt), evaluate_point=evaluator)
    assert result.score == 1.0
    overridden = apply_overrides(result, {1: 0.0})
    assert overridden.score == 0.5
    point = overridden.point_assessments[1]
    assert (point.score, point.original_score, point.overridden, point.error) == (0.0, None, True, None)
    assert export_response(overridden)["avgCoverageExtent"] == 0.5
    assert evalsite_details(overridden)["points"][1]["overridden"] is True
    assert apply_overrides(result, {}) is result


def test_judge_tasks_carry_the_whole_rubric_but_one_criterion_each():
    prompt = prompt_from("- prompt: q\n  should:\n    - be polite\n    - $contains: x\n  should_not:\n    - be rude\n")
    tasks = judge_tasks(prompt, response_to(prompt))
    assert [t.criterion for t in tasks] == ["be polite", "be rude"]
    assert [t.inverted for t in tasks] == [False, True]
    assert all(t.all_criteria == ("[should] be polite", "[should not] be rude") for t in tasks)


def test_a_conversation_that_was_not_recorded_is_rebuilt_from_the_prompt():
    prompt = prompt_from("- id: p\n  system: Be brief.\n  messages:\n    - user: Hi\n    - assistant: Hello\n"
                         "    - user: Capital of France?\n  should:\n    - Names Paris\n")
    response = response_to(prompt, "Paris.", conversation=())
    task = judge_tasks(prompt, response)[0]
    assert [(t.role, t.content) for t in task.conversation] == [
        ("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Capital of France?")]


def test_export_shape_uses_the_upstream_keys():
    prompt = prompt_from("""\
- prompt: q
  should:
    - text: Names Paris
      weight: 2
      citation: atlas p. 3
    - - $contains: Paris
  should_not:
    - Is rude
""")
    models = ScriptedModels({"test:a": verdict("CLASS_EXACTLY_MET", "Says Paris."),
                             "test:b": ChatResult(error="HTTP 503 from test")})
    result = assess(prompt, response_to(prompt), models=models,
                    evaluate_point=FakeEvaluator({"Paris": PointResult(score=1.0)}))
    exported = export_response(result)
    # Required: (1.0 * 2 + inverted 0.0) / 3; path_1: 1.0; (0.667 + 1.0) / 2 = 0.83.
    assert exported["keyPointsCount"] == 3 and exported["avgCoverageExtent"] == 0.83
    names, contains, rude = exported["pointAssessments"]
    assert names == {
        "keyPointText": "Names Paris", "coverageExtent": 1.0, "multiplier": 2.0, "citation": "atlas p. 3",
        "isInverted": False, "judgeModelId": "consensus(a(test:a))",
        "reflection": result.point_assessments[0].reflection,
        "individualJudgements": [{"judgeModelId": "a(test:a)", "coverageExtent": 1.0, "reflection": "Says Paris."}],
        "error": ("1 of 2 judges failed (b(test:b): the call failed: HTTP 503 from test); "
                  "partial consensus of the 1 that answered."),
    }
    assert contains == {"keyPointText": 'Function: contains("Paris")', "coverageExtent": 1.0, "multiplier": 1.0,
                        "pathId": "path_1", "isInverted": False, "reflection": "Function 'contains' evaluated to 1.00."}
    assert rude["isInverted"] is True and rude["coverageExtent"] == 0.0
    assert rude["reflection"].startswith("[INVERTED] ")
    assert "judgeAgreement" not in exported  # no point has two judgements

    details = evalsite_details(result)
    (failed,) = details["points"][0]["failedJudges"]
    assert failed["judgeId"] == "b(test:b)" and failed["calls"] == 1
    assert details["points"][0]["judges"][1] == {**{k: failed[k] for k in details["points"][0]["judges"][1]}}
    assert failed["error"] == "the call failed: HTTP 503 from test" and failed["rawAnswers"] == []
    assert details["calculation"]["bestPath"] == "path_1"
    assert details["judgeUsage"]["calls"] == 4


def test_the_run_wide_textbook_alpha_rests_on_points_two_judges_scored():
    prompt = prompt_from("- prompt: q\n  should:\n    - One\n    - Two\n")
    models = ScriptedModels({"test:a": judges_by_criterion({"One": "CLASS_EXACTLY_MET", "Two": "CLASS_UNMET"}),
                             "test:b": judges_by_criterion({"One": "CLASS_MAJORLY_MET", "Two": "CLASS_UNMET"})})
    first = assess(prompt, response_to(prompt), models=models)
    second = assess(prompt, response_to(prompt, model_variant_id="test:other[temp:0]"),
                    judges=JudgePlan(judges=(JUDGE_A,)), models=models)
    alpha = run_textbook_alpha([first, second])
    assert (alpha.points, alpha.judges) == (2, 2)
    # Points (1.0, 0.75) and (0.0, 0.0), ordered pairs: within = 2 * 0.0625, all = 2 * 3.1875; n = 4.
    assert alpha.alpha == pytest.approx(1 - 3 * 0.125 / 6.375)
