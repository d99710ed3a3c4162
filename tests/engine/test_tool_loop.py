"""The native tool loop (issue 36, part 1): tools sent in each provider's shape, calls answered from mocks,
the trajectory as the record, read by Weval's tool functions the same way as a trace-only response.

Through the real router against the fake LLM server speaking OpenAI, Anthropic and Gemini; the point functions
are the engine's own (evaluate_point), so a native and a trace-only trajectory are scored by one code path.
"""

from __future__ import annotations

import asyncio

import pytest

from blueprints.spec.parse import parse_blueprint
from runs.engine.generate import expand_variants, generate
from runs.engine.points.evaluate import evaluate_point
from runs.engine.providers import Router, settings_from_env
from runs.engine.tools import setup_from
from tests.fakes.llm_server import FakeLLMServer

KEY = "sk-tool-loop-test-0001"

BLUEPRINT = """
title: tools
models: [{model}]
toolUse: {{mode: {mode}, maxSteps: {steps}}}
tools:
  - name: search
    description: Search a small index.
    schema:
      type: object
      properties: {{query: {{type: string}}}}
      required: [query]
    mocks:
      - when: {{query: {{matches: "^Article"}}}}
        result: [{{id: "42", title: Article 2}}]
      - when: {{query: nothing}}
        error: the index is offline
  - name: retrieve
    description: Retrieve a document by id.
    schema:
      type: object
      properties:
        docId: {{type: string}}
        options: {{type: object, properties: {{snippet: {{type: boolean}}, maxChars: {{type: number}}}}}}
      required: [docId]
    mocks:
      - when: {{docId: "42"}}
        result: {{id: "42", title: Article 2, body: The second article.}}
    default: {{error: no such document}}
---
- id: retrieve
  prompt: "Find and quote Article 2's title exactly."
"""

STEPS = [[{"name": "search", "arguments": {"query": "Article 2"}}],
         [{"name": "retrieve", "arguments": {"docId": "42", "options": {"snippet": True, "maxChars": 120}}}]]
POINTS = [
    ("tool_call_order", ["search", "retrieve"]),
    ("tool_args_match", {"name": "search", "where": {"query": "Article 2"}}),
    ("tool_args_match", {"name": "retrieve", "where": {"docId": "42", "options": {"snippet": True, "maxChars": 120}}}),
    ("tool_call_count_between", [2, 2]),
    ("tool_called", "retrieve"),
    ("tool_called", "calculator"),
    ("tool_call_count_between", [1, 1, "search"]),
]


@pytest.fixture(scope="module")
def server():
    fake = FakeLLMServer()
    fake.start_in_thread()
    yield fake
    fake.stop_in_thread()


@pytest.fixture(autouse=True)
def clean(server):
    server.reset()


def _settings(server):
    return settings_from_env({
        "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url + "/v1",
        "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url,
        "GEMINI_API_KEY": KEY, "GEMINI_BASE_URL": server.base_url + "/v1beta",
    })


def _run(server, model: str, *, mode: str = "native", steps: int = 4, rules=None, text: str | None = None,
         custom: str = ""):
    bp_text = BLUEPRINT.format(model=model, mode=mode, steps=steps)
    if custom:
        bp_text = bp_text.replace(f"models: [{model}]", f"models:\n  - {custom}")
    result = parse_blueprint(bp_text if text is None else text, path="tools.yml")
    assert not result.errors, result.errors
    bp = result.blueprint
    server.script(rules if rules is not None else [
        {"match": "Article 2", "steps": STEPS, "reply": 'The title is "Article 2".'}])

    async def go():
        async with Router(_settings(server), custom_models=bp.custom_models) as router:
            variant = expand_variants(bp)[0]
            return await generate(bp.prompts[0], variant, router.complete)

    return asyncio.run(go())


def _scores(response):
    calls = list(response.tool_calls) if response.tool_mode == "native" else None
    return [evaluate_point(fn, args, response.text, tool_calls=calls) for fn, args in POINTS]


