"""The compare page of two finished runs reads what it needs of each run's matrix from the form stored with the
run's figures (``records.store_cell_figures``, ``engine.matrix.cell_figures``) instead of building both whole
matrices (issue 37). Whatever it shows must be what the whole matrices give, after every change people make to a
finished run: an override, an annotation, a re-run of one response, a retry of what failed, a cancel. Each test
changes a run, then holds the comparison (its JSON, its changes, its bounds) and the compare page read from the
stored forms to those built from the whole matrices."""

from __future__ import annotations

import dataclasses
import re

import pytest

from runs import actions
from runs import compare as run_compare
from runs.engine.bounds import matrix_bounds
from runs.engine.matrix import cell_figures, cell_figures_json, cell_figures_of
from runs.models import Annotation, PointAssessment, Response, Run, RunCells
from runs.records import bump_results, cell_figures_for, critical_failed, forget_matrix, kept_matrices, run_matrix
from runs.spec import parsed_blueprint
from tests.web.run_support import make_blueprint, trials_blueprint_text

pytestmark = pytest.mark.django_db(transaction=True)

PROMPTS = 14


def blueprint_text(prompts: int = PROMPTS) -> str:
    return trials_blueprint_text(prompts, title="Compare cells", should_not=True)


@pytest.fixture
def runs():
    """A baseline and a later run of one blueprint, both finished."""
    from runs import start as run_start

    blueprint = make_blueprint(blueprint_text(), slug="compare-cells")
    made = []
    for _ in range(2):
        run = run_start.start_run(blueprint, fresh=True)
        run.refresh_from_db()
        assert run.is_finished, run.status
        made.append(run)
    return made[1], made[0]


def page_html(client, url: str) -> str:
    html = client.get(url).content.decode()
    return re.sub(r'csrfmiddlewaretoken" value="[^"]+"|"X-CSRFToken": "[^"]+"', "", html)


def figures_of(run: Run, base: Run):
    """Everything the comparison says: its JSON, every cell's change, the listed ones, both runs' bounds."""
    result = run_compare.compare_with_base(run, base)
    return (result.to_dict(), [dataclasses.astuple(c) for c in result.changes],
            [dataclasses.astuple(c) for c in result.listed], run_compare.run_bounds(run), run_compare.run_bounds(base))


def assert_compare_is_the_whole_matrices(client, run: Run, base: Run, *, stored: bool = True) -> None:
    """The comparison and the compare page from a process that keeps nothing (``stored``: read from the stored
    forms, no matrix built; else the matrices are built) and from one that keeps both whole matrices: the same."""
    run, base = Run.objects.get(pk=run.pk), Run.objects.get(pk=base.pk)
    url = f"/runs/{run.pk}/compare?with={base.pk}"
    for r in (run, base):  # what was stored is what the engine gives of the whole matrix, to the bit
        prompts = parsed_blueprint(r.revision).prompts
        matrix = run_matrix(r, prompts)
        whole = cell_figures(matrix, matrix_bounds(matrix, critical_failed=critical_failed(r, prompts)))
        row = RunCells.objects.filter(run=r).first()
        assert row is not None
        if stored:
            assert row.results_version == r.results_version
            assert cell_figures_of(row.data, prompts) == whole
            assert cell_figures_json(whole) == row.data
    forget_matrix()
    run_compare.forget_robustness()
    first = figures_of(run, base)
    first_html = page_html(client, url)
    assert (kept_matrices()[0] == 0) == stored  # read from the stored forms: no matrix built
    forget_matrix()
    run_compare.forget_robustness()
    for r in (run, base):
        run_matrix(r, parsed_blueprint(r.revision).prompts)
    assert kept_matrices()[0] == 2
    assert figures_of(run, base) == first
    assert page_html(client, url) == first_html


def test_two_finished_runs_compare_from_their_stored_cells(client, runs):
    run, base = runs
    # ``a``'s second trial of a prompt with a pass mark fails now: its trials disagree (pass@k is not pass^k).
    point = PointAssessment.objects.filter(response__run=run, response__prompt_index=11,
                                           response__variant_id__contains="fixtures:a", response__trial=1).first()
    outcome = actions.override(point, 0.0, reason="reads wrong", who="me")
    assert outcome.after != outcome.before
    assert_compare_is_the_whole_matrices(client, run, base)
    trials = cell_figures_for(Run.objects.get(pk=run.pk), parsed_blueprint(run.revision).prompts).trials
    assert any(t.flaky_cells and t.pass_at_k != t.pass_hat_k for t in trials.values())
    result = run_compare.compare_with_base(Run.objects.get(pk=run.pk), Run.objects.get(pk=base.pk))
    assert any(c.delta for c in result.changes)  # the override moved a cell
    assert any(p.trials_a is not None and p.trials_a.cells for p in result.pairs)  # trials figures are compared
    assert any(b.n for b in run_compare.run_bounds(run).values())  # and deal-breaker bounds


def test_after_an_annotation_the_stored_form_is_still_read(client, runs):
    """An annotation moves the run's version (the grid flags the cell) but no figure a comparison reads: the stored
    form moves with it, and the next comparison reads it instead of building both matrices."""
    run, base = runs
    response = Response.objects.filter(run=run, prompt_index=4).first()
    actions.annotate(response, thumbs="down", comment="too short", who="me")
    assert Annotation.objects.filter(response=response).exists()
    run.refresh_from_db()
    assert RunCells.objects.get(run=run).results_version == run.results_version
    assert_compare_is_the_whole_matrices(client, run, base)


