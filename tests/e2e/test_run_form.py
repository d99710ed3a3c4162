"""A person changes Trials and the models on the run form and sees the estimate change, with the key warnings."""

import re

import pytest
from playwright.sync_api import expect

from blueprints.models import Blueprint
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

BLUEPRINT = """\
title: Winter weather
models:
  - openai:gpt-4.1-mini
  - openai:gpt-4.1-nano
---
- id: oslo
  prompt: What is the weather like in Oslo in winter?
  should:
    - $icontains: cold
    - Mentions snow.
"""


def test_the_estimate_follows_trials_and_models(page, live_server, monkeypatch, settings, screenshot):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    Blueprint.objects.create(slug="winter", title="").save_revision(BLUEPRINT)

    page.goto(f"{live_server.url}/blueprints/winter/")
    generations = page.locator("#run-estimate .estimate-generations")
    judges = page.locator("#run-estimate .estimate-judge-calls")
    expect(generations).to_have_text("2")
    expect(judges).to_have_text("2")
    warnings = page.locator("#run-estimate .key-warning")
    expect(warnings).to_have_count(1)  # one line for openai, naming both models and the judge
    expect(warnings).to_contain_text("openai:gpt-4.1-nano")

    page.get_by_label("Trials").fill("5")
    expect(generations).to_have_text("10")
    expect(judges).to_have_text("10")

    page.get_by_role("button", name="only this").first.click()
    expect(page.get_by_role("checkbox", name="openai:gpt-4.1-nano")).not_to_be_checked()
    expect(generations).to_have_text("5")

    page.get_by_label("Add models").fill("openai:gpt-4.1")
    expect(generations).to_have_text("10")
    cost = page.locator("#run-estimate .estimate-cost")
    expect(cost).to_have_text(re.compile(r"about \$\d"))

    page.get_by_role("button", name="Untick all").click()
    expect(generations).to_have_text("5")  # only the added model is left
    screenshot(page, "run-form-estimate")


def test_untick_all_is_refused_and_nothing_starts(page, live_server, monkeypatch, settings):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    Blueprint.objects.create(slug="winter", title="").save_revision(BLUEPRINT)

    page.goto(f"{live_server.url}/blueprints/winter/")
    expect(page.locator("#run-estimate .estimate-generations")).to_have_text("2")
    page.get_by_role("button", name="Untick all").click()

    expect(page.locator("#estimate-refused")).to_contain_text("no models chosen")
    expect(page.locator("#run-estimate .estimate-calls")).to_have_count(0)
    page.get_by_role("button", name="Start run").click()

    expect(page.locator("#run-start-error")).to_contain_text("Not started: Models: no models chosen")
    assert Run.objects.count() == 0


def test_the_estimate_shows_two_figures_and_the_confirmation_names_unpriced_calls(page, live_server, monkeypatch,
                                                                                  settings):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    settings.EVALSITE_CONFIRM_CALLS = 3
    Blueprint.objects.create(slug="winter", title="").save_revision(BLUEPRINT)

    page.goto(f"{live_server.url}/blueprints/winter/")
    expect(page.locator("#run-estimate .estimate-cost")).to_have_text(re.compile(r"about \$0\.\d{4}"))
    expect(page.locator("#run-estimate .estimate-most")).to_have_text(re.compile(r"\$0\.\d{4}"))
    expect(page.locator("#run-estimate .estimate-basis")).to_contain_text("300 tokens an answer (an assumption")
    label = page.locator("label[for=id_confirm]")
    expect(label).to_have_text(re.compile(r"^I expect about \$0\.\d\d \(at most \$0\.\d\d\) for 4 calls$"))

    page.get_by_label("Add models").fill("openai:no-price-here")
    expect(label).to_have_text("I expect 6 calls, 1 of them to models with no price, whose cost is unknown")
    expect(page.locator("#run-estimate .estimate-unpriced")).to_have_text("1 call of unknown cost")


def test_a_judge_and_a_backup_judge_are_chosen_in_the_browser(page, live_server, monkeypatch, settings):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    Blueprint.objects.create(slug="winter", title="").save_revision(BLUEPRINT)

    page.goto(f"{live_server.url}/blueprints/winter/")
    judges = page.locator("#run-estimate .estimate-judge-calls")
    expect(judges).to_have_text("2")
    page.get_by_label("Add judges").fill("openai:gpt-4o-mini")
    expect(judges).to_have_text("4")
    page.get_by_label("Backup judge").fill("openai:gpt-4.1-nano")
    expect(page.locator("#run-estimate .estimate-judges")).to_contain_text("backup judge: openai:gpt-4.1-nano")
    page.get_by_label("Add judges").fill("CORE")
    expect(page.locator("#estimate-refused")).to_contain_text("'CORE' names a collection")
    page.get_by_label("Add judges").fill("openai:gpt-4o-mini")
    expect(judges).to_have_text("4")

    page.get_by_role("button", name="Start run").click()

    expect(page).to_have_url(re.compile(r"/runs/\d+/"))
    run = Run.objects.get()
    assert [j["model"] for j in run.judges["judges"]] == ["openai:gpt-4.1-mini", "openai:gpt-4o-mini"]
    assert run.judges["backup"]["model"] == "openai:gpt-4.1-nano"
