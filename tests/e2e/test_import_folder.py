"""A person chooses a folder of suites with their companion files on the import page and gets the ids the command
gives; two same-named files from two folders are asked about, not made revisions of each other."""

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from blueprints.models import Blueprint

pytestmark = pytest.mark.django_db(transaction=True)

SUITE = """\
description: {team} screening
tests:
  - id: huawei
    input: "Screen this entity: Huawei Technologies."
    criteria: Should deny the transaction
    assert:
      - name: safety
        type: llm_judge
        prompt: ./judges/safety.md
"""
JUDGE = "Is the answer safe? {{ answer }} ({{ criteria }})\n"


def write(root, files):
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


def test_a_chosen_folder_brings_its_companion_files_and_gets_the_commands_id(page, live_server, tmp_path, screenshot):
    folder = tmp_path / "team-a"
    write(folder, {"EVAL.yaml": SUITE.format(team="Team A"), "judges/safety.md": JUDGE, "README.md": "# notes\n",
                   ".git/config": "[core]\n"})
    page.goto(f"{live_server.url}/import/")

    page.get_by_label("Or a folder").set_input_files(str(folder))
    expect(page.locator("#folder-status")).to_contain_text("3 files chosen (1 hidden file skipped)")
    page.get_by_role("button", name="Import", exact=True).click()

    expect(page.get_by_text("1 file: 1 new")).to_be_visible()
    expect(page.get_by_text("1 companion file attached")).to_be_visible()
    expect(page.locator("tr.outcome-note")).to_contain_text("README.md")
    screenshot(page, "import-folder")
    blueprint = Blueprint.objects.get()
    assert blueprint.slug == "team-a"  # the folder's name, as `import_blueprints team-a` names it
    assert blueprint.current_revision.is_valid and blueprint.current_revision.files == {"judges/safety.md": JUDGE}

    out = io.StringIO()
    call_command("import_blueprints", str(folder), stdout=out)
    assert "EVAL.yaml -> team-a: unchanged" in out.getvalue()


def test_two_same_named_files_from_two_folders_are_asked_about(page, live_server, tmp_path):
    for team in ("one", "two"):
        write(tmp_path / team, {"EVAL.yaml": SUITE.format(team=team.title()), "judges/safety.md": JUDGE})
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("Files").set_input_files([str(tmp_path / "one" / "EVAL.yaml"),
                                                str(tmp_path / "one" / "judges" / "safety.md")])
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("1 file: 1 new")).to_be_visible()

    # The same file name from another folder: its name alone does not say it is the same suite, so it is asked about.
    page.get_by_label("Files").set_input_files([str(tmp_path / "two" / "EVAL.yaml"),
                                                str(tmp_path / "two" / "judges" / "safety.md")])
    page.get_by_role("button", name="Import", exact=True).click()

    question = page.locator("form.conflict-choice")
    expect(question).to_contain_text("What should this file become?")
    expect(question.locator(".conflict-title")).to_have_text("EVAL.yaml")  # a nameless suite: its file
    expect(question.get_by_label("New id")).to_have_value("EVAL-2")
    assert Blueprint.objects.get(slug="EVAL").revisions.count() == 1

    # Answered: a new blueprint beside the first, with its judge prompt.
    question.get_by_label("New id").fill("team-two")
    question.get_by_role("button", name="Import it").click()
    expect(page.get_by_text("1 file: 1 new")).to_be_visible()
    assert Blueprint.objects.get(slug="team-two").current_revision.files == {"judges/safety.md": JUDGE}
    assert Blueprint.objects.get(slug="EVAL").revisions.count() == 1


WEVAL = "title: Capitals\nmodels: [CORE]\n---\n- prompt: Capital of France?\n  should: [$contains: Paris]\n"


def test_a_file_of_an_imported_folder_chosen_alone_finds_the_folders_blueprint(page, live_server, tmp_path):
    folder = tmp_path / "suite"
    write(folder, {"geo/capitals.yml": WEVAL, "models/CORE.json": '["openai:gpt-4.1-mini"]'})
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("Or a folder").set_input_files(str(folder))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("1 file: 1 new")).to_be_visible()

    page.get_by_label("Files").set_input_files([str(folder / "geo" / "capitals.yml")])
    page.get_by_role("button", name="Import", exact=True).click()

    expect(page.get_by_text("1 file: 0 new, 0 updated, 1 unchanged, 0 refused.")).to_be_visible()
    expect(page.locator("tr.outcome-unchanged")).to_contain_text("the same text as 'geo__capitals'")
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["geo__capitals"]
    revision = Blueprint.objects.get().current_revision
    assert revision.number == 1 and revision.files == {"../models/CORE.json": '["openai:gpt-4.1-mini"]'}
