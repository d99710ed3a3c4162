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
