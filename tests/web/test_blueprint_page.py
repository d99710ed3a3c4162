import pytest

from blueprints.models import ModelCollection
from tests.web.conftest import VALID

pytestmark = pytest.mark.django_db


def test_the_blueprint_page_shows_title_description_tags_prompts_and_models(client, make_blueprint):
    make_blueprint(VALID.replace("tags:", "author:\n  name: Ada\n  url: https://example.org/ada\n"
                                 "references:\n  - title: Atlas\n    url: https://example.org/atlas\ntags:"))

    response = client.get("/blueprints/capitals/")

    assert response.status_code == 200
    assert "<h1>Capital cities</h1>" in response.text
    assert "<p>Checks <strong>capitals</strong>.</p>" in response.text
    assert '<a href="https://example.org/ada" rel="noopener noreferrer nofollow">Ada</a>' in response.text
    assert ">Atlas</a>" in response.text
    assert "geography" in response.text
    assert "What is the capital of France?" in response.text
    assert "openai:gpt-4.1-mini" in response.text
    assert "This blueprint has not been run yet." in response.text
    assert 'href="/blueprints/capitals/edit/"' in response.text


def test_html_in_a_description_is_never_rendered(client, make_blueprint):
    make_blueprint(VALID.replace("Checks **capitals**.", "<script>alert(1)</script> [x](javascript:alert(2))"))

    response = client.get("/blueprints/capitals/")

    assert "<script>alert(1)</script>" not in response.text
    description = response.text.split('<div class="description prose">')[1].split("</div>")[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in description
    assert "href" not in description


def test_the_run_form_offers_the_blueprints_models_and_the_site_judges(client, make_blueprint, settings, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openrouter:judge/one"]
    make_blueprint()

    page = client.get("/blueprints/capitals/").text
    assert 'hx-get="/runs/form/capitals/"' in page  # the run form is the runs app's, embedded by its address
    response = client.get("/runs/form/capitals/", HTTP_HX_REQUEST="true")

    form = response.text.split('<section id="run-form"')[1].split("</form>")[0]
    assert 'name="models" value="openai:gpt-4.1-mini"' in form and "checked" in form
    assert 'name="judges" value="holistic-one(openrouter:judge/one)"' in form
    assert "the site's defaults" in form
    # Before starting, it says what will fail: no key for the model nor for the judge here.
    assert "Before you start" in form and "OPENAI_API_KEY" in form and "OPENROUTER_API_KEY" in form
    assert 'action="/runs/form/capitals/"' in form and "Start run" in form and "disabled" not in form


def test_starting_a_run_from_the_form_opens_its_page(client, make_blueprint, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_blueprint()

    response = client.post("/runs/start", {"blueprint": "capitals", "revision": "1",
                                           "models": ["openai:gpt-4.1-mini"]}, follow=True)

    assert response.redirect_chain[-1][0].startswith("/runs/")
    assert "OPENAI_API_KEY" in response.text  # no key here: the item fails and says which variable to set


def test_a_draft_cannot_be_run(client, make_blueprint):
    make_blueprint("title: Broken\nmodels: [a:b]\nprompts: 3\n")

    response = client.get("/blueprints/capitals/")

    assert "This is a draft with 1 error" in response.text
    assert "drafts cannot run" in response.text
    assert 'name="models"' not in response.text


def test_an_unknown_collection_blocks_the_run_and_a_stored_one_resolves(client, make_blueprint):
    make_blueprint(VALID.replace("  - openai:gpt-4.1-mini", "  - FAST"))

    blocked = client.get("/runs/form/capitals/").text
    ModelCollection.store("FAST", ["openai:gpt-4.1-nano", "openai:gpt-4o-mini"])
    resolved = client.get("/runs/form/capitals/").text

    assert "unknown model collection: FAST" in blocked and 'name="models"' not in blocked
    assert 'name="models" value="openai:gpt-4o-mini"' in resolved
    assert "from FAST" in resolved


def test_renaming_changes_the_address(client, make_blueprint):
    make_blueprint()

    response = client.post("/blueprints/capitals/rename/", {"slug": "geo__capitals"}, follow=True)

    assert response.redirect_chain[-1][0] == "/blueprints/geo__capitals/"
    assert client.get("/blueprints/capitals/").status_code == 404


def test_renaming_to_a_taken_or_malformed_id_is_refused(client, make_blueprint):
    make_blueprint()
    make_blueprint(slug="other")

    taken = client.post("/blueprints/capitals/rename/", {"slug": "other"}, follow=True)
    malformed = client.post("/blueprints/capitals/rename/", {"slug": "no spaces"}, follow=True)

    assert "already used by another blueprint" in taken.text
    assert "Use letters, digits" in malformed.text
    assert client.get("/blueprints/capitals/").status_code == 200
