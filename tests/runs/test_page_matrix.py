"""A page of a finished run's cells is read without building every cell (issue 37): ``records.page_matrix`` reads
the page's prompts' rows and the whole run's columns, means and pass counts from the stored aggregates
(``engine.aggregates.summaries_of``). Whatever it shows must be what the whole matrix shows, after every change
people make to a finished run: an override, an annotation, a re-run of one response, a retry of what failed, a
cancel. Each test changes a run, then holds the page matrix to the matrix built from every row, and the run page
a new web process serves (page matrix) to the one it serves once the whole matrix is kept."""

from __future__ import annotations

import re

import pytest

from runs import actions
from runs.engine.aggregates import summaries_of, variant_intervals
from runs.grid import PAGE_SIZE as GRID_PAGE_SIZE
from runs.heatmap import HEATMAP_PAGE_SIZE
from runs.models import Annotation, PointAssessment, Response, Run
from runs.records import forget_matrix, kept_matrices, matrix_size, page_matrix, run_matrix
from runs.spec import parsed_blueprint
from tests.web.run_support import make_blueprint, trials_blueprint_text

pytestmark = pytest.mark.django_db(transaction=True)

PROMPTS = HEATMAP_PAGE_SIZE + 12


def blueprint_text(prompts: int = PROMPTS) -> str:
    return trials_blueprint_text(prompts, title="Pages")


@pytest.fixture
def run():
    from runs import start as run_start

    made = run_start.start_run(make_blueprint(blueprint_text(), slug="pages"), fresh=True)
    made.refresh_from_db()
    assert made.is_finished, made.status
    return made


def stored_variants(run: Run):
    return Run.objects.get(pk=run.pk).aggregates["variants"]


def cell_figures(cell):
    if cell is None:
        return None
    return (cell.prompt_id, cell.variant_id, cell.shown, cell.state, cell.pass_state, cell.response_id, cell.k,
            cell.overridden, cell.thumbs, cell.reason, cell.outcome.to_dict(),
            [(t.response_id, t.trial, t.score, t.status, t.verdict) for t in cell.trials])


def assert_page_matrix_is_the_whole_ones(run: Run) -> None:
    run = Run.objects.get(pk=run.pk)
    prompts = parsed_blueprint(run.revision).prompts
    forget_matrix()
    stored = summaries_of(Run.objects.get(pk=run.pk).aggregates, len(prompts))
    assert stored is not None and stored.cells_of_prompts is not None  # the fast path is the one taken
    pages = [list(range(start, min(start + HEATMAP_PAGE_SIZE, len(prompts))))
             for start in range(0, len(prompts), HEATMAP_PAGE_SIZE)]
    fast = [page_matrix(run, prompts, indices) for indices in pages]
    assert not any(m.whole for m in fast) and kept_matrices()[0] == len(pages)  # nothing built whole; pages kept
    assert page_matrix(run, prompts, pages[0]) is fast[0]
    whole = run_matrix(run, prompts)
    assert kept_matrices()[0] == 1  # the whole matrix, in place of its pages
    assert whole.whole
    for matrix, indices in zip(fast, pages):
        assert matrix.variants == whole.variants
        assert matrix.summaries == whole.summaries
        assert [matrix.passes(v) for v in whole.variants] == [whole.passes(v) for v in whole.variants]
        assert variant_intervals(matrix) == variant_intervals(whole)
        assert {k[0] for k in matrix.cells} == set(indices)
        for index in indices:
            assert [cell_figures(c) for c in matrix.row(index)] == [cell_figures(c) for c in whole.row(index)]
            assert matrix.row_mean(index) == whole.row_mean(index)
    # Kept now: the next page is the whole matrix's, the very object.
    assert page_matrix(run, prompts, pages[0]) is whole
    for matrix in fast:
        assert matrix.prompts_with_cells() == whole.prompts_with_cells()


def page_html(client, url: str) -> str:
    html = client.get(url).content.decode()
    return re.sub(r'csrfmiddlewaretoken" value="[^"]+"|"X-CSRFToken": "[^"]+"', "", html)


