import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from blueprints.models import Blueprint, BlueprintRevision
from tests.web.conftest import VALID

pytestmark = pytest.mark.django_db


def upload(name, text):
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="application/octet-stream")


def test_the_import_page_offers_files_and_pasting(client):
    response = client.get("/import/")

    assert response.status_code == 200
    assert 'type="file"' in response.text and "multiple" in response.text
    assert 'enctype="multipart/form-data"' in response.text
    assert "import_blueprints" in response.text


def test_uploading_files_makes_blueprints_named_by_their_files(client):
    response = client.post("/import/", {"files": [upload("capitals.yml", VALID), upload("rivers.yaml", VALID)]})

    assert response.status_code == 200
    assert set(Blueprint.objects.values_list("slug", flat=True)) == {"capitals", "rivers"}
    assert "2 files: 2 new, 0 updated, 0 unchanged, 0 refused." in response.text


def test_importing_a_changed_file_makes_a_new_revision_and_an_unchanged_one_does_not(client):
    client.post("/import/", {"files": [upload("capitals.yml", VALID)]})
    client.post("/import/", {"files": [upload("capitals.yml", VALID)]})
    blueprint = Blueprint.objects.get(slug="capitals")
    assert blueprint.revisions.count() == 1

    response = client.post("/import/", {"files": [upload("capitals.yml", VALID.replace("France", "Spain"))]})

    assert blueprint.revisions.count() == 2
    assert "New revision 2" in response.text


def test_two_files_with_the_same_id_are_refused_naming_both(client):
    response = client.post("/import/", {"files": [upload("capitals.yml", VALID), upload("capitals.json", "{}")]})

    assert not Blueprint.objects.exists()
    assert "&#x27;capitals.yml&#x27; and &#x27;capitals.json&#x27; would both get the id &#x27;capitals&#x27;" in response.text


def test_a_file_with_errors_is_kept_as_a_draft(client):
    response = client.post("/import/", {"files": [upload("broken.yml", "title: x\n  bad: [\n")]})

    revision = Blueprint.objects.get(slug="broken").current_revision
    assert not revision.is_valid
    assert "saved as a draft: 1 error" in response.text


def test_pasted_text_gets_its_id_from_its_title(client, make_blueprint):
    make_blueprint(VALID.replace("of France", "of Spain"), slug="capital-cities")  # the same title, other text

    client.post("/import/", {"text": VALID})

    assert Blueprint.objects.filter(slug="capital-cities-2", title="Capital cities").exists()


@pytest.mark.parametrize(("files", "message"), [
    ([], "Choose one or more files, or paste a blueprint."),
    ([upload("notes.txt", "hi")], "is not a .yml, .yaml or .json file"),
])
def test_an_import_with_nothing_usable_says_why(client, files, message):
    response = client.post("/import/", {"files": files})

    assert message in response.text
    assert not Blueprint.objects.exists()


def test_a_file_that_is_not_utf8_is_refused_with_the_fix(client):
    bad = SimpleUploadedFile("latin.yml", "title: café".encode("latin-1"))

    response = client.post("/import/", {"files": [bad]})

    assert "is not UTF-8 text; save it as UTF-8" in response.text


SUITE = "name: greeter\ndescription: {team}\ntests:\n  - id: t1\n    input: Hello\n    criteria: Greets back\n"


def _conflicting_upload(client):
    client.post("/import/", {"files": [upload("EVAL.yaml", SUITE.format(team="first"))]})
    first = Blueprint.objects.get(slug="greeter")
    # Uploaded from another place: in the browser a file's path is its name, so the other suite is
    # told apart by what it was imported from.
    BlueprintRevision.objects.filter(pk=first.current_revision_id).update(
        import_report={**first.current_revision.import_report, "path": "team-a/EVAL.yaml"})
    return client.post("/import/", {"files": [upload("EVAL.yaml", SUITE.format(team="second"))]})


def test_an_id_that_belongs_to_another_suite_is_asked_about_not_overwritten(client):
    page = _conflicting_upload(client)

    assert "belongs to the suite imported from" in page.text
    assert "What should this file become?" in page.text
    assert 'name="new_id" value="greeter-2"' in page.text  # a free id, suggested
    assert "description: second" in page.text  # the refused text travels with the question
    assert Blueprint.objects.get(slug="greeter").revisions.count() == 1


def test_answering_new_id_imports_the_suite_beside_the_existing_one(client):
    _conflicting_upload(client)

    page = client.post("/import/conflict/", {"path": "EVAL.yaml", "text": SUITE.format(team="second"),
                                             "choice": "new-id", "new_id": "greeter-team-b"})

    assert "New blueprint" in page.text
    assert Blueprint.objects.get(slug="greeter").revisions.count() == 1
    assert "second" in Blueprint.objects.get(slug="greeter-team-b").current_revision.text


def test_answering_revision_makes_a_new_revision_of_the_existing_blueprint(client):
    _conflicting_upload(client)

    page = client.post("/import/conflict/", {"path": "EVAL.yaml", "text": SUITE.format(team="second"),
                                             "choice": "revision"})

    assert "New revision 2" in page.text
    assert Blueprint.objects.get(slug="greeter").revisions.count() == 2


def test_a_taken_or_unusable_new_id_is_refused_with_the_fix_and_nothing_changes(client):
    _conflicting_upload(client)
    Blueprint.objects.create(slug="taken", title="")

    taken = client.post("/import/conflict/", {"path": "EVAL.yaml", "text": SUITE.format(team="second"),
                                              "choice": "new-id", "new_id": "taken"})
    bad = client.post("/import/conflict/", {"path": "EVAL.yaml", "text": SUITE.format(team="second"),
                                            "choice": "new-id", "new_id": "../nope"})

    assert "the id &#x27;taken&#x27; is taken too" in taken.text and "taken-2" in taken.text
    assert "nothing was imported" in bad.text
    assert Blueprint.objects.count() == 2 and Blueprint.objects.get(slug="greeter").revisions.count() == 1
