"""Upload identity: a file gets the same id, companion files and revision from the import page (files or a folder)
and from `import_blueprints`; a file whose id belongs to other text from another place is asked about, never made a
silent new revision; the collections page and `validate_blueprint` know every model id and stored collection."""

import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from blueprints.models import Blueprint, ModelCollection

pytestmark = pytest.mark.django_db

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "weval-configs"

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
PLAIN = "description: {team}\ntests:\n  - id: t1\n    input: Hello\n    criteria: Greets back\n"
WEVAL = "title: {title}\nmodels: [openai:gpt-4.1-mini]\n---\n- prompt: {prompt}\n  should: [$contains: Paris]\n"


def upload(name, text):
    return SimpleUploadedFile(name, text.encode("utf-8") if isinstance(text, str) else text)


def post_folder(client, files: dict[str, str]):
    """What the import page's folder picker posts: the files, and their paths (the chosen folder first)."""
    paths = list(files)
    return client.post("/import/", {"folder": [upload(Path(p).name, files[p]) for p in paths],
                                    "folder_paths": json.dumps(paths)})


def post_files(client, files: dict[str, str]):
    return client.post("/import/", {"files": [upload(name, text) for name, text in files.items()]})


def write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


def cli(folder) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_blueprints", str(folder), stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


TEAM_A = {"team-a/EVAL.yaml": SUITE.format(team="Team A"), "team-a/judges/safety.md": JUDGE,
          "team-a/README.md": "# notes\n"}


# --- the same id, companions and revision from every door -------------------------------------------------------


def test_a_folder_upload_brings_companion_files_and_gets_the_commands_id(client, tmp_path):
    page = post_folder(client, TEAM_A)

    blueprint = Blueprint.objects.get()
    assert blueprint.slug == "team-a"  # a nameless EVAL.yaml at the top: the folder's name, as the command gives
    assert blueprint.current_revision.is_valid
    assert blueprint.current_revision.files == {"judges/safety.md": JUDGE}
    assert "1 companion file attached" in page.text and "1 other file left out" in page.text
    assert "README.md&#x27; is not a .yml, .yaml or .json file" in page.text

    write(tmp_path, TEAM_A)
    code, out, _ = cli(tmp_path / "team-a")
    assert code == 0 and "EVAL.yaml -> team-a: unchanged" in out
    assert blueprint.revisions.count() == 1


def test_a_file_the_command_imported_is_unchanged_when_uploaded_by_its_name(client, tmp_path):
    shutil.copytree(CORPUS / "models", tmp_path / "models")
    (tmp_path / "blueprints").mkdir()
    shutil.copy(CORPUS / "blueprints" / "asean-charter-evaluation.yml", tmp_path / "blueprints")
    assert cli(tmp_path)[0] == 0

    same = (CORPUS / "blueprints" / "asean-charter-evaluation.yml").read_bytes()
    page = client.post("/import/", {"files": [upload("asean-charter-evaluation.yml", same)]})

    assert "1 file: 0 new, 0 updated, 1 unchanged, 0 refused." in page.text
    assert Blueprint.objects.get(slug="asean-charter-evaluation").revisions.count() == 1


def test_a_corpus_folder_gets_the_same_id_in_the_browser_as_from_the_command(client, tmp_path):
    name = "combined-11fmts-r30-qpf5.yml"
    text = (CORPUS / "blueprints" / "table-format-sensitivity" / name).read_text()

    post_folder(client, {f"weval-configs/blueprints/table-format-sensitivity/{name}": text})

    assert list(Blueprint.objects.values_list("slug", flat=True)) == [
        "table-format-sensitivity__combined-11fmts-r30-qpf5"]
    write(tmp_path, {f"blueprints/table-format-sensitivity/{name}": text})
    code, out, _ = cli(tmp_path)
    assert code == 0 and "0 new, 0 updated, 1 unchanged" in out


def test_a_folder_imported_by_the_command_is_unchanged_when_chosen_in_the_browser(client, tmp_path):
    write(tmp_path, TEAM_A)
    cli(tmp_path / "team-a")

    page = post_folder(client, TEAM_A)

    assert "1 file: 0 new, 0 updated, 1 unchanged, 0 refused" in page.text
    assert Blueprint.objects.get(slug="team-a").revisions.count() == 1


