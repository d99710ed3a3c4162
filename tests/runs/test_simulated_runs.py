"""Simulated users through the doors (issue 36): run_blueprint, the API, the response page; the fake LLM server
plays both the candidate and the user model (rules by model name; the user model's last "user" message is the
candidate's answer, roles being swapped)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from runs.models import Response, Run

pytestmark = pytest.mark.django_db(transaction=True)

BLUEPRINT = """title: Simulated users
models: [openai:cand]
---
- id: stops-on-point
  simulated_user:
    model: openai:sim-user
    persona: a customer whose order arrived broken
    goal: get a refund for order 1234
    first_message: my order broke
    stop: {point: {$contains: refund issued}}
    max_turns: 5
  should: [$contains: refund]
- id: runs-to-max
  simulated_user:
    model: openai:sim-user
    goal: chat
    first_message: hello there
    stop: {phrase: DONE}
    max_turns: 3
  should: [$contains: hello]
- id: simulator-fails
  simulated_user:
    model: openai:sim-user-empty
    goal: chat
    first_message: are you there
    stop: {phrase: DONE}
    max_turns: 3
  should: [$contains: there]
"""
RULES = [
    {"model": "^cand$", "match": "order 1234", "reply": "Done: refund issued for 1234."},
    {"model": "^sim-user$", "match": "Echo: my order broke", "reply": "It is order 1234, please fix it"},
]


@pytest.fixture
def scripted(fake_provider):
    fake_provider.script(RULES)
    return fake_provider


def _check_run(run: Run, fake):
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    stop = rows["stops-on-point"]
    assert stop.status == "done" and stop.error == ""
    assert [t["content"] for t in stop.conversation if t["role"] == "assistant"] == [
        "Echo: my order broke", "Done: refund issued for 1234."]
    assert [t.get("simulated", False) for t in stop.conversation if t["role"] == "user"] == [False, True]
    assert "met by assistant turn 2" in stop.conversation[-1]["note"]
    assert stop.score == 1.0

    full = rows["runs-to-max"]
    assert full.status == "done"
    assert sum(t["role"] == "assistant" for t in full.conversation) == 3
    assert "max_turns" in full.conversation[-1]["note"]

    failed = rows["simulator-fails"]
    assert failed.status == "failed" and failed.score is None
    assert "simulated user (openai:sim-user-empty) failed: openai returned an empty answer" in failed.error
    # The user model's requests, apart by model name: 1 + 2 + 1.
    assert len(fake.requests("sim-user")) == 3 and len(fake.requests("sim-user-empty")) == 1
    assert len(fake.requests("cand")) == 2 + 3 + 1
    # The bill counts every request the generations sent, the simulated user's included.
    run.refresh_from_db()
    assert run.candidate_calls_sent == 10
    words = sum(r.input_tokens or 0 for r in rows.values())
    assert run.candidate_input_tokens == words > 0
    return rows


def test_simulated_conversations_from_the_cli(scripted, tmp_path, capsys):
    path = tmp_path / "sim.yml"
    path.write_text(BLUEPRINT)
    out = tmp_path / "out.json"
    call_command("run_blueprint", str(path), "--json", str(out))
    _check_run(Run.objects.get(), scripted)
    data = json.loads(out.read_text())
    assert "simulator-fails" in json.dumps(data.get("evaluationResults", {}).get("errors", data.get("errors", {}))) \
        or "simulator-fails" in json.dumps(data)


def test_the_dry_run_counts_the_simulated_user_apart(scripted, tmp_path, capsys):
    path = tmp_path / "sim.yml"
    path.write_text(BLUEPRINT)
    call_command("run_blueprint", str(path), "--dry-run")
    printed = capsys.readouterr().out
    # max_turns everywhere: 5 + 3 + 3 candidate calls; 4 + 2 + 2 user-model calls.
    assert "11 generations" in printed and "8 simulated-user calls (up to max_turns)" in printed
    assert scripted.requests() == []


def test_simulated_conversations_through_the_api_and_the_response_page(scripted, client):
    made = client.post("/api/runs", json.dumps({"blueprint": BLUEPRINT, "models": ["openai:cand"]}),
                       content_type="application/json")
    assert made.status_code in (200, 201, 202), made.content
    run = Run.objects.get()
    rows = _check_run(run, scripted)
    results = client.get(f"/api/runs/{run.pk}/results").json()
    assert "empty answer" in results["errors"]["simulator-fails"]["openai:cand[temp:0]"]
    cell = results["evalsite"]["responses"]["simulator-fails"]["openai:cand[temp:0]"]
    assert cell["state"] == "failed" and cell["passed"] is not True

    page = client.get(f"/runs/{run.pk}/responses/{rows['stops-on-point'].pk}/").content.decode()
    assert page.count("badge-simulated") == 1 and "stopped: the stop point was met by assistant turn 2" in page
    page = client.get(f"/runs/{run.pk}/responses/{rows['simulator-fails'].pk}/").content.decode()
    assert "the simulated user's turn" in page and "returned an empty answer" in page


def test_a_simulated_run_replays_call_for_call(scripted):
    from blueprints.importing import import_files
    from runs import start as run_start
    from runs.replay import missing_answers, replay_run
    from tests.runs.test_replay import normalised_json

    # Without the failing simulator: a failed call keeps no answer to serve back (as for any candidate's).
    text = BLUEPRINT[:BLUEPRINT.index("- id: simulator-fails")]
    blueprint = import_files([("sim.yml", text, {})], via="test").items[0].blueprint
    original = run_start.start_run(blueprint)
    original.refresh_from_db()
    assert original.status == "done", (original.status, original.error)
    sent = len(scripted.requests())
    assert missing_answers(original) == []
    replay = replay_run(original)
    assert replay.status == "done" and len(scripted.requests()) == sent  # nothing sent
    assert normalised_json(replay) == normalised_json(original)
    kept = Response.objects.get(run=replay, prompt_id="stops-on-point").conversation
    assert kept == Response.objects.get(run=original, prompt_id="stops-on-point").conversation


def test_the_response_calls_show_the_simulated_user_apart(scripted, client):
    made = client.post("/api/runs", json.dumps({"blueprint": BLUEPRINT, "models": ["openai:cand"]}),
                       content_type="application/json")
    assert made.status_code in (200, 201, 202), made.content
    run = Run.objects.get()
    row = Response.objects.get(run=run, prompt_id="runs-to-max")
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "the simulated users' calls included: <code>openai:sim-user</code>, <code>openai:sim-user-empty</code>" \
        in run_page
    # The run's bill gives the simulated users a line of their own: what their calls spent, summed from every
    # response's call log (3 to sim-user, 1 to sim-user-empty), also part of the candidates' figures.
    from runs.engine import calls as call_log
    logs = [e for r in Response.objects.filter(run=run) for e in r.call_log() if e.get("purpose") == "user"]
    spent = call_log.spent(logs)
    assert spent["sent"] == 4 and spent["inputTokens"] > 0
    line = run_page.split('class="bill-simulated-users">', 1)[1].split("</dd>", 1)[0]
    assert line.startswith(f"4 calls sent · {spent['inputTokens']:,} tokens in, {spent['outputTokens']:,} out · ")
    assert "part of the candidates' figures above" in line
    page = client.get(f"/runs/{run.pk}/responses/{row.pk}/calls").content.decode()
    assert 'calls-spent-candidate">Candidate: 3 calls' in page
    assert 'calls-spent-user">Simulated user: 2 calls' in page
    # The stored generation figures are the two parts together (the run's bill adds them up).
    log = row.call_log()
    assert row.input_tokens == sum(e.get("input_tokens") or 0 for e in log if e.get("purpose") in ("candidate", "user"))
    assert call_log.spent([e for e in log if e.get("purpose") == "user"])["calls"] == 2


def test_a_missing_key_for_the_user_model_is_said_before_the_run(scripted, tmp_path, capsys):
    path = tmp_path / "sim.yml"
    path.write_text(BLUEPRINT.replace("model: openai:sim-user-empty", "model: anthropic:sim-user"))
    call_command("run_blueprint", str(path), "--dry-run")
    printed = capsys.readouterr()
    assert "no API key for anthropic" in printed.out + printed.err and "anthropic:sim-user" in printed.out + printed.err


def test_a_run_without_simulated_users_has_no_such_line(scripted, client):
    text = "title: plain\nmodels: [openai:cand]\n---\n- id: p\n  prompt: my order broke\n  should: [$contains: Echo]\n"
    made = client.post("/api/runs", json.dumps({"blueprint": text, "models": ["openai:cand"]}),
                       content_type="application/json")
    assert made.status_code in (200, 201, 202), made.content
    run_page = client.get(f"/runs/{Run.objects.get().pk}/").content.decode()
    assert "bill-simulated-users" not in run_page and "Simulated users</dt>" not in run_page
