"""A reader opens a finished run: findings at the top, the scanners' table, the similarity tree made by its button
and the checked summary with its refused claims; a finding's cell link opens the response. No console error."""

import json
import re

import pytest
from django.test import override_settings
from playwright.sync_api import expect

from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.web.run_support import GOOD, candidate_rules, fake_llm, fake_llm_server, fake_provider, make_run  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_a_reader_walks_findings_scanners_similarity_and_summary(page, live_server, fake_provider, screenshot):
    run = made_off_the_loop(make_run, fake_provider, models=("openai:cand-good", "openai:cand-bad", "openai:cand-twin"),
                            extra_rules=candidate_rules("cand-twin", GOOD))
    fake_provider.script([{"model": "writer", "match": "", "reply": json.dumps({"claims": [
        {"text": "Read F1 first.", "findings": ["F1"]},
        {"text": "M1 averages 0.99.", "values": [{"metric": "mean", "model": "M1", "value": 0.99}]}]})}], replace=False)
    problems = watch_console(page)
    with override_settings(EVALSITE_EMBEDDINGS_MODEL="openai:embed", EVALSITE_SUMMARY_MODEL="openai:writer"):
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        findings = page.locator("section#insight")
        expect(findings.locator("#finding-F1")).to_be_visible()
        expect(findings).to_contain_text("should-not point forbids")
        expect(findings.get_by_role("table")).to_contain_text("Refusals")
        page.get_by_role("button", name="Compare the answers with openai:embed").click()
        expect(page.locator("section#insight svg.dendrogram")).to_be_visible()
        expect(page.locator("section#insight")).to_contain_text("Cophenetic correlation")
        page.get_by_role("button", name="Write the summary with openai:writer").click()
        summary = page.locator("section#insight .summary-text")
        expect(summary).to_contain_text("Read F1 first.")
        expect(summary).not_to_contain_text("0.99")
        page.locator("section#insight details", has_text="refused").locator("summary").click()
        expect(page.locator("section#insight")).to_contain_text("wrong number")
        screenshot(page, "insight")
        page.locator("#finding-F1 a").first.click()
        expect(page).to_have_url(re.compile(rf"/runs/{run.pk}/responses/\d+/$"))
    assert problems == []