def test_a_changed_file_from_the_same_folder_is_a_new_revision(client):
    post_folder(client, TEAM_A)

    page = post_folder(client, {**TEAM_A, "team-a/judges/safety.md": "Is it safe and polite?\n"})

    assert "New revision 2" in page.text
    files = Blueprint.objects.get(slug="team-a").current_revision.files
    assert files == {"judges/safety.md": "Is it safe and polite?\n"}


# --- never a silent new revision from another file -------------------------------------------------------------


def test_two_nameless_eval_files_uploaded_by_name_ask_instead_of_overwriting(client):
    post_files(client, {"EVAL.yaml": PLAIN.format(team="A")})

    page = post_files(client, {"EVAL.yaml": PLAIN.format(team="B")})

    assert "What should this file become?" in page.text
    assert "a file&#x27;s name alone does not say it is the same suite" in page.text
    assert Blueprint.objects.get(slug="EVAL").revisions.count() == 1


def test_three_different_weval_eval_files_uploaded_by_name_each_ask(client):
    post_files(client, {"eval.yml": WEVAL.format(title="First", prompt="Capital of France?")})
    second = post_files(client, {"eval.yml": WEVAL.format(title="Second", prompt="Where is Paris?")})
    third = post_files(client, {"eval.yml": WEVAL.format(title="Third", prompt="Name a French city.")})

    for page, title in ((second, "Second"), (third, "Third")):
        assert "What should this file become?" in page.text
        assert f'<strong class="conflict-title">{title}</strong>' in page.text  # both titles: the file's...
        assert ">First</a>" in page.text  # ...and the blueprint's it would replace
        assert "rename the file (its path gives its id)" in page.text
    assert Blueprint.objects.get(slug="eval").revisions.count() == 1


def test_a_suite_from_another_folder_with_the_same_name_asks_and_keeps_its_companions(client):
    named = {"one/EVAL.yaml": "name: greeter\n" + SUITE.format(team="One"), "one/judges/safety.md": JUDGE}
    post_folder(client, named)

    other = {"two/EVAL.yaml": "name: greeter\n" + SUITE.format(team="Two"), "two/judges/safety.md": "Other judge\n"}
    page = post_folder(client, other)

    assert ("belongs to the suite imported from &#x27;one/EVAL.yaml&#x27;, and &#x27;two/EVAL.yaml&#x27; is another "
            "file: give this suite its own `name:`") in page.text
    assert 'name="new_id" value="greeter-2"' in page.text
    assert Blueprint.objects.get(slug="greeter").revisions.count() == 1
    answer = client.post("/import/conflict/", {
        "path": "EVAL.yaml", "folder": "two", "text": "name: greeter\n" + SUITE.format(team="Two"),
        "files": json.dumps({"judges/safety.md": "Other judge\n"}), "choice": "new-id", "new_id": "greeter-two"})
    assert "New blueprint" in answer.text
    assert Blueprint.objects.get(slug="greeter-two").current_revision.files == {"judges/safety.md": "Other judge\n"}
    assert Blueprint.objects.get(slug="greeter-two").current_revision.is_valid


def test_the_command_refuses_a_file_whose_id_belongs_to_one_uploaded_from_elsewhere(client, tmp_path):
    post_folder(client, {"one/EVAL.yaml": "name: greeter\n" + SUITE.format(team="One"), "one/judges/safety.md": JUDGE})
    write(tmp_path, {"two/EVAL.yaml": "name: greeter\n" + SUITE.format(team="Two"), "two/judges/safety.md": JUDGE})

    code, _, err = cli(tmp_path / "two")

    assert code == 1 and "belongs to the suite imported from 'one/EVAL.yaml', and 'two/EVAL.yaml'" in err
    assert "give this suite its own `name:`" in err
    assert Blueprint.objects.get(slug="greeter").revisions.count() == 1


