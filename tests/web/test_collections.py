import pytest

from blueprints.models import ModelCollection

pytestmark = pytest.mark.django_db


def test_the_collections_page_lists_and_saves_collections(client):
    ModelCollection.store("CORE", ["openai:gpt-4o-mini"], source="models/CORE.json")

    listed = client.get("/collections/")
    saved = client.post("/collections/", {"name": "fast", "models": "openai:gpt-4.1-nano\n\nopenai:gpt-4o-mini\n"},
                        follow=True)

    assert "openai:gpt-4o-mini" in listed.text and "models/CORE.json" in listed.text
    assert ModelCollection.objects.get(name="FAST").models == ["openai:gpt-4.1-nano", "openai:gpt-4o-mini"]
    assert "Saved the collection FAST." in saved.text


@pytest.mark.parametrize(("name", "models", "message"), [
    ("no good", "a:b", "upper case"),
])
def test_a_bad_collection_is_explained(client, name, models, message):
    response = client.post("/collections/", {"name": name, "models": models})

    assert response.status_code == 200
    assert message in response.text
    assert not ModelCollection.objects.exists()


def test_uploading_a_collection_file_stores_the_collection_and_the_blueprint_can_run(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    blueprint = SimpleUploadedFile("capitals.yml", b"title: Capitals\nmodels: [CORE]\n---\n- prompt: Capital of France?\n"
                                                   b"  should: [$contains: Paris]\n")
    collection = SimpleUploadedFile("CORE.json", b'["openai:gpt-4.1-mini", "anthropic:claude-3-5-haiku"]')
    page = client.post("/import/", {"files": [blueprint, collection]})

    assert page.status_code == 200
    assert ModelCollection.objects.get(name="CORE").models == ["openai:gpt-4.1-mini", "anthropic:claude-3-5-haiku"]
    from blueprints.models import Blueprint

    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["capitals"]  # no blueprint called CORE
    assert "names the model collection" not in page.text


def test_an_import_naming_an_unknown_collection_says_how_to_fix_it(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    blueprint = SimpleUploadedFile("capitals.yml", b"title: Capitals\nmodels: [FRONTIER]\n---\n- prompt: Capital?\n"
                                                   b"  should: [$contains: Paris]\n")
    page = client.post("/import/", {"files": [blueprint]})
    assert "names the model collection FRONTIER, which evalsite does not have" in page.text
    assert "models/FRONTIER.json" in page.text
