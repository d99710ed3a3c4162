"""Weval's tool-use-native-test.yml run natively and trace-only, from the command line and the API (issue 36).

The corpus blueprint (toolUse.mode auto, three tools) gets mocks for its tools; its models become the fake LLM
server speaking OpenAI, Anthropic and Gemini, and a custom model the fake answers in OpenAI's shape, to which
evalsite sends no tools (so auto falls back to trace-only and the fake writes the same calls as TOOL_CALL lines).
Every tool function then scores each prompt the same way in both modes, and the trajectory is what was stored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.models import Response, Run
from tests.fakes.pytest_fixtures import FAKE_KEY

pytestmark = pytest.mark.django_db(transaction=True)

CORPUS = Path("/work/shared/corpus/weval-configs/blueprints/tool-use-native-test.yml")
MOCKS = {
    "calculator": "    mocks:\n      - when: {expression: {matches: '312'}}\n        result: {value: 14511}\n",
    "search": "    mocks:\n      - when: {query: {matches: 'Article'}}\n        result: [{id: '42', title: Article 2}]\n",
    "retrieve": "    mocks:\n      - when: {docId: '42'}\n        result: {id: '42', title: Article 2}\n"
                "    default: {result: {id: '41', title: Article 1, snippet: First.}}\n",
}
RULES = [
    {"match": r"Compute \(312\*49\)", "steps": [[{"name": "calculator", "arguments": {"expression": "(312*49)-777"}}]],
     "reply": "14511"},
    {"match": "Find and quote Article 2", "steps": [[{"name": "search", "arguments": {"query": "Article 2"}}],
                                                    [{"name": "retrieve", "arguments": {"docId": "42"}}]],
     "reply": 'The title is "Article 2".'},
    {"match": "Retrieve docId '41'", "steps": [[{"name": "retrieve", "arguments": {
        "docId": "41", "options": {"snippet": True, "maxChars": 120}}}]], "reply": "Doc 41: First."},
    {"match": "Do not call any tool", "reply": "OK"},
]
NATIVE = ("openai:tool-a", "anthropic:tool-b", "google:tool-c")


def blueprint_text(fake) -> str:
    text = CORPUS.read_text(encoding="utf-8")
    head, models, rest = text.partition("models:\n")
    listed = "".join(f"  - {m}\n" for m in NATIVE) + (
        f"  - {{id: 'custom:traced', url: '{fake.base_url}/v1/chat/completions', modelName: traced, inherit: openai}}\n")
    rest = rest[rest.index("\n#"):]  # drop the corpus's own model list
    out = head + models + listed + rest
    for name, mocks in MOCKS.items():
        anchor = f"  - name: {name}\n"
        start = out.index(anchor)
        required = out.index("required:", start)
        end = out.index("\n", required) + 1
        out = out[:end] + mocks + out[end:]
    return out


@pytest.fixture
def fake_tools(fake_provider, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_provider.base_url)
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("GEMINI_BASE_URL", fake_provider.base_url + "/v1beta")
    fake_provider.script(RULES)
    return fake_provider


def _points(data: dict, prompt: str, variant: str) -> list:
    found = data["evaluationResults"]["llmCoverageScores"][prompt][variant]
    return [(p.get("keyPointText"), p.get("coverageExtent")) for p in found["pointAssessments"]]


def test_the_corpus_native_blueprint_scores_alike_natively_and_trace_only_from_the_cli(fake_tools, tmp_path, capsys):
    path = tmp_path / "tool-use-native-test.yml"
    path.write_text(blueprint_text(fake_tools))
    out = tmp_path / "out.json"
    call_command("run_blueprint", str(path), "--json", str(out))
    data = json.loads(out.read_text())

    variants = [f"{m}[temp:0]" for m in NATIVE] + ["custom:traced[temp:0]"]
    for prompt in ("native-calc", "native-retrieve", "native-retrieve-with-options", "no-tools"):
        traced = _points(data, prompt, variants[-1])
        assert traced, prompt
        for variant in variants[:-1]:
            assert _points(data, prompt, variant) == traced, (prompt, variant)
    # The tool paths pass on every model: the trajectories are equivalent.
    tool_points = [p for p in _points(data, "native-retrieve", variants[0]) if "tool" in (p[0] or "")]
    assert tool_points and all(score == 1 for _, score in tool_points)

    # Natively: the calls were sent and answered in each provider's shape; the custom model was sent no tools.
    for model in ("tool-a", "tool-b", "tool-c", "traced"):
        requests = fake_tools.requests(model)
        assert requests, model
        assert any("tools" in r["body"] for r in requests) is (model != "traced")
    rows = {r.variant_id: r for r in Response.objects.filter(prompt_id="native-retrieve")}
    native = rows[variants[1]]
    assert [(c["name"], c["outcome"], c["step"]) for c in native.tool_calls] == [
        ("search", "result", 1), ("retrieve", "result", 2)]
    assert [t["role"] for t in native.conversation] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                        "assistant"]
    assert native.conversation[-1]["tools"] == "native"
    assert native.input_tokens == sum(sum(len((m["content"] or "").split()) for m in r["messages"])
                                      for r in fake_tools.requests("tool-b")
                                      if "Find and quote" in json.dumps(r["messages"]))
    traced = rows[variants[-1]]
    assert traced.conversation[-1]["tools"].startswith("trace-only (toolUse.mode auto: custom model")
    assert [c["name"] for c in traced.tool_calls] == ["search", "retrieve"]


def test_a_call_no_mock_answers_fails_the_response_with_its_reason_through_the_api(fake_tools, client):
    text = blueprint_text(fake_tools).replace("      - when: {docId: '42'}", "      - when: {docId: '43'}")
    text = text.replace("    default: {result: {id: '41', title: Article 1, snippet: First.}}\n", "")
    made = client.post("/api/runs", json.dumps({"blueprint": text, "models": ["anthropic:tool-b"]}),
                       content_type="application/json")
    assert made.status_code in (200, 201, 202), made.content
    run = Run.objects.get()
    row = Response.objects.get(run=run, prompt_id="native-retrieve")
    assert row.status == "failed"
    assert "no mock of retrieve matches the arguments" in row.error
    assert [c["outcome"] for c in row.tool_calls] == ["result", "no-mock"]
    results = client.get(f"/api/runs/{run.pk}/results").json()
    assert "no mock of retrieve matches" in results["errors"]["native-retrieve"]["anthropic:tool-b[temp:0]"]
    trial = results["evalsite"]["responses"]["native-retrieve"]["anthropic:tool-b[temp:0]"]["trials"][0]
    assert [c["outcome"] for c in trial["toolCalls"]] == ["result", "no-mock"]
    # Never a pass: the cell is an error, not scored, and still one of the run's cells.
    assert trial["status"] == "failed"
    cell = results["evalsite"]["responses"]["native-retrieve"]["anthropic:tool-b[temp:0]"]
    assert cell["state"] == "failed" and cell["passed"] is not True


def test_a_tool_run_replays_call_for_call_to_the_same_exports_natively_and_traced(fake_tools):
    from blueprints.importing import import_files
    from runs import start as run_start
    from runs.replay import missing_answers, replay_run
    from tests.runs.test_replay import normalised_json

    blueprint = import_files([("tools.yml", blueprint_text(fake_tools), {})], via="test").items[0].blueprint
    original = run_start.start_run(blueprint)
    original.refresh_from_db()
    assert original.status == "done", (original.status, original.error)
    sent = len(fake_tools.requests())
    assert missing_answers(original) == []
    replay = replay_run(original)
    assert replay.status == "done" and len(fake_tools.requests()) == sent  # nothing sent
    assert normalised_json(replay) == normalised_json(original)
    rows = {r.variant_id: r for r in Response.objects.filter(run=replay, prompt_id="native-retrieve")}
    assert [c["outcome"] for c in rows["openai:tool-a[temp:0]"].tool_calls] == ["result", "result"]
    assert rows["custom:traced[temp:0]"].conversation[-1]["tools"].startswith("trace-only")


def test_a_rejudged_native_response_reads_its_trajectory_not_tool_call_lines_in_its_text(fake_tools):
    """A native response that called nothing has no calls, even when its text quotes a TOOL_CALL line; judging it
    again (retry failed, its generation kept) reads the same: the stored conversation keeps the mode."""
    from blueprints.importing import import_files
    from runs import start as run_start
    from runs import work as run_work
    from tests.runs.conftest import judge_rules

    fake_tools.script([
        {"model": "tool-a", "match": ".", "reply": 'Hello! A trace would read:\nTOOL_CALL {"name": "search", "arguments": {}}'},
        {"model": "judge-a", "match": "(?s)<CRITERION>\nIs polite", "reply": "unreadable!!"},
        *judge_rules()])
    text = ("title: Rejudge\nmodels: [openai:tool-a]\ntoolUse: {mode: native}\ntools:\n  - name: search\n"
            "    default: {result: []}\n---\n- id: q\n  prompt: Hello?\n  should:\n"
            "    - $tool_call_count_between: [0, 0]\n    - Greets the user\n    - Is polite\n")
    blueprint = import_files([("rejudge.yml", text, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, judges=["openai:judge-a"])
    row = Response.objects.get(run=run)
    assert row.tool_calls == [] and row.conversation[-1]["tools"] == "native"
    assert row.score is not None and row.judge_errors == 1
    fake_tools.script([*judge_rules()], replace=True)
    sent = len(fake_tools.requests("tool-a"))
    assert run_work.retry_failed(run) == 1
    row.refresh_from_db()
    assert len(fake_tools.requests("tool-a")) == sent  # the generation was kept
    assert row.judge_errors == 0 and row.score == 1.0  # no calls natively: [0, 0] holds, as it did at first
