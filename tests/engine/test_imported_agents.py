"""Imported agent suites run on the native tool loop (issue 36, part 2): AgentV's `tool_trajectory` and
`execution_metrics`, AI Eval's `tool_mocks`, `max_steps`, `expected.tool_calls`, `tool_selection` and `efficiency`,
scored as their upstreams say (reference/agentv-and-aieval.md 2.3, 2.6, 3.4, 3.5; seeds 001, 002, 003).

Through the real router against the fake LLM server (which learns native tool calls in the OpenAI, Anthropic and
Gemini shapes), then the engine's own assessment. docs/importing.md lists these cases ("Cases checked against
upstream").
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from blueprints.spec import parse_any
from runs.engine.assess import assess_response
from runs.engine.estimate import estimate_run
from runs.engine.generate import expand_variants, generate
from runs.engine.judge import plan_judges
from runs.engine.providers import Router, settings_from_env
from tests.fakes.llm_server import FakeLLMServer

KEY = "sk-imported-agents-0001"
NATIVE = ["openai:gpt-4o-mini", "anthropic:claude-3-5-haiku", "google:gemini-2.5-flash"]

# Seed 001's trajectory scenarios and seed 002's export-screening example, with evalsite's `tools` (mocks) so a
# model can be run on them.
AGENTV = """
name: kb-agent
description: Trajectory scenarios of AgentV's seeds, run natively
toolUse: {mode: native, maxSteps: 6}
tools:
  - name: knowledgeSearch
    description: Search the knowledge base.
    schema: {type: object, properties: {query: {type: string}}, required: [query]}
    default: {result: {hits: ["branch deactivation policy"]}}
  - name: search_entity_list
    description: Search the BIS Entity List.
    schema: {type: object, properties: {query: {type: string}}, required: [query]}
    mocks:
      - when: {query: Huawei}
        result: {listed: true, entity: Huawei Technologies Co., Ltd.}
    default: {result: {listed: false}}
  - name: check_regulations
    description: Look up the EAR rule for an item.
    schema: {type: object, properties: {item: {type: string}}}
    default: {result: {rule: EAR 744.11}}
  - name: generate_report
    description: Write the screening report.
    schema: {type: object}
    default: {result: {report: filed}}
tests:
  - id: search-thrice
    input: "Research branch deactivation (thrice)"
    criteria: Searches at least three times
    assert:
      - name: minimum_search_calls
        type: tool_trajectory
        mode: any_order
        minimums: {knowledgeSearch: 3}
  - id: search-twice-minimums
    input: "Research branch deactivation (twice)"
    criteria: Searches at least three times
    assert:
      - type: tool_trajectory
        mode: any_order
        minimums: {knowledgeSearch: 3}
  - id: search-twice-in-order
    input: "Research branch deactivation (twice)"
    criteria: Searches three times in a row
    assert:
      - type: tool_trajectory
        mode: in_order
        expected: [{tool: knowledgeSearch}, {tool: knowledgeSearch}, {tool: knowledgeSearch}]
  - id: screening-listed
    input: "Screen this entity for export compliance: Huawei Technologies Co., Ltd."
    criteria: Should deny the transaction citing Entity List restrictions
    assert:
      - type: contains
        value: DENIED
        required: true
      - type: tool_trajectory
        mode: in_order
        expected:
          - tool: search_entity_list
            args: {query: Huawei}
          - tool: check_regulations
          - tool: generate_report
        required: true
        weight: 2.0
  - id: screening-wrong-args
    input: "Screen this entity for export compliance: ZTE Corporation."
    criteria: Should deny the transaction citing Entity List restrictions
    assert:
      - type: contains
        value: DENIED
        required: true
      - type: tool_trajectory
        mode: in_order
        expected:
          - tool: search_entity_list
            args: {query: Huawei}
          - tool: check_regulations
          - tool: generate_report
        required: true
        weight: 2.0
  - id: exact-positions
    input: "Screen exactly"
    criteria: Calls the tools in exactly this order
    assert:
      - type: tool_trajectory
        mode: exact
        expected:
          - tool: search_entity_list
            args: {query: Huawei}
          - tool: check_regulations
            args: {item: lithography}
  - id: metrics
    input: "Research with a budget"
    criteria: Stays within budget
    assert:
      - type: execution_metrics
        max_tool_calls: 2
        max_llm_calls: 5