def test_a_blueprint_made_in_evalsite_is_not_replaced_by_an_upload_without_asking(client, make_blueprint):
    make_blueprint(slug="capitals")

    page = post_files(client, {"capitals.yml": WEVAL.format(title="Uploaded", prompt="Capital of France?")})

    assert "belongs to a blueprint made in evalsite" in page.text and "What should this file become?" in page.text
    assert Blueprint.objects.get(slug="capitals").revisions.count() == 1


# --- companion files from the file picker ------------------------------------------------------------------------


def test_files_chosen_one_by_one_attach_the_companions_a_suite_names(client):
    page = post_files(client, {"EVAL.yaml": "name: screening\n" + SUITE.format(team="A"), "safety.md": JUDGE,
                               "notes.txt": "hello"})

    revision = Blueprint.objects.get(slug="screening").current_revision
    assert revision.is_valid and revision.files == {"judges/safety.md": JUDGE}
    assert "1 file: 1 new" in page.text and "1 companion file attached" in page.text
    assert "notes.txt&#x27; is not a .yml, .yaml or .json file, and no suite imported with it names it" in page.text


def test_hidden_files_in_a_folder_are_skipped_as_the_command_skips_them(client):
    page = post_folder(client, {**TEAM_A, "team-a/.git/config": "[core]\n", "team-a/.hidden.yml": "title: x\n"})

    assert ".git" not in page.text and ".hidden" not in page.text
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["team-a"]


# --- collections -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("models", "message"), [
    ("openai:gpt-4.1-mini\nnot-a-model-id", "Line 2: &#x27;not-a-model-id&#x27; has no provider: write it as "
                                            "provider:model, e.g. openai:gpt-4o-mini"),
    ("\nfoo:bar baz", "Line 2: &#x27;foo:bar baz&#x27; has a space in it, and a model id has none: write it as "
                      "provider:model, e.g. &#x27;foo:bar-baz&#x27;"),
    ("openai:", "Line 1: &#x27;openai:&#x27; has no model name after &#x27;openai:&#x27;"),
    ("CORE", "Line 1: &#x27;CORE&#x27; names a collection"),
])
def test_the_collections_page_refuses_model_ids_that_can_never_run_naming_the_line(client, models, message):
    page = client.post("/collections/", {"name": "CORE", "models": models})

    assert message in page.text and "Nothing was saved" in page.text
    assert not ModelCollection.objects.exists()


def test_a_collection_file_with_an_id_that_can_never_run_is_skipped_with_the_entry_named(client):
    page = post_files(client, {"CORE.json": '["openai:gpt-4.1-mini", "foo:bar baz"]'})

    assert "CORE, entry 2: &#x27;foo:bar baz&#x27; has a space in it" in page.text
    assert not ModelCollection.objects.exists()


CAPITALS = "title: Capitals\nmodels: [CORE]\n---\n- prompt: Capital of France?\n  should: [$contains: Paris]\n"


def test_validate_blueprint_resolves_collections_stored_in_evalsite(tmp_path):
    ModelCollection.store("CORE", ["openai:gpt-4.1-mini", "anthropic:claude-3-5-haiku"], source="test")
    path = tmp_path / "capitals.yml"
    path.write_text(CAPITALS)
    out = io.StringIO()

    call_command("validate_blueprint", str(path), stdout=out)

    assert "OK (1 prompt, 1 point, 2 models)" in out.getvalue()
    assert "was not found" not in out.getvalue()


def test_validate_blueprint_prefers_a_models_folder_beside_the_file(tmp_path):
    ModelCollection.store("CORE", ["openai:gpt-4.1-mini", "anthropic:claude-3-5-haiku"], source="test")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "CORE.json").write_text('["openai:gpt-4o-mini"]')
    path = tmp_path / "capitals.yml"
    path.write_text(CAPITALS)
    out = io.StringIO()

    call_command("validate_blueprint", str(path), stdout=out)

    assert "OK (1 prompt, 1 point, 1 model)" in out.getvalue()


# --- the same text from any door finds its blueprint ---------------------------------------------------------------

SAME = WEVAL.format(title="Capitals", prompt="Capital of France?")


