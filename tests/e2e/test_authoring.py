"""A person imports a blueprint, breaks it in the editor, fixes it, saves, reads the diff, and starts a run."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

BLUEPRINT = """\
title: Winter weather
models:
  - openai:gpt-4.1-mini
---
- id: oslo
  prompt: What is the weather like in Oslo in winter?
  should:
    - $icontains: cold
    - Mentions snow.
"""
BREAKAGE = " Answer: briefly"  # an unquoted ": " inside a value is a YAML error


def open_editor_on_line(page, line):
    editor = page.locator(".ace_editor")
    expect(editor).to_be_visible()
    page.locator(".ace_content").click()
    page.keyboard.press("Control+Home")
    for _ in range(line - 1):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("End")


def import_blueprint(page, live_server, tmp_path):
    path = tmp_path / "winter.yml"
    path.write_text(BLUEPRINT)
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("Files").set_input_files(str(path))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_text("1 file: 1 new")).to_be_visible()
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_role("heading", name="Edit blueprint winter")).to_be_visible()


def test_import_break_fix_save_diff_and_run(page, live_server, tmp_path, screenshot, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    import_blueprint(page, live_server, tmp_path)
    panel = page.locator("#validation-panel")
    expect(panel).to_contain_text("No problems")

    # Type an error on line 6: the panel names the line and the gutter marks it.
    open_editor_on_line(page, 6)
    page.keyboard.type(BREAKAGE)
    expect(panel).to_contain_text("1 error")
    expect(panel.locator(".diag-error")).to_contain_text("Line 6")
    expect(page.locator(".ace_gutter-cell.ace_error")).to_have_text("6")
    expect(page.locator("#preview-status")).to_contain_text("last text without errors")
    screenshot(page, "editor-with-error")

    # Clicking the problem moves the cursor to its line.
    page.keyboard.press("Control+Home")
    expect(page.locator(".ace_gutter-active-line")).to_have_text("1")
    panel.locator(".diag-error a").click()
    expect(page.locator(".ace_gutter-active-line")).to_have_text("6")

    # Fix it (and say more), then save with the keyboard.
    page.keyboard.press("End")
    for _ in BREAKAGE:
        page.keyboard.press("Backspace")
    page.keyboard.type(" Be brief.")
    expect(panel).to_contain_text("No problems")
    expect(page.locator(".ace_gutter-cell.ace_error")).to_have_count(0)
    page.keyboard.press("Control+s")
    expect(page.locator("#save-status")).to_have_text("Saved revision 2.")
    expect(page.locator("#revision-label")).to_have_text("Revision 2")

    # The history shows what changed.
    page.get_by_role("link", name="History").click()
    expect(page.get_by_role("heading", name="Changes from revision 1 to revision 2")).to_be_visible()
    expect(page.locator("tr.diff-del")).to_contain_text("What is the weather like in Oslo in winter?")
    expect(page.locator("tr.diff-add")).to_contain_text("in winter? Be brief.")

    # The blueprint page offers a run with the blueprint's models and the site's judges.
    page.get_by_role("link", name="Winter weather").first.click()
    run_form = page.locator("#run-form")
    expect(run_form.get_by_role("checkbox", name="openai:gpt-4.1-mini")).to_be_checked()
    expect(run_form.get_by_role("button", name="Start run")).to_be_visible()
    screenshot(page, "blueprint-run-form")

    # Starting it shows the run; with no key for the provider, the item fails and says which variable to set.
    run_form.get_by_role("button", name="Start run").click()
    expect(page.get_by_role("heading", name=re.compile(r"Run \d+"))).to_be_visible()
    expect(page.get_by_text("OPENAI_API_KEY").first).to_be_visible()


def test_leaving_with_unsaved_changes_asks_first(page, live_server, tmp_path):
    import_blueprint(page, live_server, tmp_path)
    open_editor_on_line(page, 1)
    page.keyboard.type(" (draft)")
    expect(page.locator("#validation-panel")).to_contain_text("No problems")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.type), dialog.dismiss()))

    page.close(run_before_unload=True)

    page.wait_for_timeout(200)
    assert dialogs == ["beforeunload"]


def test_the_library_search_narrows_as_you_type(page, live_server, tmp_path):
    import_blueprint(page, live_server, tmp_path)
    page.goto(f"{live_server.url}/")
    expect(page.get_by_role("link", name="Winter weather")).to_be_visible()

    page.get_by_label("Search").fill("photosynthesis")

    expect(page.get_by_text("Nothing matches")).to_be_visible()
    expect(page).to_have_url(re.compile(r"q=photosynthesis"))
