"""A person changes Trials and the models on the run form and sees the estimate change, with the key warnings."""

import re

import pytest
from playwright.sync_api import expect

from blueprints.models import Blueprint

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
