"""Pytest fixtures for the fake LLM server; import them into a conftest.py::

    from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server  # noqa: F401

``fake_llm_server`` is one server per test session (started on a free port
in a background thread); ``fake_llm`` is the same server, reset before each
test (request log, per-model counters and scripted rules cleared).
"""

from __future__ import annotations

import pytest

from tests.fakes.llm_server import FakeLLMServer


@pytest.fixture(scope="session")
def fake_llm_server():
    # hang_s bounds how long a "hang" model holds a request if a client never gives up.
    server = FakeLLMServer(latency_ms=0, hang_s=30)
    server.start_in_thread()
    yield server
    server.stop_in_thread()


@pytest.fixture
def fake_llm(fake_llm_server):
    fake_llm_server.reset()
    fake_llm_server.set_latency(0)
    yield fake_llm_server
    fake_llm_server.reset()


FAKE_KEY = "sk-test-not-a-real-key-123456"


@pytest.fixture
def fake_provider(fake_llm, monkeypatch, settings, tmp_path):
    """The fake LLM server as the `openai` provider, with a fake key.

    Each test also gets its own data directory, so answers cached by one test's run
    (the response cache outlives a run) never serve another's.
    """
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    for name in ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.EVALSITE_DATA_DIR = tmp_path
    return fake_llm
