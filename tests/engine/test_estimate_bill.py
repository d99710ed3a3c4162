"""The bill of a run (runs.engine.estimate.estimate_run): calls by kind, tokens, dollars, and what it cannot know."""

import pytest

from blueprints.spec import parse_blueprint
from runs.engine.estimate import CacheProbe, estimate_run, tokens
from runs.engine.judge import JudgeSpec, JudgePlan, plan_for_run
from runs.engine.providers import MemoryCache, settings_from_env
from runs.engine.providers.cache import cache_key
from runs.engine.providers.endpoints import resolve_endpoint
from runs.engine.providers.prices import Price

PRICES = {"openai:a": Price(1.0, 2.0, "2025-01-01"), "openai:judge": Price(0.5, 1.0, "2025-02-01")}
TEXT = """\
title: Bill
models: [openai:a, openai:b]
evaluationConfig:
  llm-coverage:
    judges:
      - model: openai:judge
        approach: holistic
      - model: openai:judge
        approach: standard
---
- id: one
  prompt: Name a colour.
  should:
    - Names a colour.
    - $contains: red
- id: two
  messages:
    - user: Hi
    - assistant: null
    - user: And again?
  should:
    - Answers twice.
  should_not:
    - Is rude.
"""


def bp(text=TEXT):
    result = parse_blueprint(text)
    assert result.blueprint is not None, result.errors
    return result.blueprint


def plan(blueprint, **kwargs):
    return plan_for_run(blueprint.coverage, default_judges=("openai:d1", "openai:d2"), backup_judge="openai:backup",
                        **kwargs)


@pytest.mark.parametrize(("trials", "models", "generation", "judge"), [
    # one: 1 turn, 1 judged point; two: 2 turns, 2 judged points; 2 judges (one model, two approaches)
    (None, ["openai:a", "openai:b"], 2 * (1 + 2), 2 * (1 + 2) * 2),
    (5, ["openai:a", "openai:b"], 5 * 2 * 3, 5 * 2 * 3 * 2),
    (3, ["openai:a"], 3 * 3, 3 * 3 * 2),
])
def test_calls_follow_trials_models_and_each_judge_approach(trials, models, generation, judge):
    b = bp()
    estimate = estimate_run(b, models, plan(b), trials=trials, prices=PRICES)

    assert (estimate.generation_calls, estimate.judge_calls) == (generation, judge)
    assert estimate.to_json()["calls"]["total"] == generation + judge


def test_unticking_a_judge_drops_its_calls():
    b = bp()
    kept = plan(b, keep=["holistic(openai:judge)"])

    assert estimate_run(b, ["openai:a"], kept, prices=PRICES).judge_calls == 3


def test_a_model_without_a_price_is_named_and_the_known_part_is_still_priced():
    b = bp()
    estimate = estimate_run(b, ["openai:a", "openai:b"], plan(b), prices=PRICES)
    data = estimate.to_json()

    assert data["costUsd"] is not None and data["costComplete"] is False
    assert [u["id"] for u in data["unknown"] if u["kind"] == "price"] == ["openai:b"]
    assert "openai:b" in data["unknown"][0]["message"] and "prices.json" in data["unknown"][0]["message"]
    a = next(m for m in estimate.candidates if m.model_id == "openai:a")
    assert a.cost == pytest.approx((a.input_tokens * 1 + a.output_tokens * 2) / 1e6)


def test_the_backup_judge_is_a_possible_extra_only_with_the_sites_judges():
    text = TEXT.split("evaluationConfig")[0] + "---" + TEXT.split("---", 1)[1]
    b = bp(text)
    estimate = estimate_run(b, ["openai:a"], plan(b), prices=PRICES)

    assert estimate.judge_calls == 3 * 2  # 3 judged points, the two default judges
    assert estimate.backup_calls == 3 and estimate.backup_model == "openai:backup"
    assert any(u.kind == "backup-judge" and "openai:backup" in u.message for u in estimate.unknown)
    assert estimate.to_json()["calls"]["total"] == 3 + 6  # the backup is not in the total
    assert estimate_run(bp(), ["openai:a"], plan(bp()), prices=PRICES).backup_calls == 0


def test_fixtures_answer_without_a_call_but_their_responses_are_judged():
    text = TEXT.replace("models: [openai:a, openai:b]", "models: [fixtures:canned]")
    b = bp(text)
    estimate = estimate_run(b, ["fixtures:canned"], plan(b), trials=2, prices=PRICES)

    assert estimate.generation_calls == 0 and estimate.canned_calls == 2 * 3 and estimate.generated_turns == 6
    assert estimate.judge_calls == 2 * 3 * 2


def test_temperatures_and_systems_multiply_the_variants():
    text = TEXT.replace("models: [openai:a, openai:b]", "models: [openai:a]\ntemperatures: [0, 0.5]\n"
                        "systems: [null, Be brief.]")
    b = bp(text)

    assert estimate_run(b, ["openai:a"], plan(b), prices=PRICES).generation_calls == 4 * 3