"""

SEARCH = {"name": "knowledgeSearch", "arguments": {"query": "branch deactivation"}}
AGENTV_SCRIPT = [
    {"match": r"\(thrice\)", "steps": [[SEARCH], [SEARCH], [SEARCH]], "reply": "Three searches done."},
    {"match": r"\(twice\)", "steps": [[SEARCH], [SEARCH]], "reply": "Two searches done."},
    {"match": "Huawei", "steps": [[{"name": "search_entity_list", "arguments": {"query": "Huawei"}}],
                                  [{"name": "check_regulations", "arguments": {"item": "lithography"}}],
                                  [{"name": "generate_report", "arguments": {}}]],
     "reply": "DENIED - Huawei is on the BIS Entity List."},
    {"match": "ZTE", "steps": [[{"name": "search_entity_list", "arguments": {"query": "ZTE"}}],
                               [{"name": "check_regulations", "arguments": {"item": "lithography"}}]],
     "reply": "DENIED - ZTE needs a license."},
    {"match": "Screen exactly", "steps": [[{"name": "search_entity_list", "arguments": {"query": "Huawei"}}],
                                          [{"name": "check_regulations", "arguments": {"item": "lasers"}}],
                                          [{"name": "generate_report", "arguments": {}}]],
     "reply": "Screened."},
    {"match": "budget", "steps": [[SEARCH], [SEARCH], [SEARCH]], "reply": "Done within budget?"},
]
# Test id -> (score, what the upstream says), from reference 2.3 (aggregate, required gate) and 2.6 (modes).
AGENTV_EXPECTED = {
    "search-thrice": 1.0,  # any_order: the one listed tool called >= 3 times
    "search-twice-minimums": 0.0,  # any_order: fraction of listed tools meeting their minimum, 0 of 1
    "search-twice-in-order": 2 / 3,  # in_order: two of three expected calls found in order
    "screening-listed": 1.0,  # contains 1 (w 1) and trajectory 1 (w 2)
    "screening-wrong-args": 0.0,  # the same-name call with other args is consumed as a miss: 1/3 < 0.8, gate -> 0
    "exact-positions": 1 / 3,  # exact: position 1 hit, position 2 other args, a length difference: 1 / (2 + 1)
    "metrics": 0.5,  # execution_metrics: fraction of checks met: 3 tool calls > 2, 4 model calls <= 5
}

WEATHER_PROMPT = """name: weather-agent
is_system_prompt: true
template: |
  You are a weather assistant. Use the tools.
tools:
  - name: get_weather
    description: Current weather for a city
    input_schema:
      type: object
      properties:
        location: {type: string}
        options: {type: object}
  - name: search
    description: Web search
  - name: calculate
    description: Arithmetic
