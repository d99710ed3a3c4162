"""A prompt's ``simulated_user`` keys: read into the Blueprint, every mistake located at its key with the fix."""

from __future__ import annotations

import pytest

from blueprints.spec.parse import parse_blueprint

HEADER = "title: t\nmodels: [openai:cand]\n---\n"


def parse(body: str):
    return parse_blueprint(HEADER + body)


def test_keys_are_read():
    result = parse("- id: p\n  simulated_user:\n    model: openai:sim\n    persona: a tired customer\n"
                   "    goal: a refund\n    first_message: my order broke\n"
                   "    stop: {point: {$contains: refund issued}}\n    max_turns: 4\n  should: [x]\n")
    assert not result.errors
    prompt, = result.blueprint.prompts
    sim = prompt.simulated_user
    assert (sim.model, sim.persona, sim.goal, sim.max_turns) == ("openai:sim", "a tired customer", "a refund", 4)
    assert sim.stop_point.fn == "contains" and sim.stop_point.fn_args == "refund issued" and sim.stop_phrase is None
    assert [(m.role, m.content) for m in prompt.messages] == [("user", "my order broke")]


def test_max_turns_defaults_to_six_and_phrase_is_kept():
    result = parse("- id: p\n  prompt: hi\n  simulated_user: {model: openai:sim, goal: g, stop: {phrase: ' DONE '}}\n"
                   "  should: [x]\n")
    assert not result.errors
    sim = result.blueprint.prompts[0].simulated_user
    assert sim.max_turns == 6 and sim.stop_phrase == "DONE" and sim.first_message is None


@pytest.mark.parametrize("sim, line, column, words, hint", [
    ("{model: gpt, goal: g, first_message: hi, stop: {phrase: D}}", 5, 29, "`provider:model` id", "openai:"),
    ("{model: openai:s, first_message: hi, stop: {phrase: D}}", 5, 19, "needs `goal`", "goal:"),
    ("{model: openai:s, goal: g, first_message: hi}", 5, 19, "needs a `stop` rule", "stop: {phrase"),
    ("{model: openai:s, goal: g, first_message: hi, stop: {phrase: D, point: {$contains: x}}}", 5, 65,
     "exactly one of `phrase` or `point`", "stop: {phrase"),
    ("{model: openai:s, goal: g, first_message: hi, stop: {point: a judged point}}", 5, 78,
     "must be a function point", "$contains"),
    ("{model: openai:s, goal: g, first_message: hi, stop: {point: {$js: 'true'}}}", 5, 78,
     "cannot be a stop rule", "$contains"),
    ("{model: openai:s, goal: g, first_message: hi, stop: {phrase: D}, max_turns: 0}", 5, 95,
     "from 1 to 50", "max_turns: 6"),
    ("{model: openai:s, goal: g, stop: {phrase: D}}", 5, 19, "needs its opening", "first_message"),
    ("{model: openai:s, goal: g, first_message: '', stop: {phrase: D}}", 5, 61, "non-empty text", "quote"),
    ("[openai:s]", 5, 19, "must be a mapping", "simulated_user: {model"),
])
def test_mistakes_are_located_with_the_fix(sim, line, column, words, hint):
    result = parse(f"- id: p\n  simulated_user: {sim}\n  should: [x]\n")
    assert result.blueprint is None
    error = next(d for d in result.errors if words in d.message)
    assert error.line == line and hint in (error.hint or "")
    assert "prompt 'p'" in error.message


def test_first_message_and_authored_opening_both_given_is_an_error():
    result = parse("- id: p\n  prompt: hi\n  simulated_user: {model: openai:s, goal: g, first_message: hey, "
                   "stop: {phrase: D}}\n  should: [x]\n")
    error, = result.errors
    assert "both given" in error.message and error.line == 6


def test_opening_asking_for_more_turns_than_max_turns_is_an_error():
    result = parse("- id: p\n  messages: [{user: a}, {assistant: null}, {user: b}]\n"
                   "  simulated_user: {model: openai:s, goal: g, stop: {phrase: D}, max_turns: 1}\n  should: [x]\n")
    error, = result.errors
    assert "2 assistant turns" in error.message and "max_turns" in error.hint


def test_unknown_key_is_named():
    result = parse("- id: p\n  simulated_user: {model: openai:s, goal: g, first_message: hi, stop: {phrase: D}, "
                   "max_turn: 3}\n  should: [x]\n")
    assert any("max_turn" in (d.message + (d.hint or "")) and "max_turns" in (d.hint or "")
               for d in result.errors + result.warnings)