def test_answer_length_drives_the_tokens():
    b = bp()
    long = estimate_run(b, ["openai:a"], plan(b), prices=PRICES)
    short = estimate_run(b, ["openai:a"], plan(b), prices=PRICES, answer_tokens=10)

    assert short.output_tokens < long.output_tokens and short.input_tokens < long.input_tokens
    # a generation of prompt "one" sees its prompt only; the candidate's output is its answer's length
    assert short.candidates[0].output_tokens == 3 * 10
    assert tokens(13) == 4


def test_answers_already_in_the_cache_are_free_and_a_fresh_run_asks_again():
    b = bp()
    cache = MemoryCache()
    providers = settings_from_env({"OPENAI_API_KEY": "sk-test-key-000000"})
    probe = CacheProbe(providers, cache.get)
    endpoint_identity = resolve_endpoint("openai:a", providers, {}).cache_identity()
    cache.set(cache_key(endpoint_identity, [{"role": "user", "content": "Name a colour."}], temperature=0.0,
                        max_tokens=1500), {"text": "Red."})

    cold = estimate_run(b, ["openai:a"], plan(b), prices=PRICES)
    warm = estimate_run(b, ["openai:a"], plan(b), prices=PRICES, cache=probe)
    fresh = estimate_run(b, ["openai:a"], plan(b), prices=PRICES, cache=probe, fresh=True)

    assert warm.generation_calls == cold.generation_calls - 1 and warm.cached_calls == 1
    assert warm.candidates[0].cost < cold.candidates[0].cost
    assert fresh.generation_calls == cold.generation_calls and fresh.cached_calls == 0


def test_a_cached_judge_verdict_is_free_when_the_whole_response_is_cached():
    b = bp()
    cache = MemoryCache()
    providers = settings_from_env({"OPENAI_API_KEY": "sk-test-key-000000"})
    identity = lambda m: resolve_endpoint(f"openai:{m}", providers, {}).cache_identity()  # noqa: E731
    cache.set(cache_key(identity("a"), [{"role": "user", "content": "Name a colour."}], temperature=0.0,
                        max_tokens=1500), {"text": "Red."})
    one_judge = JudgePlan(judges=(JudgeSpec("openai:judge", "holistic"),), configured=True)
    from runs.engine.assess import judge_tasks
    from runs.engine.judge import build_judge_messages
    from runs.engine.types import GeneratedResponse, Turn

    response = GeneratedResponse("one", "", (Turn("user", "Name a colour."), Turn("assistant", "Red.", True)),
                                 "Red.", "Red.")
    task = judge_tasks(b.prompts[0], response)[0]
    cache.set(cache_key(identity("judge"), build_judge_messages(task, one_judge.judges[0], one_judge),
                        temperature=0.0, max_tokens=500),
              {"text": "<reflection>ok</reflection><classification>CLASS_EXACTLY_MET</classification>"})

    estimate = estimate_run(b, ["openai:a"], one_judge, prices=PRICES, cache=CacheProbe(providers, cache.get))

    assert estimate.judges[0].cached == 1 and estimate.judge_calls == 3 - 1


def test_expected_prices_answers_at_earlier_lengths_and_most_at_max_tokens():
    b = bp()
    assumed = estimate_run(b, ["openai:a"], plan(b), prices=PRICES)
    observed = estimate_run(b, ["openai:a"], plan(b), prices=PRICES, observed={"openai:a": (40.4, 12)})
    a, judges = observed.candidates[0], observed.judges

    # "one" is 1 turn, "two" 2 turns: 3 answers; the second turn of "two" reads the first answer.
    prompt_one, prompt_two = tokens(len("Name a colour.")), tokens(len("Hi") + len("And again?"))
    assert (a.answer_tokens, a.observed_answers, a.expected_output_tokens, a.output_tokens) == (40, 12, 120, 4500)
    assert a.expected_input_tokens == prompt_one + prompt_two + (prompt_two + 40)
    assert a.input_tokens == prompt_one + prompt_two + (prompt_two + 1500)
    assert [j.expected_output_tokens for j in judges] == [3 * 150, 3 * 150]  # 3 judged points each, at 150
    # The published formula: tokens x USD per million, summed over the lines.
    expected = (a.expected_input_tokens * 1.0 + a.expected_output_tokens * 2.0
                + sum(j.expected_input_tokens * 0.5 + j.expected_output_tokens * 1.0 for j in judges)) / 1e6
    most = (a.input_tokens * 1.0 + a.output_tokens * 2.0
            + sum(j.input_tokens * 0.5 + j.output_tokens * 1.0 for j in judges)) / 1e6
    assert observed.expected_cost == pytest.approx(expected) and observed.most_cost == pytest.approx(most)
    assert observed.most_cost == assumed.most_cost  # the most never depends on earlier answers
    assert assumed.candidates[0].answer_tokens == 300 and "an assumption" in assumed.expected_basis[0]
    assert observed.expected_basis[0] == "'openai:a': 40 tokens an answer, the mean of 12 earlier answers"
    data = observed.to_json()
    assert data["costUsd"] == data["cost"]["mostUsd"] and data["cost"]["unpricedCalls"] == 0
