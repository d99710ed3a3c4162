"""End to end: a parsed blueprint, the fake LLM server playing the candidate and four judges, the real router,
the real point functions, assess_response, and the export shape.

The judges: ``kind`` (a self-hosted custom model from the blueprint), ``strict``
(Anthropic's protocol), ``nonsense`` (answers prose, twice, so its verdict is an
error that keeps both answers) and ``down`` (503 on every call). Every point keeps
the consensus of the two that answered, and says that two failed.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import CustomModel
from runs.engine.assess import assess_response
from runs.engine.export_shape import evalsite_details, export_response
from runs.engine.judge import JUDGE_MAX_TOKENS, plan_judges
from runs.engine.providers import Router, settings_from_env
from runs.engine.scoring import cosine_similarity
from runs.engine.types import ChatRequest, GeneratedResponse, Turn

BLUEPRINT = """\
title: Capitals
description: Checks answers about capitals.
models:
  - openai:cand-model
  - id: local:kind-judge
    url: {base}/v1/chat/completions
    modelName: judge-kind
    inherit: openai
evaluationConfig:
  llm-coverage:
    judges:
      - {{id: kind, model: "local:kind-judge", approach: holistic}}
      - {{id: strict, model: "anthropic:judge-strict", approach: standard}}
      - {{id: nonsense, model: "openai:judge-nonsense", approach: prompt-aware}}
      - {{id: down, model: "openai:judge-always-503", approach: holistic}}
---
- id: paris
  prompt: What is the capital of France?
  ideal: Paris is the capital of France.
  should:
    - Names Paris as the capital
    - $icontains: paris
    - - Mentions the Eiffel Tower
    - - Mentions the Louvre
  should_not:
    - Claims Lyon is the capital
