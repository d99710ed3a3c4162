import pytest

from blueprints import trying
from tests.web.conftest import htmx

pytestmark = pytest.mark.django_db

TEXT = """\
title: Try me
models: [openai:gpt-4.1-mini]
---
- id: capital
  prompt: What is the capital of France?
  should:
    - $icontains: paris
    - $word_count_between: [3, 10]
    - Names Paris.
    - - $contains: "I don't know"
    - - $icontains: source
  should_not:
    - $icontains: lyon
- id: other
  prompt: Something else
  should:
    - $is_json
"""


def test_the_try_page_offers_each_prompt(client, make_blueprint):
    make_blueprint(TEXT)

    response = client.get("/blueprints/capitals/try/")

    assert response.status_code == 200
    assert '<option value="capital" selected>' in response.text
    assert '<option value="other">' in response.text


def test_every_function_point_is_scored_with_its_explanation_and_judged_points_are_listed(client, make_blueprint):
    if trying.point_evaluator() is None:
        pytest.skip("runs.engine.points.evaluate_point is not there yet")
    make_blueprint(TEXT)

    response = client.post("/blueprints/capitals/try/", {"prompt": "capital", "response": "Paris, not Lyon."},
                           **htmx())

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<section id="try-results"')
    results = response.text
    assert results.count('class="point trial-pass"') == 2  # icontains paris; path 2 fails, path 1 fails
    assert 'class="point trial-judged"' in results and "judged in a run" in results
    # should_not icontains lyon: the function matched (1), so the point counts 1 - 1 = 0
    assert "(function gave 1.00)" in results
    assert results.count('class="point trial-fail"') >= 3


def test_unsaved_editor_text_can_be_tried(client, make_blueprint):
    if trying.point_evaluator() is None:
        pytest.skip("runs.engine.points.evaluate_point is not there yet")
    make_blueprint(TEXT)

    response = client.post("/blueprints/capitals/try/",
                           {"prompt": "capital", "response": "Paris", "text": TEXT.replace("paris", "berlin")},
                           **htmx())

    assert "Scored against the text in the editor" in response.text
    assert "icontains(&quot;berlin&quot;)" in response.text


def test_an_unknown_prompt_is_a_form_error_not_a_crash(client, make_blueprint):
    make_blueprint(TEXT)

    response = client.post("/blueprints/capitals/try/", {"prompt": "nope", "response": "x"})

    assert response.status_code == 200
    assert "Select a valid choice" in response.text


def test_a_draft_cannot_be_tried(client, make_blueprint):
    make_blueprint("title: [\n")

    response = client.get("/blueprints/capitals/try/")

    assert "This blueprint has errors" in response.text
