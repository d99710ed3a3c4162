"""The fake LLM server itself: scripted replies (for playing judges), control endpoints, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.llm_server import FakeLLMServer


@pytest.fixture(scope="module")
def server():
    fake = FakeLLMServer()
    fake.start_in_thread()
    yield fake
    fake.stop_in_thread()


@pytest.fixture(autouse=True)
def clean(server):
    server.reset()


def chat(server, model: str, text: str, path: str = "/v1/chat/completions") -> httpx.Response:
    return httpx.post(server.base_url + path, json={"model": model, "messages": [{"role": "user", "content": text}]})


def test_rules_reply_by_a_regex_on_the_last_user_message_first_match_wins(server):
    reply = httpx.post(server.base_url + "/_control/script", json={"rules": [
        {"match": r"(?i)criterion:\s*mentions paris", "reply": "<classification>MAJOR</classification>"},
        {"match": r"criterion", "model": r"^judge-b$", "reply": "<classification>ABSENT</classification>"},
        {"match": r"criterion", "reply": "<classification>PARTIAL</classification>", "times": 1},
        {"match": r"boom", "status": 503},
    ]})
    assert reply.json() == {"ok": True, "rules": 4}
    answers = [chat(server, m, t) for m, t in [
        ("judge-a", "Criterion: Mentions Paris"), ("judge-b", "criterion: x"), ("judge-a", "criterion: x"),
        ("judge-a", "criterion: x"), ("judge-a", "boom"),
    ]]
    texts = [a.json()["choices"][0]["message"]["content"] if a.status_code == 200 else a.status_code for a in answers]
    assert texts == ["<classification>MAJOR</classification>", "<classification>ABSENT</classification>",
                     "<classification>PARTIAL</classification>", "Echo: criterion: x", 503]


def test_the_request_log_and_reset_work_over_http(server):
    chat(server, "logged", "one")
    httpx.post(server.base_url + "/v1/completions", json={"model": "logged", "prompt": "two words"})
    log = httpx.get(server.base_url + "/_control/requests").json()["requests"]
    assert [(r["protocol"], r["model"], r["n"], r["status"]) for r in log] == [
        ("openai_chat", "logged", 1, 200), ("openai_completions", "logged", 2, 200)]
    assert log[0]["messages"] == [{"role": "user", "content": "one"}]
    httpx.post(server.base_url + "/_control/reset")
    assert server.requests() == []


def test_the_tally_counts_each_conversation_and_names_the_repeated_ones_without_a_request_log():
    fake = FakeLLMServer(log_requests=False)
    fake.start_in_thread()
    try:
        for model, text in [("a", "one"), ("a", "two"), ("b", "one"), ("a", "one"), ("a", "one")]:
            assert chat(fake, model, text).status_code == 200
        tally = httpx.get(fake.base_url + "/_control/tally").json()
        assert fake.requests() == []
        assert tally == {"requests": 5, "distinct": 3, "repeated": [{"model": "a", "lastUser": "one", "times": 3}]}
        fake.reset()
        assert fake.tally() == {"requests": 0, "distinct": 0, "repeated": []}
    finally:
        fake.stop_in_thread()


def test_latency_can_be_set_per_server_and_per_model(server):
    httpx.post(server.base_url + "/_control/config", json={"latency_ms": 150})
    started = time.perf_counter()
    chat(server, "slow", "x")
    assert time.perf_counter() - started >= 0.15
    server.set_latency(0)
    started = time.perf_counter()
    chat(server, "m-latency-120ms", "x")
    assert 0.12 <= time.perf_counter() - started < 1.0


def test_a_401_echoes_the_key_it_was_sent(server):
    response = httpx.post(server.base_url + "/v1/messages", headers={"x-api-key": "sk-visible"},
                          json={"model": "always-401", "max_tokens": 5, "messages": []})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
    assert "sk-visible" in response.json()["error"]["message"]


def test_the_script_runs_from_the_command_line_with_a_rules_file(tmp_path):
    rules = tmp_path / "judge.json"
    rules.write_text(json.dumps({"rules": [{"match": "grade", "reply": "A+"}]}))
    script = Path(__file__).with_name("llm_server.py")
    process = subprocess.Popen([sys.executable, str(script), "--port", "0", "--script", str(rules)],
                               stdout=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip().removeprefix("listening on ")
        answer = httpx.post(url + "/v1beta/models/g:generateContent",
                            json={"contents": [{"role": "user", "parts": [{"text": "please grade this"}]}]})
        assert answer.json()["candidates"][0]["content"]["parts"][0]["text"] == "A+"
    finally:
        process.terminate()
        process.wait(10)
