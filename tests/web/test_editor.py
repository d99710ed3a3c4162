import json
import re

import pytest

from blueprints.models import Blueprint
from tests.web.conftest import VALID, htmx

pytestmark = pytest.mark.django_db


def validate(client, text, slug="capitals"):
    return client.post("/validate/", {"text": text, "slug": slug}, **htmx())


def annotations(response):
    match = re.search(r'data-annotations="([^"]*)"', response.text)
    return json.loads(match.group(1).replace("&quot;", '"').replace("&#x27;", "'").replace("&amp;", "&"))


def test_the_editor_page_has_a_code_editor_over_a_textarea_that_works_without_javascript(client, make_blueprint):
    make_blueprint()

    response = client.get("/blueprints/capitals/edit/")

    assert response.status_code == 200
    assert '<textarea id="id_text" name="text"' in response.text
    assert "title: Capital cities" in response.text
    assert 'data-code-editor="yaml"' in response.text
    assert "/static/django_ace/ace/ace.js" in response.text
    assert "/static/js/editor.js" in response.text
    assert re.search(r'<form id="editor-form"[^>]*method="post"\s+action="/blueprints/capitals/edit/"', response.text)


def test_the_editor_sends_text_debounced_and_cancels_stale_requests(client, make_blueprint):
    make_blueprint()

    page = client.get("/blueprints/capitals/edit/").text

    assert 'hx-post="/validate/" hx-trigger="input changed delay:400ms" hx-sync="this:replace"' in page


def test_the_ace_and_editor_scripts_are_served_from_our_own_static_files(client):
    for path in ("/static/django_ace/ace/ace.js", "/static/django_ace/ace/mode-yaml.js", "/static/js/editor.js"):
        response = client.get(path)
        response.close()
        assert response.status_code == 200, path


def test_valid_text_gets_a_clean_panel_and_a_preview(client):
    response = validate(client, VALID)

    assert response.status_code == 200
    assert 'class="validation-panel is-valid"' in response.text
    assert "No problems" in response.text and "1 prompt, 2 points" in response.text
    assert annotations(response) == []
    assert '<div id="preview-body" hx-swap-oob="true">' in response.text
    assert "icontains(&quot;paris&quot;)" in response.text


def test_it_marks_the_line_of_a_yaml_error(client):
    text = VALID.replace("What is the capital of France?", "Capital: of France?")

    response = validate(client, text)

    assert response.status_code == 200
    assert "1 error" in response.text
    assert "Line 8:" in response.text
    assert annotations(response)[0]["row"] == 7
    assert annotations(response)[0]["type"] == "error"
    assert 'id="preview-body"' not in response.text  # the last good preview stays
    assert "The preview shows the last text without errors" in response.text


def test_a_schema_error_names_its_line_path_and_hint(client):
    text = VALID.replace("$icontains: paris", "$icontians: paris")

    response = validate(client, text)

    assert "1 error" in response.text
    assert "Line 10:7" in response.text
    assert "Unknown point function: &#x27;icontians&#x27;" in response.text
    assert "Hint: did you mean `$icontains`?" in response.text
    assert '<code class="diag-path">prompts[0].should[0].$icontians</code>' in response.text
    assert annotations(response) == [{"row": 9, "column": 6, "type": "error",
                                      "text": "Unknown point function: 'icontians'\nHint: did you mean `$icontains`?"}]


def test_an_unknown_key_is_a_warning_with_a_did_you_mean(client):
    response = validate(client, VALID.replace("  should:", "  shuold:"))

    assert "unknown key `shuold` in a prompt" in response.text
    assert "did you mean `should`?" in response.text
    assert {a["type"] for a in annotations(response)} == {"warning"}


def test_a_warning_does_not_block_and_is_marked_as_a_warning(client):
    text = VALID.replace("  should:", "  should_not:")

    response = validate(client, text)

    assert "has-warnings" in response.text
    assert "1 warning" in response.text
    assert "count-error" not in response.text and "diag-error" not in response.text
    assert annotations(response)[0]["type"] == "warning"
    assert 'id="preview-body"' in response.text


def test_an_empty_text_is_an_error_not_a_crash(client):
    response = validate(client, "")

    assert response.status_code == 200
    assert "empty" in response.text


