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


# --- a collection is checked by the rule a run routes by --------------------------------------------------------


@pytest.mark.parametrize(("models", "message"), [
    # The fix the refusal of `foo:bar baz` suggests: a provider no run can send to.
    ("openai:gpt-4.1-mini\nfoo:bar-baz", "Line 2: &#x27;foo:bar-baz&#x27; names an unknown provider &#x27;foo&#x27; "
                                         "(known providers: openai, anthropic, google, mistral, together, xai, "
                                         "openrouter, fixtures); reach it through a router (e.g. "
                                         "&#x27;openrouter:foo/bar-baz&#x27;)"),
    ("opnai:gpt-4o", "Line 1: &#x27;opnai:gpt-4o&#x27; names an unknown provider &#x27;opnai&#x27;"),
    ("opnai:gpt-4o", "did you mean &#x27;openai:gpt-4o&#x27;?"),
])
def test_the_collections_page_refuses_a_provider_no_run_can_send_to(client, models, message):
    page = client.post("/collections/", {"name": "CORE", "models": models})

    assert message in page.text and "Nothing was saved" in page.text
    assert not ModelCollection.objects.exists()


def test_the_collections_page_keeps_known_providers_variants_and_fixtures(client):
    models = "openrouter:google/gemini-2.5-pro\nOpenAI:gpt-4o[temp:0.5]\nfixtures:canned"
    client.post("/collections/", {"name": "CORE", "models": models})

    assert ModelCollection.objects.get(name="CORE").models == models.splitlines()


def test_a_collection_refused_here_is_the_one_a_run_would_refuse(client):
    """One rule: the words the collections page shows are the run's (runs.engine.providers.check_models)."""
    from runs.engine.providers import ProviderSettings, check_models

    page = client.post("/collections/", {"name": "CORE", "models": "foo:bar-baz"})
    problem = check_models(["foo:bar-baz"], ProviderSettings())[0].message

    assert problem.startswith("model 'foo:bar-baz' names an unknown provider 'foo'")
    assert problem.removeprefix("model ").replace("'", "&#x27;") in page.text


def test_import_blueprints_skips_a_collection_file_naming_an_unknown_provider(tmp_path):
    import io

    from django.core.management import call_command

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "CORE.json").write_text('["openai:gpt-4.1-mini", "foo:bar-baz"]')
    (tmp_path / "models" / "FAST.json").write_text('["openai:gpt-4.1-nano"]')
    out = io.StringIO()

    call_command("import_blueprints", str(tmp_path), stdout=out)

    assert ("collection CORE: skipped: models/CORE.json: CORE, entry 2: 'foo:bar-baz' names an unknown provider "
            "'foo'") in out.getvalue()
    assert list(ModelCollection.objects.values_list("name", flat=True)) == ["FAST"]


def test_an_uploaded_collection_file_naming_an_unknown_provider_is_skipped(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    page = client.post("/import/", {"files": [SimpleUploadedFile("CORE.json", b'["opnai:gpt-4o"]')]})

    assert "CORE, entry 1: &#x27;opnai:gpt-4o&#x27; names an unknown provider" in page.text
    assert "did you mean &#x27;openai:gpt-4o&#x27;?" in page.text
    assert not ModelCollection.objects.exists()


def test_the_api_saves_a_collection_and_refuses_a_provider_no_run_can_send_to(client):
    import json

    def put(name, data, content_type="application/json"):
        return client.put(f"/api/collections/{name}", json.dumps(data), content_type=content_type)

    created = put("CORE", {"models": ["openai:gpt-4.1-mini", "openrouter:google/gemini-2.5-pro"]})
    refused = put("CORE", {"models": ["openai:gpt-4.1-mini", "foo:bar-baz", "opnai:gpt-4o"]})

    assert created.status_code == 201 and created.json()["models"][1] == "openrouter:google/gemini-2.5-pro"
    assert refused.status_code == 400 and refused.json()["error"].startswith("Nothing was saved")
    problems = refused.json()["problems"]
    assert problems[0].startswith("models[1]: 'foo:bar-baz' names an unknown provider 'foo'")
    assert "'openrouter:foo/bar-baz'" in problems[0]
    assert problems[1].startswith("models[2]: 'opnai:gpt-4o'") and "did you mean 'openai:gpt-4o'?" in problems[1]
    assert ModelCollection.objects.get(name="CORE").models == ["openai:gpt-4.1-mini",
                                                                "openrouter:google/gemini-2.5-pro"]
    assert put("CORE", {"models": ["openai:gpt-4.1-nano"]}).status_code == 200
    assert put("core", {"models": []}).json()["error"].startswith("'core' is not a usable collection name")
    assert put("CORE", {"models": "openai:x"}).status_code == 400
    assert put("CORE", {"models": ["openai:x"] * 2001}).status_code == 400
    assert put("CORE", {"models": []}, content_type="text/plain").status_code == 415
    assert ModelCollection.objects.get(name="CORE").models == ["openai:gpt-4.1-nano"]
