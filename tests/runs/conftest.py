import pytest

from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server  # noqa: F401

FAKE_KEY = "sk-test-not-a-real-key-123456"


@pytest.fixture
def fake_provider(fake_llm, monkeypatch):  # noqa: F811
    """The fake LLM server as the `openai` provider, with a fake key."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    for name in ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return fake_llm


def judge_rules(*, unmet_text: str | None = None) -> list[dict]:
    """Judges that say 'met' to `should` criteria and 'unmet' to the `should not` ones below.

    With ``unmet_text``, every criterion about a response starting with that text is unmet.
    """
    rules = []
    if unmet_text:
        rules.append({"model": "judge", "match": rf"(?s)<TEXT>\n{unmet_text}",
                      "reply": "<reflection>It does not.</reflection><classification>CLASS_UNMET</classification>"})
    rules.append({"model": "judge", "match": r"(?s)<CRITERION>\n(Selects|Exhibits)",
                  "reply": "<reflection>It does not do that.</reflection><classification>CLASS_UNMET</classification>"})
    rules.append({"model": "judge", "match": r"(?s)<CRITERION>",
                  "reply": "<reflection>Yes, fully.</reflection><classification>CLASS_EXACTLY_MET</classification>"})
    return rules


@pytest.fixture(autouse=True)
def own_response_cache(settings, tmp_path):
    """Each test its own data directory, so one test's cached answers never serve another."""
    settings.EVALSITE_DATA_DIR = tmp_path
