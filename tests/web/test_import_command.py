import json

import pytest
from django.core.management import call_command

from blueprints.models import Blueprint, ModelCollection
from tests.web.conftest import VALID

pytestmark = pytest.mark.django_db


def run(folder, capsys):
    try:
        call_command("import_blueprints", str(folder))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_whole_weval_corpus_imports_with_its_collections(shared_dir, capsys):
    corpus = shared_dir / "corpus" / "weval-configs"

    code, out, _ = run(corpus, capsys)

    assert code == 0
    assert Blueprint.objects.count() == 173
    assert ModelCollection.objects.count() == 8
    assert "173 files: 173 new, 0 updated, 0 unchanged, 0 refused (1 is a draft with errors); 8 model collections." in out
    draft = Blueprint.objects.get(slug="eu-ai-act-202401689")
    assert not draft.current_revision.is_valid
    assert "eu-ai-act-202401689.yml:3:52: error: Failed to parse YAML blueprint" in out
    assert Blueprint.objects.filter(slug="history-json__blueprints__udhr").exists()
    assert Blueprint.objects.filter(slug="table-format-sensitivity__combined-11fmts-r30-qpf5").exists()

    code, out, _ = run(corpus, capsys)
    assert "0 new, 0 updated, 173 unchanged" in out
    assert Blueprint.objects.count() == 173


def test_a_changed_file_makes_a_new_revision(tmp_path, capsys):
    (tmp_path / "blueprints" / "geo").mkdir(parents=True)
    path = tmp_path / "blueprints" / "geo" / "capitals.yml"
    path.write_text(VALID)
    run(tmp_path, capsys)
    path.write_text(VALID.replace("France", "Spain"))

    code, out, _ = run(tmp_path, capsys)

    blueprint = Blueprint.objects.get(slug="geo__capitals")
    assert code == 0 and blueprint.revisions.count() == 2
    assert "blueprints/geo/capitals.yml -> geo__capitals: updated (revision 2)" in out


def test_two_files_with_one_id_are_refused_naming_both(tmp_path, capsys):
    (tmp_path / "a.yml").write_text(VALID)
    (tmp_path / "a.json").write_text(json.dumps({"title": "A"}))
    (tmp_path / "b.yml").write_text(VALID)

    code, _, err = run(tmp_path, capsys)

    assert code == 1
    assert "'a.json' and 'a.yml' would both get the id 'a'" in err
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["b"]


def test_a_fixtures_file_named_by_a_blueprint_is_kept_with_its_revision(tmp_path, capsys):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "canned.json").write_text('{"responses": {}}')
    (tmp_path / "offline.yml").write_text(VALID.replace("tags:", "fixtures: fixtures/canned.json\ntags:"))

    run(tmp_path, capsys)

    assert Blueprint.objects.get(slug="offline").current_revision.files == {
        "fixtures/canned.json": '{"responses": {}}'}


def test_a_missing_folder_is_an_error(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="is not a folder"):
        call_command("import_blueprints", str(tmp_path / "nope"))


def test_a_link_to_a_file_outside_the_folder_is_not_followed(tmp_path, capsys):
    secret = tmp_path / "outside" / "secret.yml"
    secret.parent.mkdir()
    secret.write_text("title: Secret\n---\n- prompt: private\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "fine.yml").write_text("title: Fine\n---\n- prompt: hello\n")
    (repo / "sneaky.yml").symlink_to(secret)
    _, out, err = run(repo, capsys)
    assert "sneaky.yml" in out + err and "outside the folder" in out + err
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["fine"]