"""

AIEVAL = """suite: weather-loop
prompt: weather-agent
cases:
  - id: weather
    input:
      user_task: "What's the weather in San Francisco?"
    tool_mocks:
      - name: get_weather
        match: {location: San Francisco, options: {units: metric}}
        response: {temp_c: 18, sky: fog}
      - name: get_weather
        response: {temp_c: 30, sky: clear}
    max_steps: 4
    expected:
      contains: ["18"]
      tool_calls:
        - name: get_weather
          args_match: {location: San Francisco}
          order: 1
          required: true
  - id: unmatched
    input:
      user_task: "Search the weather archive for Paris."
    tool_mocks:
      - name: get_weather
        response: {temp_c: 12}
    expected:
      contains: ["Paris"]
  - id: selection
    input:
      user_task: "Find 2+2."
    tool_mocks:
      - name: search
        response: {answer: four}
      - name: calculate
        error: calculator offline
    evaluators:
      - type: tool_selection
        expected_tools: ["search", "calculate"]
        score_threshold: 0.5
  - id: efficiency
    input:
      user_task: "Weather in Oslo, and think hard."
    tool_mocks:
      - name: get_weather
        response: {temp_c: 2}
    max_steps: 2
    evaluators:
      - type: efficiency
        max_tokens: 100000
  - id: recorded
    input:
      user_task: "Which tool for Lisbon?"
    expected:
      tool_calls:
        - name: get_weather
          args_match: {location: Lisbon}
          required: true
