"""The content policy holds in a real browser: no page reports a violation, and the editor, htmx and the
run pages still work under it."""

import re

import pytest
from playwright.sync_api import expect

from blueprints.importing import import_files

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = """title: Capitals
description: "See ![pixel](https://tracker.example.com/p.gif)"
models: [openai:gpt-4.1-mini]
---
- id: fr
  prompt: Capital of France?
  should:
    - $contains: Paris
"""


def watch(page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text
            or "Refused to" in m.text else None)
    page.on("request", lambda r: problems.append(f"outside request: {r.url}") if "tracker.example.com" in r.url
            else None)
    return problems


def test_pages_work_under_the_policy_with_no_violation(page, live_server):
    import_files([("capitals.yml", TEXT, {})], via="test")
    problems = watch(page)
    page.goto(f"{live_server.url}/blueprints/capitals/")
    expect(page.get_by_role("heading", name="Capitals")).to_be_visible()
    page.goto(f"{live_server.url}/blueprints/capitals/edit/")
    editor = page.locator(".ace_editor")
    expect(editor).to_be_visible()
    page.locator(".ace_content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\n    - $nonsense_function: 1")
    # Live validation (htmx, from our own origin) still answers under the policy.
    expect(page.get_by_text(re.compile("Unknown point function"))).to_be_visible()
    page.goto(f"{live_server.url}/runs/")
    page.goto(f"{live_server.url}/collections/")
    assert problems == []
