"""Across runs in Chromium: from the runs list to the overview, to a model's page, to one of its weakest prompts
and the response there; and the run page loads its comparison with the pinned baseline in place."""

import re

import pytest
from playwright.sync_api import expect

from runs.across import figures as across
from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.runs.test_across import B, imported, make_run, text, variant
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def two_runs(fake):
    blueprint = imported(text())
    first = make_run(fake, blueprint, b_good=8)
    second = make_run(fake, blueprint, b_good=3)
    across.pin_baseline(blueprint, first)
    return first, second


def test_a_reader_goes_from_the_overview_to_a_models_weakest_prompt_and_its_response(page, live_server,
                                                                                      fake_provider, screenshot):
    first, second = made_off_the_loop(two_runs, fake_provider)
    problems = watch_console(page)

    page.goto(live_server.url + "/runs/")
    page.locator("#main").get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    since = page.locator("#since")
    expect(since).to_contain_text(f"Run {second.pk}")
    expect(since).to_contain_text("worse than the baseline")
    screenshot(page, "across-overview")

    page.locator("main").get_by_role("link", name=B, exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(B)
    runs = page.locator("table", has=page.get_by_role("columnheader", name="Rank"))
    expect(runs.locator("tbody tr")).to_have_count(2)
    expect(runs).to_contain_text("2 of 2")
    weakest = page.locator("#weakest")
    expect(weakest.locator("tbody tr")).to_have_count(5)
    screenshot(page, "across-model")

    link = weakest.locator("tbody tr").first.get_by_role("link").first
    prompt_id = link.inner_text()
    link.click()
    expect(page).to_have_url(re.compile(rf"/runs/{second.pk}/responses/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text(prompt_id)
    expect(page.locator("main")).to_contain_text(variant(B))

    page.goto(f"{live_server.url}/runs/{second.pk}/")
    section = page.locator("#run-baseline")
    expect(section.get_by_role("heading", name="Compared with the baseline")).to_be_visible()
    expect(section.locator("tbody tr", has_text=variant(B))).to_contain_text("worse")
    section.get_by_role("link", name="every run of this blueprint").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("History of")
    expect(page.locator(f"#run-{second.pk}")).to_contain_text("worse")
    screenshot(page, "across-history")
    assert problems == []
