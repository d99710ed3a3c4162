from tests.fakes.pytest_fixtures import FAKE_KEY, fake_llm, fake_llm_server, fake_provider  # noqa: F401


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