def test_a_file_of_an_imported_folder_chosen_alone_is_the_folders_blueprint_not_a_second_one(client):
    post_folder(client, {"suite/geo/capitals.yml": SAME, "suite/geo/other.yml": WEVAL.format(title="Other",
                                                                                            prompt="Where?")})

    page = post_files(client, {"capitals.yml": SAME})

    assert sorted(Blueprint.objects.values_list("slug", flat=True)) == ["geo__capitals", "geo__other"]
    assert "1 file: 0 new, 0 updated, 1 unchanged, 0 refused." in page.text
    assert ("the same text as &#x27;geo__capitals&#x27; (imported from &#x27;geo/capitals.yml&#x27;), so it is that "
            "blueprint, not a second one") in page.text
    assert Blueprint.objects.get(slug="geo__capitals").revisions.count() == 1


def test_the_same_text_in_two_blueprints_is_asked_about_naming_both(client, tmp_path):
    for slug in ("copy-one", "copy-two"):  # two blueprints of one text, as the old import could leave them
        Blueprint.objects.create(slug=slug, title="").save_revision(SAME)

    page = post_files(client, {"capitals.yml": SAME})
    write(tmp_path, {"capitals.yml": SAME})
    code, _, err = cli(tmp_path)

    assert "the same text is already stored as &#x27;copy-one&#x27;, &#x27;copy-two&#x27;" in page.text
    assert "What should this file become?" in page.text and 'name="target" value="copy-one"' in page.text
    assert code == 1 and "the same text is already stored as 'copy-one', 'copy-two'" in err
    assert not Blueprint.objects.filter(slug="capitals").exists()

    answer = client.post("/import/conflict/", {"path": "capitals.yml", "folder": "", "text": SAME,
                                               "choice": "revision", "target": "copy-two", "new_id": ""})
    assert "Unchanged" in answer.text and Blueprint.objects.count() == 2
    own = client.post("/import/conflict/", {"path": "capitals.yml", "folder": "", "text": SAME, "choice": "new-id",
                                            "new_id": "capitals", "target": "copy-one"})
    assert "New blueprint" in own.text and Blueprint.objects.get(slug="capitals").current_revision.text == SAME


def test_two_files_of_one_folder_with_the_same_text_stay_two_blueprints_and_import_again_unchanged(tmp_path):
    write(tmp_path, {"a/capitals.yml": SAME, "b/capitals.yml": SAME})

    first = cli(tmp_path)
    again = cli(tmp_path)

    assert first[0] == 0 and "2 new" in first[1]
    assert again[0] == 0 and "0 new, 0 updated, 2 unchanged" in again[1]
    assert sorted(Blueprint.objects.values_list("slug", flat=True)) == ["a__capitals", "b__capitals"]


def test_the_same_text_with_new_companion_files_is_a_new_revision_of_its_blueprint(client, tmp_path):
    text = "name: screening\n" + SUITE.format(team="A")
    post_files(client, {"EVAL.yaml": text})  # without its judge prompt: a draft
    write(tmp_path, {"team/EVAL.yaml": text, "team/judges/safety.md": JUDGE})

    code, out, _ = cli(tmp_path / "team")

    blueprint = Blueprint.objects.get()
    assert code == 0 and "EVAL.yaml -> screening: updated (revision 2)" in out
    assert blueprint.current_revision.files == {"judges/safety.md": JUDGE} and blueprint.current_revision.is_valid


def test_pasting_the_text_of_a_stored_blueprint_finds_it(client):
    post_folder(client, {"suite/geo/capitals.yml": SAME})

    page = client.post("/import/", {"text": SAME})

    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["geo__capitals"]
    assert "the same text as &#x27;geo__capitals&#x27;, so it is that blueprint, not a second one" in page.text
    Blueprint.objects.create(slug="copy", title="").save_revision(SAME)
    asked = client.post("/import/", {"text": SAME})
    assert "the same text is already stored as &#x27;copy&#x27;, &#x27;geo__capitals&#x27;" in asked.text
    assert Blueprint.objects.count() == 2
    other = client.post("/import/", {"text": SAME.replace("Capitals", "Cities")})
    assert "New blueprint" in other.text and Blueprint.objects.filter(title="Cities").exists()