"""
CANDIDATE_ANSWER = "The capital of France is Paris, home of the Eiffel Tower."
NONSENSE = "Looks fine to me!"
# criterion -> (kind's class, strict's class)
CLASSES = {
    "Names Paris as the capital": ("CLASS_EXACTLY_MET", "CLASS_MAJORLY_MET"),
    "Mentions the Eiffel Tower": ("CLASS_EXACTLY_MET", "CLASS_EXACTLY_MET"),
    "Mentions the Louvre": ("CLASS_UNMET", "CLASS_UNMET"),
    "Claims Lyon is the capital": ("CLASS_UNMET", "CLASS_PARTIALLY_MET"),
}


def reply(label: str, criterion: str) -> str:
    return f"<reflection>On '{criterion}': {label.lower()}.</reflection>\n<classification>{label}</classification>"


def script(server) -> None:
    rules = [{"model": "^cand-model$", "match": "capital of France", "reply": CANDIDATE_ANSWER}]
    for criterion, (kind, strict) in CLASSES.items():
        where = re.escape(f"<CRITERION>\n{criterion}\n</CRITERION>")
        rules.append({"model": "^judge-kind$", "match": where, "reply": reply(kind, criterion)})
        rules.append({"model": "^judge-strict$", "match": where, "reply": reply(strict, criterion)})
    rules.append({"model": "^judge-nonsense$", "match": "", "reply": NONSENSE})
    server.script(rules)


async def embed(texts):
    """Letter counts: a small, deterministic stand-in for an embeddings model."""
    return [[text.lower().count(letter) for letter in "abcdefghijklmnopqrstuvwxyz"] for text in texts]


async def run_it(server):
    parsed = parse_blueprint(BLUEPRINT.format(base=server.base_url), fmt="yaml")
    assert not parsed.errors, [e.message for e in parsed.errors]
    blueprint = parsed.blueprint
    prompt = blueprint.prompts[0]
    settings = settings_from_env({
        "OPENAI_API_KEY": "sk-e2e-openai-0123456789", "OPENAI_BASE_URL": server.base_url + "/v1",
        "ANTHROPIC_API_KEY": "sk-e2e-anthropic-0123456789", "ANTHROPIC_BASE_URL": server.base_url,
    }, backoff_base_s=0.001, backoff_max_s=0.002, max_attempts=2, breaker_threshold=100, timeout_s=5.0)
    custom = [m for m in blueprint.models if isinstance(m, CustomModel)]
    async with Router(settings, custom_models=custom) as router:
        messages = tuple({"role": m.role, "content": m.content} for m in prompt.messages)
        generated = await router.complete(ChatRequest(model_id="openai:cand-model", messages=messages,
                                                      temperature=0.0))
        assert generated.ok, generated.error
        response = GeneratedResponse(
            prompt_id=prompt.id, model_variant_id="openai:cand-model[temp:0]",
            conversation=(Turn("user", prompt.messages[0].content), Turn("assistant", generated.text, generated=True)),
            text=generated.text, final_text=generated.text, usage=generated.usage,
        )
        plan = plan_judges(blueprint.coverage, default_judges=["openai:never-used"],
                           backup_judge="openai:never-used-either", description=blueprint.description)
        return await assess_response(prompt, response, judges=plan, complete=router.complete, embed=embed)


def test_a_response_judged_by_four_judges_through_the_fake_server(fake_llm):
    script(fake_llm)
    result = asyncio.run(run_it(fake_llm))

    # The response: required (0.88 + 1.0 + 0.87) / 3 and best path 1.0, averaged.
    assert result.score == 0.96 and result.score_basis == "coverage" and result.not_evaluated_reason is None
    calc = result.calculation
    assert calc.required.mean == pytest.approx((0.88 + 1.0 + 0.87) / 3)
    assert [(g.path_id, g.mean) for g in calc.paths] == [("path_2", 1.0), ("path_3", 0.0)]
    assert calc.best_path.path_id == "path_2" and calc.worst_not_path is None
    answer, ideal = asyncio.run(embed([CANDIDATE_ANSWER, "Paris is the capital of France."]))
    assert result.similarity == pytest.approx(cosine_similarity(answer, ideal)) and result.similarity_error is None

    names = [pa.key_point_text for pa in result.point_assessments]
    assert names == ["Names Paris as the capital", "Function: icontains(\"paris\")", "Mentions the Eiffel Tower",
                     "Mentions the Louvre", "Claims Lyon is the capital"]
    expected = {  # criterion -> (final score, consensus, std-dev, path)
        "Names Paris as the capital": (0.88, 0.88, 0.125, None),
        "Mentions the Eiffel Tower": (1.0, 1.0, 0.0, "path_2"),
        "Mentions the Louvre": (0.0, 0.0, 0.0, "path_3"),
        "Claims Lyon is the capital": (0.87, 0.13, 0.125, None),
    }
    for pa in result.point_assessments:
        if pa.kind == "function":
            assert (pa.score, pa.raw_score, pa.error, pa.verdicts) == (1.0, 1.0, None, ())
            assert pa.reflection  # the function's own explanation or the default sentence
            continue
        final, agreed, spread, path = expected[pa.point.text]
        assert (pa.score, pa.raw_score, pa.path_id) == (final, agreed, path)
        assert pa.judge_std_dev == pytest.approx(spread) and not pa.disagreement
        assert pa.judge_model_id == "consensus(kind(local:kind-judge), strict(anthropic:judge-strict))"
        assert pa.error is None
        assert pa.warning.startswith("2 of 4 judges failed (nonsense(openai:judge-nonsense): unreadable answer, "
                                     "also when asked again: No classification found")
        assert pa.inverted is (pa.point.text == "Claims Lyon is the capital")
        assert pa.reflection.startswith("[INVERTED] " if pa.inverted else "Consensus of 2 judges")

        kind, strict, nonsense, down = pa.verdicts
        kind_class, strict_class = CLASSES[pa.point.text]
        for verdict, label in ((kind, kind_class), (strict, strict_class)):
            assert verdict.ok and verdict.label == label and verdict.role == "primary"
            assert verdict.reflection == f"On '{pa.point.text}': {label.lower()}."
            assert verdict.raw_answers == (reply(label, pa.point.text),)
            assert verdict.input_tokens > 100 and verdict.output_tokens > 0 and verdict.latency_ms >= 0
            assert verdict.calls == 1
        assert kind.cost_usd is None  # a custom model has no known price
        assert nonsense.raw_answers == (NONSENSE, NONSENSE) and nonsense.calls == 2 and nonsense.score is None
        assert down.error.startswith("the call failed:") and "503" in down.error
        assert down.raw_answers == () and down.score is None

    usage = result.judge_usage
    assert usage.calls == 4 * (1 + 1 + 2 + 1)  # four text points; nonsense asked twice each
    # The 503 answers were not billed (cost 0, not of unknown price); the other 16 calls have no price.
    assert usage.failed_verdicts == 8 and usage.cost_usd == 0.0 and usage.unknown_cost_calls == 16
    assert usage.input_tokens > 0 and usage.output_tokens > 0

    agreement = result.judge_agreement
    assert (agreement.num_items, agreement.num_judges, agreement.num_comparisons) == (4, 2, 4)
    assert [u.judge_id for u in agreement.judges_used] == ["kind", "strict"]

    # What reached the server: one candidate call, judge calls at temperature 0 with the judges' token limit.
    assert len(fake_llm.requests("cand-model")) == 1
    for model in ("judge-kind", "judge-strict", "judge-nonsense"):
        bodies = [r["body"] for r in fake_llm.requests(model)]
        assert len(bodies) == (8 if model == "judge-nonsense" else 4)
        for body in bodies:
            assert body["temperature"] == 0
            assert JUDGE_MAX_TOKENS in (body.get("max_tokens"), body.get("max_completion_tokens"))
    assert len(fake_llm.requests("judge-always-503")) == 4 * 2  # two attempts per point
    holistic_system = fake_llm.requests("judge-kind")[0]["messages"][0]["content"]
    assert "Checks answers about capitals." in holistic_system
    standard_system = fake_llm.requests("judge-strict")[0]["messages"][0]["content"]
    assert "BROAD_EVALUATION_DESCRIPTION" not in standard_system

    exported = export_response(result)
    assert exported["avgCoverageExtent"] == 0.96 and exported["keyPointsCount"] == 5
    first = exported["pointAssessments"][0]
    assert [j["judgeModelId"] for j in first["individualJudgements"]] == ["kind(local:kind-judge)",
                                                                          "strict(anthropic:judge-strict)"]
    assert first["error"].startswith("2 of 4 judges failed")
    assert exported["judgeAgreement"]["numItems"] == 4
    details = evalsite_details(result)
    assert [v["judgeId"] for v in details["points"][0]["failedJudges"]] == [
        "nonsense(openai:judge-nonsense)", "down(openai:judge-always-503)"]
    assert details["points"][0]["judges"][2]["rawAnswers"] == [NONSENSE, NONSENSE]