def test_the_preview_draws_paths_and_should_not_points(client):
    text = VALID.replace("    - Names Paris as the capital.\n", """\
    - - Says Paris.
    - - Says it does not know.
      - Suggests a source.
  should_not:
    - $contains: Lyon
""")

    response = validate(client, text)

    assert response.text.count('class="point-group point-group-path path-box"') == 2
    assert 'class="badge badge-not"' in response.text
    assert "contains(&quot;Lyon&quot;)" in response.text


def test_the_preview_counts_generation_and_judge_calls(client):
    text = VALID.replace("  - openai:gpt-4.1-mini\n", "  - openai:gpt-4.1-mini\n  - openai:gpt-4.1-nano\n"
                         "temperatures: [0, 0.5]\n")

    response = validate(client, text)

    # 1 prompt x 2 models x 2 temperatures = 4 generations; 1 judged point x 4 responses x 3 site judges = 12.
    assert '<strong class="calls-generation">4</strong>' in response.text
    assert '<strong class="calls-judge">12</strong>' in response.text
    assert "openai:gpt-4.1-nano[temp:0.5]" in response.text


def test_saving_makes_a_new_revision_and_returns_to_the_editor(client, make_blueprint):
    make_blueprint()

    response = client.post("/blueprints/capitals/edit/", {"text": VALID + "\n# more\n", "base_revision": 1})

    assert response.status_code == 302
    blueprint = Blueprint.objects.get(slug="capitals")
    assert blueprint.current_revision.number == 2
    assert "Saved revision 2." in client.get(response.url).text


def test_saving_with_htmx_answers_with_the_status_fragment(client, make_blueprint):
    make_blueprint()

    response = client.post("/blueprints/capitals/edit/", {"text": VALID + "# x\n", "base_revision": 1}, **htmx())

    assert response.status_code == 200
    assert 'id="save-status"' in response.text and 'data-saved="true"' in response.text
    assert "Saved revision 2." in response.text
    assert 'name="base_revision" value="2" id="id_base_revision" hx-swap-oob="true"' in response.text


def test_saving_unchanged_text_makes_no_revision(client, make_blueprint):
    make_blueprint()

    response = client.post("/blueprints/capitals/edit/", {"text": VALID, "base_revision": 1}, **htmx())

    assert "No changes since revision 1." in response.text
    assert Blueprint.objects.get(slug="capitals").revisions.count() == 1


def test_text_with_errors_is_saved_as_a_draft(client, make_blueprint):
    make_blueprint()

    client.post("/blueprints/capitals/edit/", {"text": "title: [\n", "base_revision": 1})

    revision = Blueprint.objects.get(slug="capitals").current_revision
    assert (revision.number, revision.is_valid, revision.error_count) == (2, False, 1)
    page = client.get("/blueprints/capitals/edit/").text
    assert "as a draft: 1 error must be fixed before it can run" in page


def test_a_save_over_a_newer_revision_warns(client, make_blueprint):
    blueprint = make_blueprint()
    blueprint.save_revision(VALID + "# saved elsewhere\n")

    response = client.post("/blueprints/capitals/edit/", {"text": VALID + "# mine\n", "base_revision": 1},
                           follow=True)

    assert "had been saved elsewhere after you opened the editor" in response.text


def test_the_new_blueprint_page_creates_one_with_an_id_from_its_title(client):
    page = client.get("/new/")
    assert page.status_code == 200 and "My new blueprint" in page.text

    response = client.post("/new/", {"text": VALID, "slug": ""})

    assert response.status_code == 302 and response.url == "/blueprints/capital-cities/edit/"
    assert Blueprint.objects.get(slug="capital-cities").title == "Capital cities"


def test_a_new_blueprint_can_have_an_id_of_its_own_but_not_a_taken_one(client, make_blueprint):
    make_blueprint()

    taken = client.post("/new/", {"text": VALID, "slug": "capitals"})
    own = client.post("/new/", {"text": VALID, "slug": "geo__capitals"})

    assert "already used by another blueprint" in taken.text
    assert own.url == "/blueprints/geo__capitals/edit/"


def test_an_unknown_blueprint_is_a_404(client):
    assert client.get("/blueprints/nope/edit/").status_code == 404
