import pytest

from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.runs.conftest import judge_rules
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
    make_blueprint(TEXT)

    response = client.post("/blueprints/capitals/try/", {"prompt": "capital", "response": "Paris, not Lyon."},
                           **htmx())

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<section id="try-results"')
    results = response.text
    assert results.count('class="point trial-pass"') == 2  # icontains paris; path 2 fails, path 1 fails
    assert 'class="point trial-skipped"' in results and "Judged points skipped: not asked" in results
    # should_not icontains lyon: the function matched (1), so the point counts 1 - 1 = 0
    assert "(function gave 1.00)" in results
    assert results.count('class="point trial-fail"') >= 3


def test_unsaved_editor_text_can_be_tried(client, make_blueprint):
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


WEIGHTED = """\
title: Weighted
models: [openai:cand]
evaluationConfig:
  llm-coverage:
    judges:
      - {id: judge-a, model: "openai:judge-a", approach: standard}
---
- id: weighted
  prompt: Name the capital of France.
  should:
    - {fn: icontains, arg: paris, weight: 3}
    - {fn: icontains, arg: berlin, weight: 1}
    - Names the capital correctly.
"""


def test_the_score_is_the_runs_weighted_score_and_judges_are_only_asked_when_ticked(client, make_blueprint,
                                                                                    fake_provider):
    fake_provider.script(judge_rules())
    make_blueprint(WEIGHTED, slug="weighted")

    without = client.post("/blueprints/weighted/try/", {"prompt": "weighted", "response": "Paris."}, **htmx()).text

    # Function points only, weighted 3:1 as a run weights them (an unweighted mean would say 0.50).
    assert '<strong class="score">0.75</strong>' in without
    assert "Judged points skipped: not asked" in without and not fake_provider.requests()

    asked = client.post("/blueprints/weighted/try/", {"prompt": "weighted", "response": "Paris.", "with_judges": "on"},
                        **htmx()).text

    assert [r["model"] for r in fake_provider.requests()] == ["judge-a"]
    assert "Yes, fully." in asked and "judge-a" in asked  # the judge's reflection, by judge
    # (3 x 1 + 1 x 0 + 1 x 1) / 5: the judged point counts with weight 1, as in a run.
    assert '<strong class="score">0.80</strong>' in asked


def test_a_judge_that_fails_is_shown_failed_never_as_a_score(client, make_blueprint, fake_provider):
    make_blueprint(WEIGHTED.replace("openai:judge-a", "openai:judge-always-401"), slug="weighted")

    page = client.post("/blueprints/weighted/try/", {"prompt": "weighted", "response": "Paris.", "with_judges": "on"},
                       **htmx()).text

    assert "failed: 401" in page
    assert 'class="point trial-not-evaluated"' in page
    # As in a run: a response whose every judge call failed is not evaluated, and says why.
    assert '<strong class="score">not evaluated</strong>' in page and "every judge call failed" in page


def test_without_a_judge_key_the_judged_points_are_skipped_with_the_reason(client, make_blueprint, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_blueprint(WEIGHTED, slug="weighted")

    page = client.post("/blueprints/weighted/try/", {"prompt": "weighted", "response": "Paris.", "with_judges": "on"},
                       **htmx()).text

    assert "Judged points skipped: no judge can be asked" in page and "OPENAI_API_KEY" in page


SHOULD_NOT_JUDGED = """\
title: Two judges
models: [openai:cand]
evaluationConfig:
  llm-coverage:
    judges:
      - {id: judge-a, model: "openai:judge-a", approach: standard}
      - {id: judge-b, model: "openai:judge-b", approach: standard}
---
- id: only
  prompt: Name the capital of France.
  should:
    - $icontains: paris
  should_not:
    - Names a city other than Paris.
"""


def test_a_skipped_judged_point_says_it_was_not_asked_and_its_group_has_no_mean(client, make_blueprint,
                                                                                fake_provider):
    make_blueprint(SHOULD_NOT_JUDGED, slug="two-judges")
    page = client.post("/blueprints/two-judges/try/", {"prompt": "only", "response": "Paris."}, **htmx()).text
    assert "no judges are configured" not in page  # the blueprint names two
    assert "Not scored: not asked" in page
    # The should-not group's only point was skipped: no mean for it (the required group has one).
    assert page.count("weighted mean") == 1 and "weighted mean 1.00" in page
    assert not fake_provider.requests()
