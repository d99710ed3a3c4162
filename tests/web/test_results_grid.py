"""The results grid: responses' text in the cells, filters and search in the URL, order, per-model figures,
a cell opened in place, and the live poll sending only changed cells. Runs are real, through the worker
path, against the fake LLM server."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from blueprints.importing import import_files
from runs import grid
from runs import start as run_start
from runs.models import PointAssessment, PointOverride, Response, Run

from tests.fakes.pytest_fixtures import FAKE_KEY, fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.runs.conftest import judge_rules
from tests.web.conftest import htmx

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = """title: Grid
models: [openai:good, openai:bad]
---
- id: capital
  prompt: What is the capital of France?
  should:
    - $icontains: paris
    - Names the capital
- id: river
  prompt: Name a long river.
  should:
    - $icontains: nile
"""


@pytest.fixture
def run(fake_provider) -> Run:
    fake_provider.script([
        {"model": "good", "match": "capital", "reply": "Paris is the capital of France."},
        {"model": "good", "match": "river", "reply": "The Nile is the longest river."},
        {"model": "bad", "match": "capital", "reply": "Lyon, I believe."},
        {"model": "bad", "match": "river", "reply": "The Thames <script>alert(1)</script>."},
        *judge_rules(unmet_text="Lyon"),
    ])
    blueprint = import_files([("grid.yml", TEXT, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, judges=["openai:judge"])
    run.refresh_from_db()
    assert run.status == "done"
    return run


def _cells(page: str) -> int:
    return page.count('class="gcell ') - page.count("dim")


def test_the_grid_shows_each_responses_start_escaped_with_per_model_figures(client, run):
    page = client.get(f"/runs/{run.pk}/results").content.decode()

    assert "Paris is the capital of France." in page and "The Nile is the longest river." in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # openai:good scored 1.0 on both prompts, openai:bad 0 on both; the blueprint sets no threshold, so no cell
    # passes or fails (the matrix's one rule): no pass rate, whatever the view's score cut.
    stats = {m.variant_id: m for m in grid.build_grid(run, _spec(run), grid.GridQuery()).models}
    assert (stats["openai:good[temp:0]"].pass_rate, stats["openai:bad[temp:0]"].pass_rate) == (None, None)
    assert page.count("no threshold set") == 2 and "100%" not in page


def test_filters_and_search_live_in_the_url_and_narrow_the_cells(client, run):
    failures = client.get(f"/runs/{run.pk}/results?filter=failures&threshold=0.8").content.decode()
    assert "Lyon, I believe." in failures  # below the threshold: shown
    assert '2 responses in 2 prompts match' in failures

    searched = client.get(f"/runs/{run.pk}/results?q=thames").content.decode()
    assert "1 response in 1 prompt match" in searched

    # A judge's reflection is searched too ("It does not." was said about the Lyon answer).
    by_reflection = client.get(f"/runs/{run.pk}/results?q=It+does+not").content.decode()
    assert "1 response in 1 prompt match" in by_reflection

    regex = client.get(f"/runs/{run.pk}/results?q=^(Paris|The+Nile)&regex=1").content.decode()
    assert "2 responses in 2 prompts match" in regex


def test_a_bad_query_is_explained_and_the_grid_still_answers(client, run):
    page = client.get(f"/runs/{run.pk}/results?filter=nope&threshold=2&q=(unclosed&regex=1&sort=x")
    text = page.content.decode()

    assert page.status_code == 200
    assert "unknown filter" in text and "threshold must be a number from 0 to 1" in text
    assert "regular expression cannot be read" in text and "unknown order" in text


def test_a_catastrophic_regex_is_stopped_not_run_forever(client, run):
    Response.objects.filter(run=run).update(text="a" * 5000 + "!")

    page = client.get(f"/runs/{run.pk}/results?q=(a%2B)%2B$&regex=1")

    assert page.status_code == 200  # each text has a time limit; the page answers


def test_sorting_by_score_puts_the_lowest_prompt_first(run):
    spec = _spec(run)
    Response.objects.filter(run=run, prompt_id="river").update(score=0.1)
    rows = grid.build_grid(run, spec, grid.GridQuery(sort="score")).rows
    assert [r.prompt_id for r in rows] == ["river", "capital"]


def test_the_overridden_filter_finds_overridden_responses(client, run):
    assessment = PointAssessment.objects.filter(response__run=run, response__variant_id__startswith="openai:bad",
                                                response__prompt_id="capital").first()
    PointOverride.objects.create(assessment=assessment, score=1.0, reason="Lyon was a capital once", who="me")

    page = client.get(f"/runs/{run.pk}/results?filter=overridden").content.decode()
    assert "1 response in 1 prompt match" in page


def test_a_cell_opens_in_place_with_the_whole_text_and_every_reflection(client, run):
    response = Response.objects.get(run=run, prompt_id="capital", variant_id__startswith="openai:bad")
    page = client.get(f"/runs/{run.pk}/responses/{response.pk}/cell", **htmx()).content.decode()

    assert "Lyon, I believe." in page and "It does not." in page and "icontains" in page


def test_the_live_poll_sends_only_the_cells_that_changed(client, run):
    since = int((timezone.now().timestamp() - 60) * 1000)
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    Response.objects.filter(run=run).update(finished_at=timezone.now() - timezone.timedelta(hours=1))
    changed = Response.objects.get(run=run, prompt_id="river", variant_id__startswith="openai:good")
    Response.objects.filter(pk=changed.pk).update(finished_at=timezone.now())

    page = client.get(f"/runs/{run.pk}/results?since={since}", **htmx()).content.decode()

    assert page.count("<template><td id=\"cell-") == 2  # the changed prompt's row: its two cells
    assert page.count('hx-swap-oob="outerHTML"') == 3  # and the per-model table, over the whole run
    assert "The Nile is the longest river." in page and "Paris" not in page
    assert 'id="grid-live"' in page and "every 2s" in page
    # Table cells outside a table are dropped by the browser's parser: each travels in a <template>.
    assert page.count("<template><td ") == 2
    # A search in the view applies to the polled cells too: the bad model's Thames cell does not match "longest".
    for q, regex in (("longest", ""), ("\\blongest\\b", "1")):
        page = client.get(f"/runs/{run.pk}/results?q={q}&regex={regex}&since={since}", **htmx()).content.decode()
        cells = re.findall(r'<td id="cell-1-\d" class="([^"]*)"', page)
        assert len(cells) == 2 and sum("dim" in c for c in cells) == 1, cells


def test_a_run_still_working_shows_its_grid_with_the_poll(client, run):
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)

    page = client.get(f"/runs/{run.pk}/results?filter=failures").content.decode()

    assert 'id="grid-live"' in page and f"/runs/{run.pk}/results?filter=failures&amp;since=" in page


def _spec(run):
    from runs.spec import parsed_blueprint

    return parsed_blueprint(run.revision)


def test_a_reviewers_thumbs_show_on_the_cell_and_filter_the_grid(client, run):
    from runs import annotations, overrides

    bad = Response.objects.get(run=run, prompt_id="river", variant_id__startswith="openai:bad")
    good = Response.objects.get(run=run, prompt_id="capital", variant_id__startswith="openai:good")
    annotations.save_annotation(bad, thumbs="down", comment="Not the longest.")
    annotations.save_annotation(good, thumbs="", comment="Fine.")

    down = client.get(f"/runs/{run.pk}/results?filter=thumbs-down").content.decode()
    assert _cells(down) == 1 and "👎" in down
    annotated = client.get(f"/runs/{run.pk}/results?filter=annotated").content.decode()
    assert _cells(annotated) == 2 and "💬" in annotated