NATIVE = [("openai:gpt-4o-mini", "openai_chat"), ("anthropic:claude-3-5-haiku", "anthropic"),
          ("google:gemini-2.5-flash", "gemini")]


@pytest.mark.parametrize("model,protocol", NATIVE)
def test_a_native_loop_answers_each_call_from_the_mocks_until_the_model_answers_in_text(server, model, protocol):
    response = _run(server, model)
    assert response.error is None, response.error
    assert response.tool_mode == "native"
    assert response.text == 'The title is "Article 2".'
    assert [(c["name"], c["arguments"], c["outcome"], c["step"], c["check"]) for c in response.tool_calls] == [
        ("search", {"query": "Article 2"}, "result", 1, None),
        ("retrieve", {"docId": "42", "options": {"snippet": True, "maxChars": 120}}, "result", 2, None)]
    assert response.tool_calls[0]["mock"] == "mock 1"
    assert response.tool_calls[1]["result"] == {"id": "42", "title": "Article 2", "body": "The second article."}
    # Three model calls, each sent the tools in the provider's own shape; the results went back.
    log = server.requests()
    assert [r["protocol"] for r in log] == [protocol] * 3
    tools = log[0]["body"]["tools"]
    if protocol == "openai_chat":
        assert tools[0] == {"type": "function", "function": {"name": "search", "description": "Search a small index.",
                            "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                           "required": ["query"]}}}
    elif protocol == "anthropic":
        assert tools[0]["name"] == "search" and tools[0]["input_schema"]["required"] == ["query"]
    else:
        assert tools[0]["functionDeclarations"][1]["name"] == "retrieve"
    assert '"42"' in log[1]["tool_results"][0] and "Article 2" in log[1]["tool_results"][0]
    assert "second article" in log[2]["tool_results"][-1]
    # Tokens and calls are counted over the whole loop.
    assert response.attempts == 3
    assert response.usage.input_tokens == sum(_prompt_words(r) for r in log)
    # The trajectory is in the conversation, in order.
    roles = [(t.role, bool(t.tool_calls), t.tool["outcome"] if t.tool else None) for t in response.conversation]
    assert roles == [("user", False, None), ("assistant", True, None), ("tool", False, "result"),
                     ("assistant", True, None), ("tool", False, "result"), ("assistant", False, None)]


def _prompt_words(entry):
    return sum(len((m["content"] or "").split()) for m in entry["messages"])


def test_every_tool_function_scores_a_native_and_a_trace_only_trajectory_the_same(server):
    native = [_scores(_run(server, model)) for model, _ in NATIVE]
    # A custom model gets no tools: under auto it is traced, and the fake writes the same calls as TOOL_CALL lines.
    custom = ("{id: 'custom:plain', url: '%s/v1/chat/completions', modelName: plain, inherit: openai}"
              % server.base_url)
    traced = _run(server, "custom:plain", mode="auto", custom=custom)
    assert traced.error is None, traced.error
    assert traced.tool_mode == "trace-only" and "takes no native tool definitions" in traced.tool_note
    assert [("tools" in r["body"]) for r in server.requests("plain")] == [False]
    assert [c["name"] for c in traced.tool_calls] == ["search", "retrieve"]
    expected = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    for scores in native + [_scores(traced)]:
        assert [(s.score, s.error) for s in scores] == [(e, None) for e in expected]


def test_native_mode_refuses_a_model_without_native_tools_and_says_why(server):
    custom = ("{id: 'custom:plain', url: '%s/v1/chat/completions', modelName: plain, inherit: openai}"
              % server.base_url)
    response = _run(server, "custom:plain", mode="native", custom=custom)
    assert response.error and "takes no native tool definitions" in response.error and "mode: auto" in response.error
    assert server.requests() == []  # nothing was sent


def test_the_step_limit_is_recorded_and_fails_the_response(server):
    response = _run(server, "openai:gpt-4o-mini", steps=1)
    assert response.text is None and response.error
    assert "toolUse.maxSteps allows 1 model call" in response.error and "search" in response.error
    assert [(c["name"], c["outcome"]) for c in response.tool_calls] == [("search", "step-limit")]
    assert len(server.requests()) == 1


@pytest.mark.parametrize("call,outcome,words", [
    ({"name": "search", "arguments": {"query": 7}}, "bad-arguments", "break its schema: query: 7 is not of type"),
    ({"name": "search", "arguments": {}}, "bad-arguments", "'query' is a required property"),
    ({"name": "search", "arguments": {"query": "zebra"}}, "no-mock", "no mock of search matches the arguments"),
    ({"name": "delete_all", "arguments": {}}, "unknown-tool", "'delete_all', a tool the blueprint does not declare"),
])
def test_a_call_that_breaks_the_schema_matches_no_mock_or_names_no_tool_fails_the_response(server, call, outcome,
                                                                                           words):
    response = _run(server, "anthropic:claude-3-5-haiku",
                    rules=[{"match": "Article", "tool_calls": [call], "reply": "Done."}])
    assert response.text is None
    assert words in response.error, response.error
    assert [c["outcome"] for c in response.tool_calls] == [outcome]
    # The turn that was to be generated stays unfilled after the failing step (where the conversation stopped).
    assert response.conversation[-2].role == "tool" and response.conversation[-2].tool["outcome"] == outcome
    assert response.conversation[-1].role == "assistant" and response.conversation[-1].content is None
    assert len(server.requests()) == 1  # the loop stopped there


def test_a_mocked_error_is_a_tool_error_the_model_sees_and_the_loop_goes_on(server):
    response = _run(server, "google:gemini-2.5-flash", rules=[
        {"match": "Article", "tool_calls": [{"name": "search", "arguments": {"query": "nothing"}}],
         "reply": "The index is offline."}])
    assert response.error is None and response.text == "The index is offline."
    assert response.tool_calls[0]["outcome"] == "error" and response.tool_calls[0]["error"] == "the index is offline"
    sent = server.requests()[1]["body"]["contents"][-1]["parts"][0]["functionResponse"]
    assert sent == {"name": "search", "response": {"error": "Error: the index is offline"}}


def test_the_default_answers_a_call_no_rule_matches(server):
    response = _run(server, "openai:gpt-4o-mini", rules=[
        {"match": "Article", "tool_calls": [{"name": "retrieve", "arguments": {"docId": "99"}}], "reply": "None."}])
    assert response.error is None
    assert response.tool_calls[0]["outcome"] == "error" and response.tool_calls[0]["mock"] == "default"
    tool_message = server.requests()[1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "Error: no such document"


def test_trace_only_blueprints_send_no_tools_and_read_tool_call_lines_as_before(server):
    response = _run(server, "openai:gpt-4o-mini", mode="trace-only")
    assert response.tool_mode is None
    assert "tools" not in server.requests()[0]["body"]
    assert [c["name"] for c in response.tool_calls] == ["search", "retrieve"]


def test_the_setup_reads_mode_steps_and_enabled():
    tools = [{"name": "a", "mocks": [{"result": 1}]}]
    assert setup_from(tools, {"mode": "trace-only"}) is None
    assert setup_from(tools, {"mode": "auto", "enabled": False}) is None
    assert setup_from(None, {"mode": "native"}) is None
    setup = setup_from(tools, {"mode": "native", "maxSteps": 3})
    assert setup.max_steps == 3 and setup.answer("a", {}).result == 1
    assert setup_from(tools, {"mode": "auto"}).max_steps == 8


@pytest.mark.parametrize("steps", [1, 3, 4])
def test_the_most_it_can_cost_is_never_below_the_calls_a_tool_loop_makes(server, steps):
    from runs.engine.estimate import estimate_run
    from runs.engine.judge import JudgePlan

    many = [[{"name": "search", "arguments": {"query": "Article 2"}}]] * 6  # a model that never stops calling
    for rules in ([{"match": "Article", "steps": many, "reply": "x"}],
                  [{"match": "Article", "steps": STEPS, "reply": "Done."}]):
        response = _run(server, "openai:gpt-4o-mini", steps=steps, rules=rules)
        made = len(server.requests())
        server.reset()
        bp = parse_blueprint(BLUEPRINT.format(model="openai:gpt-4o-mini", mode="native", steps=steps),
                             path="t.yml").blueprint
        estimate = estimate_run(bp, ["openai:gpt-4o-mini"], JudgePlan(judges=()))
        assert made == response.attempts
        assert estimate.generation_calls >= made
        assert estimate.generation_calls == steps  # the bound is the step limit, one turn


def test_an_llm_judge_reads_the_trajectory_in_the_transcript(server):
    from runs.engine.judge import render_transcript

    response = _run(server, "anthropic:claude-3-5-haiku")
    transcript = render_transcript(response.conversation)
    assert '[calls tool search with {"query": "Article 2"}]' in transcript
    assert "tool retrieve (mocked): " in transcript and "The second article." in transcript
    assert transcript.rstrip().endswith('assistant (generated): The title is "Article 2".')


def test_a_flood_of_parallel_calls_in_one_answer_fails_the_response_unanswered(server):
    flood = [{"name": "search", "arguments": {"query": f"Article {i}"}} for i in range(500)]
    response = _run(server, "openai:gpt-4o-mini", rules=[{"match": "Article", "tool_calls": flood, "reply": "x"}])
    assert response.text is None and "500 tool calls in one answer, more than the 32" in response.error
    assert len(response.tool_calls) == 32 and {c["outcome"] for c in response.tool_calls} == {"too-many-calls"}
    assert len(server.requests()) == 1


def test_hostile_arguments_are_refused_with_a_reason_never_an_exception():
    from runs.engine.tools import setup_from

    recursive = {"type": "object", "properties": {"x": {"$ref": "#"}}, "$defs": {}}
    setup = setup_from([{"name": "t", "schema": recursive, "default": {"result": 1}},
                        {"name": "p", "schema": {"type": "object", "properties": {
                            "s": {"type": "string", "pattern": "^(a|a)*$"}}}, "default": {"result": 1}}],
                       {"mode": "native"})
    deep: dict = {}
    node = deep
    for _ in range(3_000):
        node["x"] = {}
        node = node["x"]
    answer = setup.answer("t", deep)
    assert answer.failed and answer.outcome == "bad-arguments"
    huge = setup.answer("t", {"x": {}, "pad": "y" * 200_000})
    assert huge.failed and "more than the limit of 100,000" in huge.reason
    slow = setup.answer("p", {"s": "a" * 40 + "!"})
    assert slow.failed and "took longer than" in slow.reason


def test_the_operators_regex_time_limit_bounds_a_mock_pattern(server):
    from blueprints.spec.limits import Limits

    text = BLUEPRINT.format(model="openai:gpt-4o-mini", mode="native", steps=4).replace(
        '{{matches: "^Article"}}'.replace("{{", "{").replace("}}", "}"), '{matches: "^(a|a)*$"}')
    bp = parse_blueprint(text, path="t.yml").blueprint
    server.script([{"match": "Article", "tool_calls": [{"name": "search", "arguments": {"query": "a" * 30 + "!"}}],
                    "reply": "x"}])

    async def go(limits):
        async with Router(_settings(server)) as router:
            return await generate(bp.prompts[0], expand_variants(bp)[0], router.complete, limits=limits)

    import time
    started = time.monotonic()
    response = asyncio.run(go(Limits(regex_timeout_s=0.05)))
    assert time.monotonic() - started < 0.9  # the default limit is 1 s
    assert response.error and "took longer than 0.05 s" in response.error


def test_every_call_of_a_gemini_trajectory_has_an_id_of_its_own(server):
    response = _run(server, "google:gemini-2.5-flash")
    ids = [c["id"] for c in response.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("gemini-") for i in ids)
    # None of our own ids is sent back to Gemini as if it had given it.
    sent = server.requests()[2]["body"]["contents"]
    assert all("id" not in p.get("functionResponse", {}) and "id" not in p.get("functionCall", {})
               for c in sent for p in c["parts"])
