"""Simulated users (docs/blueprints.md "Simulated users"): the stop rule in the planted turn, max_turns otherwise,
a failing or off-script simulator an item error, the user model's calls counted apart."""

from __future__ import annotations

import asyncio

import pytest

from blueprints.spec.parse import parse_blueprint
from runs.engine.generate import expand_variants, generate
from runs.engine.types import ChatRequest, ChatResult, Usage

HEADER = "title: t\nmodels: [openai:cand]\n---\n"


def blueprint(simulated: str, extra: str = ""):
    text = HEADER + "- id: p\n" + extra + "  simulated_user:\n" + simulated + "  should: [$contains: refund]\n"
    result = parse_blueprint(text)
    assert not result.errors, [d.message for d in result.errors]
    return result.blueprint


class Script:
    """Candidate answers ``answer <n>`` (or a planted text at turn n); the user model answers from a list."""

    def __init__(self, planted: dict[int, str] | None = None, user: list | None = None):
        self.planted, self.user = planted or {}, user
        self.requests: list[ChatRequest] = []

    async def __call__(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        if request.purpose == "user":
            n = sum(r.purpose == "user" for r in self.requests)
            if self.user is not None:
                answer = self.user[n - 1]
                return answer if isinstance(answer, ChatResult) else ChatResult(text=answer, usage=Usage(7, 3),
                                                                                 cost_usd=0.25)
            return ChatResult(text=f"user says {n}", usage=Usage(7, 3), cost_usd=0.25)
        n = sum(r.purpose == "candidate" for r in self.requests)
        return ChatResult(text=self.planted.get(n, f"answer {n}"), usage=Usage(10, 2), cost_usd=0.5)


def run(bp, complete):
    variant, = expand_variants(bp)
    return asyncio.run(generate(bp.prompts[0], variant, complete))


SIM = ("    model: openai:sim-user\n    persona: a tired customer\n    goal: get a refund\n"
       "    first_message: my order broke\n")


def test_stops_on_the_stop_point_in_the_planted_turn():
    bp = blueprint(SIM + "    stop: {point: {$contains: refund issued}}\n    max_turns: 6\n")
    script = Script(planted={3: "Done: refund issued."})
    response = run(bp, script)
    assert response.error is None
    assistant = [t for t in response.conversation if t.role == "assistant"]
    assert [t.content for t in assistant] == ["answer 1", "answer 2", "Done: refund issued."]
    assert "met by assistant turn 3" in response.conversation[-1].note
    users = [t for t in response.conversation if t.role == "user"]
    assert [t.simulated for t in users] == [False, True, True]
    # counted apart: 3 candidate calls in usage and cost, 2 user calls on their own
    assert response.usage == Usage(30, 6) and response.cost_usd == 1.5
    assert response.user_calls == 2 and response.user_usage == Usage(14, 6) and response.user_cost_usd == 0.5
    assert [r.purpose for r in script.requests].count("user") == 2


def test_stops_at_max_turns_otherwise():
    bp = blueprint(SIM + "    stop: {point: {$contains: refund issued}}\n    max_turns: 4\n")
    script = Script()
    response = run(bp, script)
    assert response.error is None
    assert sum(t.role == "assistant" for t in response.conversation) == 4
    assert sum(r.purpose == "user" for r in script.requests) == 3
    assert "max_turns" in response.stop_note and response.conversation[-1].note == response.stop_note
    assert response.text == "answer 1\n\nanswer 2\n\nanswer 3\n\nanswer 4"


def test_stop_phrase_said_by_the_user_model_ends_the_conversation():
    bp = blueprint(SIM + "    stop: {phrase: DONE}\n    max_turns: 6\n")
    script = Script(user=["still broken", "thanks, DONE"])
    response = run(bp, script)
    assert response.error is None
    assert [t.content for t in response.conversation if t.role == "assistant"] == ["answer 1", "answer 2"]
    last = response.conversation[-1]
    assert last.role == "user" and last.simulated and "stop phrase 'DONE'" in last.note


def test_the_phrase_must_be_said_as_written():
    bp = blueprint(SIM + "    stop: {phrase: DONE}\n    max_turns: 4\n")
    response = run(bp, Script(user=["I'm done with waiting", "DONE-ish?", "ok. DONE"]))
    assert response.error is None
    assert [t.content for t in response.conversation if t.role == "user"][1:] == [
        "I'm done with waiting", "DONE-ish?", "ok. DONE"]
    assert sum(t.role == "assistant" for t in response.conversation) == 3
    assert "stop phrase 'DONE' after assistant turn 3" in response.conversation[-1].note


def test_user_model_sees_persona_goal_and_swapped_roles():
    bp = blueprint(SIM + "    stop: {phrase: DONE}\n    max_turns: 2\n")
    script = Script(user=["more please"])
    run(bp, script)
    request = next(r for r in script.requests if r.purpose == "user")
    assert request.model_id == "openai:sim-user"
    system = request.messages[0]
    assert system["role"] == "system" and "a tired customer" in system["content"] and "get a refund" in \
        system["content"] and "DONE" in system["content"]
    assert [(m["role"], m["content"]) for m in request.messages[1:]] == [
        ("assistant", "my order broke"), ("user", "answer 1")]


@pytest.mark.parametrize("answer, reason", [
    (ChatResult(error="HTTP 500 from the provider", retryable=True), "HTTP 500"),
    ("   ", "empty answer"),
    ("Assistant: I can help with that", "role label"),
    ("answer 1", "repeated the assistant's answer"),
    ("x" * 20_001, "more than the 20,000"),
])
def test_a_failing_or_off_script_simulator_is_an_item_error(answer, reason):
    bp = blueprint(SIM + "    stop: {phrase: DONE}\n    max_turns: 5\n")
    response = run(bp, Script(user=[answer]))
    assert response.text is None and response.error is not None
    assert "simulated user (openai:sim-user) failed" in response.error and reason in response.error
    assert response.error.startswith("turn 2 of 5:")
    assert response.user_calls == 1
    assert response.conversation[-1].role == "user" and response.conversation[-1].simulated


def test_authored_opening_turns_instead_of_first_message():
    text = HEADER + ("- id: p\n  messages:\n    - user: hi\n    - assistant: null\n    - user: my order broke\n"
                     "  simulated_user:\n    model: openai:sim-user\n    goal: get a refund\n"
                     "    stop: {phrase: DONE}\n    max_turns: 3\n  should: [x]\n")
    bp = parse_blueprint(text).blueprint
    script = Script(user=["and?"])
    response = run(bp, script)
    assert [t.content for t in response.conversation if t.role == "assistant"] == ["answer 1", "answer 2", "answer 3"]
    assert sum(r.purpose == "user" for r in script.requests) == 1


# -- the estimate: the simulator's calls on their own line, the most figure assuming max_turns ------------------

from runs.engine.estimate import CHARS_PER_TOKEN, estimate_run, tokens  # noqa: E402
from runs.engine.judge import JudgePlan  # noqa: E402
from runs.engine.providers.prices import DEFAULT_MAX_TOKENS, Price  # noqa: E402

PRICES = {"openai:cand": Price(1.0, 4.0, "2026-01-01"), "openai:sim-user": Price(0.5, 2.0, "2026-01-01")}


class Longest(Script):
    """Every answer at its whole max_tokens, and the user model never stops: the most a simulation can send."""

    async def __call__(self, request):
        self.requests.append(request)
        tag = "u" if request.purpose == "user" else "c"
        return ChatResult(text=f"{tag}{len(self.requests)} " + "x" * (DEFAULT_MAX_TOKENS * CHARS_PER_TOKEN - 6))


def test_estimate_most_figure_is_never_below_what_a_simulation_sends():
    bp = blueprint(SIM + "    stop: {phrase: DONE}\n    max_turns: 5\n")
    script = Longest()
    response = run(bp, script)
    assert response.error is None and "max_turns" in response.stop_note
    estimate = estimate_run(bp, ["openai:cand"], JudgePlan(judges=()), prices=PRICES)
    candidate, = estimate.candidates
    user, = estimate.users
    sent = {"candidate": [r for r in script.requests if r.purpose == "candidate"],
            "user": [r for r in script.requests if r.purpose == "user"]}
    assert (candidate.calls, user.calls) == (len(sent["candidate"]), len(sent["user"])) == (5, 4)
    assert user.role == "user" and user.model_id == "openai:sim-user"
    assert estimate.to_json()["calls"]["user"] == 4 and estimate.total_calls == 9
    # What the calls really cost, priced on what they sent and got back (4 characters a token).
    def actual(requests, price):
        ins = sum(tokens(sum(len(m["content"]) for m in r.messages)) for r in requests)
        return (ins * price.input_per_million + len(requests) * DEFAULT_MAX_TOKENS * price.output_per_million) / 1e6
    spent = actual(sent["candidate"], PRICES["openai:cand"]) + actual(sent["user"], PRICES["openai:sim-user"])
    assert estimate.most_cost >= spent
    assert user.cost >= actual(sent["user"], PRICES["openai:sim-user"])
    assert estimate.expected_cost < estimate.most_cost