"""
GET = {"name": "get_weather", "arguments": {"location": "San Francisco", "options": {"units": "metric", "x": 1}}}
AIEVAL_SCRIPT = [
    {"match": "San Francisco", "steps": [[GET]], "reply": "It is 18 C and foggy."},
    {"match": "archive for Paris", "steps": [[{"name": "search", "arguments": {"q": "Paris weather"}}]],
     "reply": "Paris: mild."},
    {"match": "2\\+2", "steps": [[{"name": "search", "arguments": {"q": "2+2"}}],
                                [{"name": "calculate", "arguments": {"expr": "2+2"}}]], "reply": "4"},
    {"match": "Oslo", "steps": [[{"name": "get_weather", "arguments": {"location": "Oslo"}}],
                                [{"name": "get_weather", "arguments": {"location": "Oslo"}}],
                                [{"name": "get_weather", "arguments": {"location": "Oslo"}}]], "reply": "Cold."},
    {"match": "Lisbon", "tool_calls": [{"name": "get_weather", "arguments": {"location": "Lisbon"}}],
     "reply": "Use get_weather."},
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


def settings(server):
    return settings_from_env({
        "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url + "/v1",
        "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url,
        "GEMINI_API_KEY": KEY, "GEMINI_BASE_URL": server.base_url + "/v1beta",
    })


def run_suite(server, bp, model, judges=("openai:never-used",)):
    """Every prompt generated with ``model`` and assessed: prompt id -> (response, assessment)."""

    async def go():
        out = {}
        async with Router(settings(server)) as router:
            variant = expand_variants(bp, [model])[0]
            plan = plan_judges(bp.coverage, default_judges=list(judges), backup_judge=None,
                               description=bp.description)
            for prompt in bp.prompts:
                response = await generate(prompt, variant, router.complete)
                out[prompt.id] = (response, await assess_response(prompt, response, judges=plan,
                                                                  complete=router.complete))
        return out

    return asyncio.run(go())


def agentv():
    result = parse_any(AGENTV, path="EVAL.yaml")
    assert result.ok and result.dialect == "agentv", [d.message for d in result.errors]
    return result


def aieval():
    result = parse_any(AIEVAL, path="tests/weather-loop.yaml", files={"../prompts/weather.yaml": WEATHER_PROMPT})
    assert result.ok and result.dialect == "aieval", [d.message for d in result.errors]
    return result


@pytest.mark.parametrize("model", NATIVE)
def test_agentv_trajectories_and_metrics_score_the_native_loop_as_agentv_says(server, model):
    result = agentv()
    server.script(AGENTV_SCRIPT)
    scored = run_suite(server, result.blueprint, model)
    for test_id, expected in AGENTV_EXPECTED.items():
        response, assessment = scored[test_id]
        assert response.error is None and response.tool_mode == "native", (test_id, response.error)
        points = [(p.score, p.reflection, p.error) for p in assessment.point_assessments]
        assert assessment.score == pytest.approx(expected, abs=0.005), (test_id, assessment.score, points)
    # The gate: the trajectory scored 1/3 before it zeroed the test.
    _, wrong = scored["screening-wrong-args"]
    trajectory = next(p for p in wrong.point_assessments if "tool_trajectory" in p.key_point_text)
    assert trajectory.score == pytest.approx(1 / 3) and "called with other arguments" in trajectory.reflection
    assert wrong.score_before_gates == pytest.approx((1 + 2 / 3) / 3, abs=0.005)
    report = result.import_report["tests"]
    assert any("native tool loop" in line for line in report[0]["mapped"]), report[0]


def test_agentv_without_tools_stays_trace_only_and_says_so():
    result = parse_any(AGENTV.split("toolUse:")[0] + "tests:" + AGENTV.split("\ntests:", 1)[1], path="EVAL.yaml")
    assert result.ok and result.blueprint.tools is None
    approx = result.import_report["tests"][0]["approximated"]
    assert any("trace-only" in line["how"] and "toolUse: {mode: native}" in line["how"] for line in approx), approx


@pytest.mark.parametrize("model", NATIVE)
def test_aieval_tool_mocks_run_a_native_loop_scored_as_ai_eval_says(server, model):
    result = aieval()
    bp = result.blueprint
    server.script(AIEVAL_SCRIPT)
    scored = run_suite(server, bp, model)

    weather, assessment = scored["weather"]
    # The first mock whose `match` is a subset (nested maps too) of the arguments answered.
    assert weather.error is None and weather.tool_mode == "native"
    assert [(c["name"], c["outcome"], c["mock"], c["result"]) for c in weather.tool_calls] == [
        ("get_weather", "result", "mock 1", {"temp_c": 18, "sky": "fog"})]
    assert "18" in server.requests()[1]["tool_results"][0]
    assert assessment.score == 1.0 and assessment.verdict == "pass"

    # A call to a tool with no mock fails the loop (AI Eval: "an unmatched call fails the loop"): an item error,
    # recorded with its reason, never a score.
    unmatched, assessment = scored["unmatched"]
    assert unmatched.text is None and "search has no mocks and no default" in unmatched.error
    assert [(c["name"], c["outcome"]) for c in unmatched.tool_calls] == [("search", "no-mock")]
    assert assessment.score is None

    # tool_selection: the share of expected tools called (a tool error still counts as called); 1.0 here.
    selection, assessment = scored["selection"]
    assert [c["outcome"] for c in selection.tool_calls] == ["result", "error"]
    assert selection.tool_calls[1]["error"] == "calculator offline"
    assert assessment.score == 1.0

    # max_steps 2: a model still calling at its second step is stopped there, and that is recorded.
    efficiency, assessment = scored["efficiency"]
    assert "toolUse.maxSteps allows 2 model calls" in efficiency.error
    assert assessment.score is None

    # No tool_mocks: one completion, its calls recorded and not answered (AI Eval's record-only run); the answer
    # is only the call, so the text scored is empty (never missing).
    recorded, assessment = scored["recorded"]
    assert recorded.error is None and recorded.text == ""
    assert len(server.requests()) == 2 + 1 + 3 + 2 + 1  # weather, unmatched, selection, efficiency, recorded
    assert [(c["name"], c["outcome"]) for c in recorded.tool_calls] == [("get_weather", "recorded")]
    assert assessment.score == 1.0


def test_aieval_efficiency_is_the_mean_of_its_budget_scores(server):
    """reference 3.5: per budget 1 within it, else budget / used; the score is the mean of the two."""
    result = aieval()
    bp = result.blueprint
    prompt = next(p for p in bp.prompts if p.id == "efficiency")
    prompt.tool_use = dict(prompt.tool_use, maxSteps=5)  # let the loop finish: 4 model calls
    server.script(AIEVAL_SCRIPT)
    response, assessment = run_suite(server, bp, "openai:gpt-4o-mini")["efficiency"]
    assert response.error is None and response.attempts == 4
    # Budgets: the case's max_steps (2) and 100000 tokens: (2/4 + 1) / 2.
    assert assessment.score == pytest.approx(0.75)
    assert assessment.verdict == "fail"  # AI Eval: efficiency passes only within both budgets


def test_aieval_report_says_mapped_not_unsupported():
    report = aieval().import_report
    cases = {t["id"]: t for t in report["tests"]}
    assert any("tool_mocks ->" in line for line in cases["weather"]["mapped"])
    assert any("max_steps -> toolUse.maxSteps 4" in line for line in cases["weather"]["mapped"])
    assert not any("tool_mocks" in line for t in report["tests"] for line in t.get("unsupported", []))
    assert any("efficiency -> $efficiency" in line for line in cases["efficiency"]["mapped"])


def test_the_estimate_never_counts_fewer_calls_than_a_loop_makes(server):
    """The most-it-can-cost figure assumes each case's own max_steps (AI Eval) or the suite's maxSteps (AgentV)."""
    for result, script in ((aieval(), AIEVAL_SCRIPT), (agentv(), AGENTV_SCRIPT)):
        bp = result.blueprint
        server.reset()
        server.script(script)
        scored = run_suite(server, bp, "openai:gpt-4o-mini")
        made = sum(r.attempts for r, _ in scored.values())
        plan = plan_judges(bp.coverage, default_judges=["openai:never-used"], backup_judge=None,
                           description=bp.description)
        estimate = estimate_run(bp, ["openai:gpt-4o-mini"], plan, answer_tokens=10)
        assert estimate.generation_calls >= made > 0
        for prompt in bp.prompts:
            one = bp.model_copy(update={"prompts": [prompt]})
            response = scored[prompt.id][0]
            assert estimate_run(one, ["openai:gpt-4o-mini"], plan, answer_tokens=10).generation_calls \
                >= response.attempts, prompt.id


# AgentV's own example, features/tool-trajectory-simple (v2.18.3), as published, with evalsite's `tools` put in
# front so a model can run it. Its target is AgentV's mock agent; the trajectories below are the ones its comments
# describe (knowledgeSearch twice and documentRetrieve once; a research trace without generateReport...).
UPSTREAM_SIMPLE = (Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "agentv" / "v2.18.3" / "examples"
                   / "features" / "tool-trajectory-simple" / "evals" / "dataset.eval.yaml")
SIMPLE_TOOLS = ["knowledgeSearch", "documentRetrieve", "fetchData", "validateSchema", "transformData", "saveResults",
                "checkCredentials", "generateToken", "auditLog", "getCpuMetrics", "getMemoryMetrics",
                "generateReport", "search", "get_weather", "load_data", "transform", "save_data", "analyze"]


def _steps(*calls):
    return [[{"name": name, "arguments": args}] for name, args in calls]


SIMPLE_SCRIPT = [
    {"match": "REST and GraphQL", "steps": _steps(("knowledgeSearch", {"q": "REST"}), ("knowledgeSearch",
                                                                                         {"q": "GraphQL"}),
                                                  ("documentRetrieve", {"id": "d1"})), "reply": "Compared."},
    {"match": "customer data from the API", "steps": _steps(("fetchData", {"source": "api", "page": 1}),
                                                            ("validateSchema", {}), ("transformData", {}),
                                                            ("saveResults", {"to": "db"})), "reply": "Processed."},
    {"match": "Authenticate", "steps": _steps(("checkCredentials", {}), ("generateToken", {}), ("auditLog", {})),
     "reply": "Authenticated."},
    {"match": "system metrics", "steps": _steps(("getCpuMetrics", {}), ("getMemoryMetrics", {})), "reply": "OK."},
    {"match": "generate a report", "steps": _steps(("knowledgeSearch", {"q": "x"}), ("documentRetrieve", {"id": "1"})),
     "reply": "Here is what I found."},
    {"match": "weather like in Paris", "steps": _steps(("search", {"query": "weather Paris", "limit": 5}),
                                                       ("get_weather", {"location": "Paris"})), "reply": "Sunny."},
    {"match": "Load customer data", "steps": _steps(("load_data", {"source": "customers", "format": "csv"}),
                                                    ("transform", {"op": "normalize"}), ("save_data", {"to": "x"})),
     "reply": "Saved."},
    {"match": "Research and analyze", "steps": _steps(("knowledgeSearch", {"q": "data"}), ("analyze", {}),
                                                      ("documentRetrieve", {"id": "2"})), "reply": "Analysed."},
    {"match": "current system status", "steps": _steps(("getCpuMetrics", {}), ("knowledgeSearch", {"q": "status"})),
     "reply": "All good."},
]
# Test id -> AgentV's score by its rules (reference 2.6); the example's comments name partial-match's 2/3.
SIMPLE_EXPECTED = {"any-order-pass": 1.0, "in-order-pass": 1.0, "exact-auth-flow": 1.0, "metrics-check": 1.0,
                   "partial-match": 2 / 3, "exact-args-match": 1.0, "skip-args-validation": 1.0,
                   "superset-mode": 1.0, "subset-mode": 1.0, "mixed-args-match": 1.0,
                   "field-list-match": 1.0}  # only `source` compared: the call's `page` does not matter


def test_agentvs_own_tool_trajectory_example_runs_natively_and_scores_as_its_comments_say(server):
    tools = "".join(f"  - name: {name}\n    schema: {{type: object}}\n    default: {{result: ok}}\n"
                    for name in SIMPLE_TOOLS)
    text = "toolUse: {mode: native, maxSteps: 6}\ntools:\n" + tools + UPSTREAM_SIMPLE.read_text()
    result = parse_any(text, path="dataset.eval.yaml")
    assert result.ok and result.dialect == "agentv", [d.message for d in result.errors]
    assert {p.id for p in result.blueprint.prompts} == set(SIMPLE_EXPECTED)
    server.script(SIMPLE_SCRIPT)
    scored = run_suite(server, result.blueprint, "anthropic:claude-3-5-haiku")
    got = {test_id: scored[test_id][1].score for test_id in SIMPLE_EXPECTED}
    assert got == {k: pytest.approx(v, abs=0.005) for k, v in SIMPLE_EXPECTED.items()}
    assert all(scored[t][0].tool_mode == "native" and scored[t][0].error is None for t in SIMPLE_EXPECTED)


# AI Eval's `contains`, `regex` and `llm_judge` see the response text plus a Markdown rendering of the tool calls;
# every other check sees the text alone (reference 3.5). The rendering's exact layout is evalsite's
# (runs/engine/points/tool_trace.render_tool_calls; docs/importing.md).
TEXT_CHECKS = """suite: text-checks
prompt: weather-agent
cases:
  - id: tool-only
    input:
      user_task: "Which tool for Lisbon?"
    evaluators:
      - type: llm_judge
        criteria: Calls the weather tool for Lisbon
      - type: similarity
        reference: Use the weather tool.
    expected:
      contains: [get_weather]
      not_contains: [get_weather]
      regex: ['"location":\\s*"Lisbon"']
  - id: after-the-loop
    input:
      user_task: "Weather in Oslo?"
    tool_mocks:
      - name: get_weather
        response: {temp_c: 2}
    expected:
      exact_match: "It is 2 C in Oslo."
      contains: [get_weather, "2 C"]
      not_contains: [get_weather]