def assert_run_page_is_the_whole_ones(client, run: Run) -> None:
    """The run page and the grid's plain view, served by a process that keeps nothing of the run (a page matrix)
    and by one that keeps its whole matrix, on every page: the same HTML."""
    prompts = len(parsed_blueprint(run.revision).prompts)
    views = [(f"/runs/{run.pk}/", HEATMAP_PAGE_SIZE), (f"/runs/{run.pk}/results", GRID_PAGE_SIZE)]
    for url, size in views:
        for page in range(1, -(-prompts // size) + 1):
            forget_matrix()
            first = page_html(client, f"{url}?page={page}")
            whole = run_matrix(Run.objects.get(pk=run.pk), parsed_blueprint(run.revision).prompts)
            assert kept_matrices() == (1, matrix_size(whole))
            if prompts > size:  # served from the page's rows alone: what it kept is smaller than the whole matrix
                forget_matrix()
                page_html(client, f"{url}?page={page}")
                assert kept_matrices()[1] < matrix_size(whole)
                run_matrix(Run.objects.get(pk=run.pk), parsed_blueprint(run.revision).prompts)
            assert page_html(client, f"{url}?page={page}") == first


def test_a_finished_runs_page_matrix_is_its_whole_matrixs(client, run):
    states = {c.pass_state for c in run_matrix(run, parsed_blueprint(run.revision).prompts).cells.values()}
    assert {"pass", "fail", "no-threshold"} <= states
    assert_page_matrix_is_the_whole_ones(run)
    assert_run_page_is_the_whole_ones(client, run)


def test_after_an_override_and_an_annotation_the_page_matrix_follows(client, run):
    point = PointAssessment.objects.filter(response__run=run, response__prompt_index=HEATMAP_PAGE_SIZE + 3,
                                           response__variant_id__contains="fixtures:b", response__trial=1).first()
    outcome = actions.override(point, 0.0, reason="reads wrong", who="me")
    assert outcome.after != outcome.before
    response = Response.objects.filter(run=run, prompt_index=4).first()
    actions.annotate(response, thumbs="down", comment="too short", who="me")
    assert Annotation.objects.filter(response=response).exists()
    assert_page_matrix_is_the_whole_ones(run)
    assert_run_page_is_the_whole_ones(client, run)


def test_after_a_rerun_of_one_response_the_page_matrix_follows(client, run):
    response = Response.objects.filter(run=run, prompt_index=7, variant_id__contains="fixtures:b").first()
    actions.rerun(Run.objects.get(pk=run.pk), response)
    run.refresh_from_db()
    assert run.is_finished, run.status
    assert_page_matrix_is_the_whole_ones(run)
    assert_run_page_is_the_whole_ones(client, run)


def test_after_a_failure_and_its_retry_the_page_matrix_follows(client, fake_provider):
    from runs import start as run_start

    from .test_run_lifecycle import corpus_blueprint, script_candidates

    script_candidates(fake_provider)
    # The first call for this model is refused (401, not retried); the retry's call answers.
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:flaky-fail-401-then-ok"],
                              judges=["openai:judge-a"])
    run.refresh_from_db()
    assert run.is_finished and sum(v["failed"] for v in stored_variants(run).values()) == 1
    assert_page_matrix_is_the_whole_ones(run)
    assert_run_page_is_the_whole_ones(client, run)
    actions.retry_failed(Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    assert run.is_finished and sum(v["failed"] for v in stored_variants(run).values()) == 0
    assert_page_matrix_is_the_whole_ones(run)
    assert_run_page_is_the_whole_ones(client, run)


def test_after_a_cancel_the_page_matrix_counts_what_never_ran(client, run):
    # A run cancelled with items waiting: its stored figures count them "not run", and so does its page matrix.
    Response.objects.filter(run=run, prompt_index__in=[2, HEATMAP_PAGE_SIZE + 1]).update(status="pending", score=None)
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    from runs.records import finish_run

    assert finish_run(run.pk, "cancelled")
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert sum(v["notRun"] for v in stored_variants(run).values()) == 4
    assert_page_matrix_is_the_whole_ones(run)
    assert_run_page_is_the_whole_ones(client, run)


def test_a_run_at_work_or_stored_without_the_summaries_builds_the_whole_matrix(run):
    prompts = parsed_blueprint(run.revision).prompts
    forget_matrix()
    # Stored before the pass counts were (or by an import): the page builds the whole matrix.
    old = {"variants": {v: {k: x for k, x in figures.items() if k not in ("passes", "interval")}
                        for v, figures in stored_variants(run).items()}}
    assert summaries_of(old, len(prompts)) is None
    assert page_matrix(run, prompts, [0, 1], old).whole
    # At work again (a retry, a resume): its stored figures are last time's; the page builds the whole matrix.
    forget_matrix()
    Run.objects.filter(pk=run.pk).update(status="running")
    working = Run.objects.get(pk=run.pk)
    assert page_matrix(working, prompts, [0, 1]).whole
