"""The fixtures provider: canned answers in the upstream's fixtures format (reference 5.10)."""

from __future__ import annotations

import asyncio

import pytest

from runs.engine.providers import ProviderSettings, Router, fixtures_from_blueprint, load_fixtures, parse_fixtures
from runs.engine.types import ChatRequest

FILE = """
version: 1
strategy: seeded
seed: 7
responses:
  capital:
    default: "Paris is the capital."
    byModel:
      fixtures:careful: "Paris, I believe."
      sloppy: "Lyon."
      open*: "Prefix answer."
      openai:gpt*: "Longer prefix answer."
  varied:
    - "Answer A"
    - "Answer B"
    - "Answer C"
    - "Answer D"
  chat:
    default:
      turns:
        - "First turn."
        - ["Second, take one.", "Second, take two."]
  shorthand: "Just this."
"""


@pytest.fixture
def fixtures():
    loaded, problems = load_fixtures(FILE, source="demo.fixtures.yml")
    assert problems == []
    return loaded


@pytest.mark.parametrize("model, expected", [
    ("fixtures:careful", "Paris, I believe."),  # the full id
    ("fixtures:sloppy", "Lyon."),  # the label
    ("fixtures:openai:gpt-4o", "Longer prefix answer."),  # the longest prefix wins
    ("fixtures:openrouter:x", "Prefix answer."),
    ("fixtures:other", "Paris is the capital."),  # default
])
def test_by_model_matches_full_ids_labels_and_prefixes_before_the_default(fixtures, model, expected):
    assert fixtures.answer("capital", model) == (expected, None)


def test_a_list_is_picked_by_a_deterministic_seed(fixtures):
    picks = {m: fixtures.answer("varied", f"fixtures:m{m}")[0] for m in range(12)}
    assert picks == {m: fixtures.answer("varied", f"fixtures:m{m}")[0] for m in range(12)}  # reruns agree
    assert len(set(picks.values())) > 1  # and models differ
    trials = {fixtures.answer("varied", "fixtures:m0", trial=t)[0] for t in range(12)}
    assert len(trials) > 1  # so do trials


def test_strategy_first_always_takes_the_first_answer():
    loaded, problems = load_fixtures(FILE.replace("strategy: seeded", "strategy: first"))
    assert problems == []
    assert {loaded.answer("varied", f"fixtures:m{m}")[0] for m in range(12)} == {"Answer A"}


def test_turns_fill_generated_turns_in_order(fixtures):
    assert fixtures.answer("chat", "fixtures:x", turn=0) == ("First turn.", None)
    assert fixtures.answer("chat", "fixtures:x", turn=1)[0] in ("Second, take one.", "Second, take two.")
    text, problem = fixtures.answer("chat", "fixtures:x", turn=2)
    assert text is None and problem == "the fixture for prompt 'chat' has 2 turn(s), and turn 3 was asked for"
    assert fixtures.answer("shorthand", "fixtures:x", turn=3) == ("Just this.", None)  # a text answers every turn


def test_a_missing_prompt_is_a_reason_naming_the_file(fixtures):
    assert fixtures.answer("nope", "fixtures:x") == (None, "no fixture for prompt 'nope' in demo.fixtures.yml")


@pytest.mark.parametrize("text, fragment", [
    ("responses: [1, 2]", "`responses` must map prompt ids to answers, got a list"),
    ("strategy: random\nresponses: {p: x}", "`strategy` must be seeded or first, not 'random'"),
    ("responses:\n  p: {default: {a: 1}}", "responses.p.default: expected a text, a non-empty list of texts"),
    ("responses:\n  p: {byModel: {m: []}}", "responses.p.byModel.m: expected"),
    ("responses:\n  p: {turns: [{x: 1}]}", "responses.p.turns[0]: expected a text or a non-empty list of texts"),
    ("responses:\n  p: {defualt: x}", "responses.p: unknown key(s) defualt"),
    ("responses: {p: [x\n", "not valid YAML at line"),
])
def test_bad_fixtures_are_reported_with_their_place(text, fragment):
    loaded, problems = load_fixtures(text, source="f.yml")
    assert loaded is None
    assert any(fragment in p for p in problems), problems


def test_the_blueprint_header_mapping_and_a_file_beside_it_both_work():
    from_header, problems = fixtures_from_blueprint({"p1": "From the header."})
    assert problems == [] and from_header.answer("p1", "fixtures:x") == ("From the header.", None)
    from_file, problems = fixtures_from_blueprint("demo", {"demo.fixtures.yml": FILE})
    assert problems == [] and from_file.answer("shorthand", "fixtures:x") == ("Just this.", None)
    assert fixtures_from_blueprint("gone", {})[1] == [
        "fixtures file 'gone' was not found beside the blueprint; import it with the blueprint"]
    assert fixtures_from_blueprint(None) == (None, [])


def test_the_router_answers_fixtures_models_offline(fixtures):
    async def main():
        async with Router(ProviderSettings(), fixtures=fixtures) as router:
            return [await router.complete(ChatRequest(model_id=m, messages=({"role": "user", "content": "q"},),
                                                      prompt_id=p))
                    for m, p in (("fixtures:careful[temp:0]", "capital"), ("fixtures:x", "nope"))]

    found, missing = asyncio.run(main())
    assert (found.text, found.cost_usd, found.error) == ("Paris, I believe.", 0.0, None)
    assert missing.error == "no fixture for prompt 'nope' in demo.fixtures.yml" and not missing.retryable


def test_a_fixtures_model_without_fixtures_says_where_they_come_from():
    async def main():
        async with Router(ProviderSettings()) as router:
            return await router.complete(ChatRequest(model_id="fixtures:x", messages=(), prompt_id="p"))

    assert "add a `fixtures` mapping to the blueprint's header" in asyncio.run(main()).error


def test_parse_fixtures_accepts_the_full_format_as_a_mapping():
    loaded, problems = parse_fixtures({"version": 1, "strategy": "first", "responses": {"p": ["a", "b"]}})
    assert problems == [] and loaded.answer("p", "fixtures:x") == ("a", None)


def test_turns_beside_by_model_are_the_default_answer():
    fixtures, problems = parse_fixtures({"responses": {"p": {"turns": ["a", "b"], "byModel": {"m": {"turns": ["c"]}}}}})
    assert problems == []
    assert fixtures.responses["p"]["default"] == {"turns": ["a", "b"]}