"""
TEXT_SCRIPT = [
    {"model": "judge", "match": "<CRITERION>",
     "reply": "<reflection>It calls get_weather.</reflection><classification>CLASS_EXACTLY_MET</classification>"},
    {"match": "Lisbon", "tool_calls": [{"name": "get_weather", "arguments": {"location": "Lisbon"}}]},
    {"match": "Oslo", "steps": [[{"name": "get_weather", "arguments": {"location": "Oslo"}}]],
     "reply": "It is 2 C in Oslo."},
]
CALL_SHOWN = '## Tool calls\n\n### 1. `get_weather`\n\n```json\n{"location": "Lisbon"}\n```'


def text_checks():
    result = parse_any(TEXT_CHECKS, path="tests/text-checks.yaml", files={"../prompts/weather.yaml": WEATHER_PROMPT})
    assert result.ok and result.dialect == "aieval", [d.message for d in result.errors]
    return result


def test_aieval_text_checks_are_marked_to_see_the_tool_calls_and_the_others_not():
    prompts = {p.id: p for p in text_checks().blueprint.prompts}
    sees = {(p.label or p.text).split(":")[0]: p.sees for p in prompts["tool-only"].all_points()}
    assert sees == {"llm_judge": "text+tool_calls", "similarity": "text", "contains": "text+tool_calls",
                    "not_contains": "text", "regex": "text+tool_calls"}
    sees = {p.label.split(":")[0]: p.sees for p in prompts["after-the-loop"].all_points()}
    assert sees == {"exact_match": "text", "contains": "text+tool_calls", "not_contains": "text"}
    # Nothing of it reaches the upstream's shape (exports, hashes) or a Weval blueprint.
    assert all("sees" not in p.to_upstream() for p in prompts["tool-only"].all_points())
    weval = parse_any("- prompt: Hi\n  should:\n    - Says hello\n    - $contains: hello\n", path="b.yml").blueprint
    assert {p.sees for p in weval.prompts[0].all_points()} == {"text"}


@pytest.mark.parametrize("model", NATIVE)
def test_aieval_contains_regex_and_llm_judge_see_the_tool_calls_as_ai_eval_says(server, model):
    server.script(TEXT_SCRIPT)
    scored = run_suite(server, text_checks().blueprint, model, judges=("openai:judge",))

    # A record-only answer that is only a call: `contains: [get_weather]` and the regex on its arguments pass on
    # the rendering, `not_contains: [get_weather]` passes too as it reads the (empty) text alone: AI Eval's trial
    # passes.
    response, assessment = scored["tool-only"]
    assert response.error is None and response.text == ""
    assert [(c["name"], c["outcome"]) for c in response.tool_calls] == [("get_weather", "recorded")]
    points = {pa.point.label.split(":")[0]: pa for pa in assessment.point_assessments}
    assert {k: pa.score for k, pa in points.items()} == {"llm_judge": 1.0, "similarity": 1.0, "contains": 1.0,
                                                          "not_contains": 1.0, "regex": 1.0}
    assert "tool calls" in points["contains"].reflection and "tool calls" not in points["not_contains"].reflection
    assert (assessment.score, assessment.verdict) == (1.0, "pass")
    # The llm_judge's judge reads the rendering as the text to judge; the similarity judge reads the text alone.
    asked = {m["content"].split("<CRITERION>\n")[1].split("\n")[0]: m["content"]
             for r in server.requests("judge") for m in r["messages"] if m["role"] == "user"}
    assert len(asked) == 2
    judge_prompt = next(v for k, v in asked.items() if k.startswith("Calls the weather tool"))
    assert f"<TEXT>\n{CALL_SHOWN}\n</TEXT>" in judge_prompt
    similarity_prompt = next(v for k, v in asked.items() if k.startswith("Says the same"))
    assert "<TEXT>\n\n</TEXT>" in similarity_prompt and "## Tool calls" not in similarity_prompt

    # After a tool loop the calls of every step follow the final text; `exact_match` and `not_contains` read the
    # text alone, so both pass, and `contains` finds the tool's name in the rendering.
    response, assessment = scored["after-the-loop"]
    assert response.error is None and response.text == "It is 2 C in Oslo."
    assert {pa.point.label.split(":")[0]: pa.score for pa in assessment.point_assessments} == {
        "exact_match": 1.0, "contains": 1.0, "not_contains": 1.0}
    assert (assessment.score, assessment.verdict) == (1.0, "pass")