def test_an_annotation_leaves_a_stale_form_stale(client, runs):
    run, base = runs
    bump_results(run.pk)  # something changed that the stored form does not know of
    response = Response.objects.filter(run=run, prompt_index=4).first()
    actions.annotate(response, thumbs="up", comment="", who="me")
    run.refresh_from_db()
    assert RunCells.objects.get(run=run).results_version != run.results_version
    assert_compare_is_the_whole_matrices(client, run, base, stored=False)


def test_after_a_rerun_of_one_response_the_stored_cells_follow(client, runs):
    run, base = runs
    response = Response.objects.filter(run=base, prompt_index=7, variant_id__contains="fixtures:b").first()
    actions.rerun(Run.objects.get(pk=base.pk), response)
    base.refresh_from_db()
    assert base.is_finished, base.status
    assert_compare_is_the_whole_matrices(client, run, base)


def test_after_a_failure_and_its_retry_the_stored_cells_follow(client, fake_provider):
    from runs import start as run_start

    from .test_run_lifecycle import corpus_blueprint, script_candidates

    script_candidates(fake_provider)
    # The first call for this model is refused (401, not retried); later calls answer.
    models = ["openai:cand-a", "openai:flaky-fail-401-then-ok"]
    base = run_start.start_run(corpus_blueprint(), models=models, judges=["openai:judge-a"])
    run = run_start.start_run(corpus_blueprint(), models=models, judges=["openai:judge-a"])
    base.refresh_from_db()
    run.refresh_from_db()
    assert base.is_finished and run.is_finished
    assert sum(v["failed"] for v in base.aggregates["variants"].values()) == 1
    assert_compare_is_the_whole_matrices(client, run, base)
    actions.retry_failed(Run.objects.get(pk=base.pk))
    base.refresh_from_db()
    assert base.is_finished and sum(v["failed"] for v in base.aggregates["variants"].values()) == 0
    assert_compare_is_the_whole_matrices(client, run, base)


def test_after_a_cancel_the_stored_cells_follow(client, runs):
    from runs.records import finish_run

    run, base = runs
    Response.objects.filter(run=run, prompt_index__in=[2, 9]).update(status="pending", score=None)
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    assert finish_run(run.pk, "cancelled")
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert_compare_is_the_whole_matrices(client, run, base)
    result = run_compare.compare_with_base(run, Run.objects.get(pk=base.pk))
    assert sum(1 for c in result.changes if c.after is None and c.before is not None) == 4


def test_a_run_at_work_or_a_moved_version_builds_the_matrix(runs):
    run, _ = runs
    prompts = parsed_blueprint(run.revision).prompts
    forget_matrix()
    assert cell_figures_for(run, prompts) is not None and kept_matrices()[0] == 0
    bump_results(run.pk)  # something changed that the stored form does not know of
    forget_matrix()
    moved = Run.objects.get(pk=run.pk)
    cell_figures_for(moved, prompts)
    assert kept_matrices()[0] == 1
    forget_matrix()
    Run.objects.filter(pk=run.pk).update(status="running")
    working = Run.objects.get(pk=run.pk)
    RunCells.objects.filter(run=run).update(results_version=working.results_version)  # even a current-looking one
    cell_figures_for(working, prompts)
    assert kept_matrices()[0] == 1
    # A stored form of another shape is not read.
    assert cell_figures_of({**RunCells.objects.get(run=run).data, "shape": 0}, prompts) is None
    assert cell_figures_of(None, prompts) is None


@pytest.mark.services
def test_the_stored_form_comes_back_from_postgresqls_jsonb_to_the_bit(database_url):
    """jsonb keeps numbers as decimals and an object's keys in an order of its own: the figures read back are still
    the same floats, variants and bounds in the same order."""
    import json
    from types import SimpleNamespace

    import psycopg

    from runs.engine import jsonfast
    from runs.engine.matrix import CellFigures
    from runs.engine.scoring import round2
    from runs.engine.stats import TrialFigures

    prompts = [SimpleNamespace(id=f"p{i}") for i in range(4)]  # a cell at position 4 has no prompt: its id is "4"
    scores = [1 / 3, 1e-05, 0.1 + 0.2, None, 2 / 3, 0.7000000000000001, 5e-324, 1.0]
    cells = [(i % 5, prompts[i % 5].id if i % 5 < 4 else str(i % 5), ("zeta", "alpha")[i % 2], s,
              None if s is None else round2(s), None if s is None else 1000 + i) for i, s in enumerate(scores)]
    trials = {"zeta": TrialFigures(0, None, None, None), "alpha": TrialFigures(3, 1 / 3, 1e-05, 2 / 3, 2)}
    figures = CellFigures(["zeta", "alpha"], cells, trials, {"zeta": (3, 17), "alpha": (0, 2)})
    with psycopg.connect(database_url) as connection:
        back = connection.execute("SELECT %s::jsonb", [json.dumps(cell_figures_json(figures))]).fetchone()[0]
        # As ``records.cell_figures_for`` reads it: the jsonb as text, decoded by orjson.
        text = connection.execute("SELECT %s::jsonb::text", [json.dumps(cell_figures_json(figures))]).fetchone()[0]
    assert cell_figures_of(back, prompts) == figures
    assert cell_figures_of(jsonfast.loads(text), prompts) == figures
    back = cell_figures_of(back, prompts)
    assert list(back.bounds) == ["zeta", "alpha"] and list(back.trials) == ["zeta", "alpha"]
