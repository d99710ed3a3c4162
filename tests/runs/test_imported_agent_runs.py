"""Imported agent suites through the doors (issue 36, part 2): an AI Eval project with `tool_mocks` run by
`run_blueprint` (its prompt file read from disk beside it), an AgentV suite with evalsite's `tools` run through the
API; both on the native tool loop against the fake LLM server, scored as tests/engine/test_imported_agents.py
checks against the upstreams, the trajectory stored and shown."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from runs.models import Response, Run
from tests.engine.test_imported_agents import (AGENTV, AGENTV_EXPECTED, AGENTV_SCRIPT, AIEVAL, AIEVAL_SCRIPT,
                                               CALL_SHOWN, TEXT_CHECKS, TEXT_SCRIPT, WEATHER_PROMPT)

pytestmark = pytest.mark.django_db(transaction=True)


def _project(tmp_path, suite_text=AIEVAL):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "config.yaml").write_text("evaluation: {trials: 1, threshold: 0.8}\n")
    (tmp_path / "prompts" / "weather.yaml").write_text(WEATHER_PROMPT)
    suite = tmp_path / "tests" / "weather-loop.yaml"
    suite.write_text(suite_text)
    return suite


def test_an_ai_eval_suite_with_tool_mocks_runs_natively_from_the_cli(fake_provider, tmp_path, capsys):
    fake_provider.script(AIEVAL_SCRIPT)
    suite = _project(tmp_path)
    out = tmp_path / "out.json"
    call_command("run_blueprint", str(suite), "--models", "openai:cand", "--json", str(out))
    run = Run.objects.get()
    assert run.status == "done", run.error
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    weather = rows["weather"]
    assert (weather.score, weather.verdict) == (1.0, "pass")
    assert [(c["name"], c["outcome"], c["result"]) for c in weather.tool_calls] == [
        ("get_weather", "result", {"temp_c": 18, "sky": "fog"})]
    assert [t["role"] for t in weather.conversation] == ["system", "user", "assistant", "tool", "assistant"]
    unmatched = rows["unmatched"]
    assert unmatched.status == "failed" and unmatched.score is None and "no mocks and no default" in unmatched.error
    assert rows["selection"].score == 1.0
    assert rows["efficiency"].status == "failed" and "toolUse.maxSteps allows 2" in rows["efficiency"].error
    assert (rows["recorded"].score, [c["outcome"] for c in rows["recorded"].tool_calls]) == (1.0, ["recorded"])
    from django.test import Client

    page = Client().get(f"/runs/{run.pk}/responses/{rows['recorded'].pk}/").content.decode()
    assert "recorded, not answered (the suite gives this case no tool mocks)" in page and "tool-failed" not in page
    # Every step of the loops was sent and billed: 2 + 1 + 3 + 2 + 1 requests.
    assert len(fake_provider.requests("cand")) == 9
    run.refresh_from_db()
    assert run.candidate_calls_sent == 9
    data = json.loads(out.read_text())
    assert "unmatched" in json.dumps(data)


def test_the_cli_dry_run_counts_each_case_loop(fake_provider, tmp_path, capsys):
    suite = _project(tmp_path)
    call_command("run_blueprint", str(suite), "--models", "openai:cand", "--dry-run")
    printed = capsys.readouterr().out
    # Each case's own max_steps: weather 4, unmatched 5 (AI Eval's default), selection 5, efficiency 2; the case
    # without mocks is one completion: 17 model calls at most.
    assert "17 generations" in printed, printed
    assert fake_provider.requests() == []


def test_an_agentv_suite_with_tools_runs_natively_through_the_api(fake_provider, client):
    fake_provider.script(AGENTV_SCRIPT)
    made = client.post("/api/runs", json.dumps({"blueprint": AGENTV, "models": ["openai:cand"]}),
                       content_type="application/json")
    assert made.status_code == 201, made.content
    run = Run.objects.get()
    assert run.status == "done", run.error
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    assert {k: pytest.approx(r.score, abs=0.005) for k, r in rows.items()} == AGENTV_EXPECTED
    assert all(r.tool_calls and r.tool_calls[0]["outcome"] == "result" for r in rows.values())
    wrong = rows["screening-wrong-args"]
    assert (wrong.verdict, wrong.gates_failed) == ("fail", ["tool_trajectory"])
    results = client.get(f"/api/runs/{run.pk}/results").json()
    assert "screening-listed" in json.dumps(results)
    # The response page shows the trajectory: each step, its arguments and the mocked result.
    page = client.get(f"/runs/{run.pk}/responses/{rows['screening-listed'].pk}/").content.decode()
    assert page.count("search_entity_list") >= 1 and "Huawei Technologies Co., Ltd." in page


def test_ai_eval_text_checks_see_the_tool_calls_from_the_cli_and_the_page_says_so(fake_provider, tmp_path):
    fake_provider.script(TEXT_SCRIPT)
    suite = _project(tmp_path, TEXT_CHECKS)
    call_command("run_blueprint", str(suite), "--models", "openai:cand", "--judges", "openai:judge")
    run = Run.objects.get()
    assert run.status == "done", run.error
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    assert {k: (r.score, r.verdict) for k, r in rows.items()} == {"tool-only": (1.0, "pass"),
                                                                 "after-the-loop": (1.0, "pass")}
    judged = [m["content"] for r in fake_provider.requests("judge") for m in r["messages"] if m["role"] == "user"]
    assert sum(f"<TEXT>\n{CALL_SHOWN}\n</TEXT>" in m for m in judged) == 1  # the llm_judge's, not the similarity's
    from django.test import Client

    page = Client().get(f"/runs/{run.pk}/responses/{rows['tool-only'].pk}/").content.decode()
    assert page.count("Checked against the response text and its tool calls") == 2  # contains and regex
