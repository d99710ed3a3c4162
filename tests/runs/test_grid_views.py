"""The results grid's filtered and sorted views are read off the matrix's cells (issue 37: the view "below 0.9,
lowest first" of a 10,000-response run built a row and a cell object for every cell on every request). What they
show must be what building every row showed: the same prompts in the same order (ties too), the same cells kept,
dimmed and marked below, the same counts and pages, with a search, on a filter matching nothing (it shows
nothing), at the paging edges, and after the run's results change. ``reference`` below is the grid's previous
implementation (every row built, then marked, kept and sorted), kept here to hold the new one to it."""

from __future__ import annotations

import math
import threading
import time

import pytest
from django.utils import timezone

from blueprints.models import Blueprint
from runs import grid
from runs.engine import stats
from runs.models import Annotation, Response, Run
from runs.records import bump_results, forget_matrix, run_matrix
from runs.spec import parsed_blueprint

pytestmark = pytest.mark.django_db

MODELS = ["openai:model-a", "openai:model-b", "openai:model-c"]
PROMPTS = 2 * grid.PAGE_SIZE + 17  # three pages when every prompt is listed
# Few values, so rows tie on their mean, spread, latency and cost; 0.899 is shown 0.90 (not below a 0.9 cut).
SCORES = [0.25, 0.5, 0.899, 0.9, 1.0, 0.5, None]


def blueprint_text() -> str:
    lines = ["title: Views", "models: [" + ", ".join(MODELS) + "]", "---"]
    for n in range(PROMPTS):
        lines += [f"- id: p{n:03d}", f"  prompt: Question {n}{' about needles' if n % 23 == 5 else ''}?",
                  "  should:", "    - $contains: fine", *(["  threshold: 0.8"] if n % 3 == 0 else [])]
    return "\n".join(lines) + "\n"


def response(run: Run, n: int, m: int, trial: int, now) -> Response | None:
    """Prompt ``n``, model ``m``: scored, failed, not evaluated or waiting, flags and figures that repeat."""
    k = n * len(MODELS) + m
    if n == PROMPTS - 1 or (n % 11 == 4 and m == 1):
        return None  # a prompt with no cell at all; a model with no cell for some prompts
    score = SCORES[(k + trial) % len(SCORES)]
    status = "failed" if k % 17 == 3 else "pending" if k % 19 == 7 else "done"
    if status != "done":
        score = None
    verdict = "" if score is None else "pass" if score >= 0.8 else "borderline" if score >= 0.6 else "fail"
    return Response(run=run, prompt_id=f"p{n:03d}", prompt_index=n, variant_id=MODELS[m], model_id=MODELS[m],
                    trial=trial, status=status, score=score, judged_score=score, verdict=verdict,
                    text=f"answer {k}{' with a needle' if k % 13 == 0 else ''}", final_text="answer",
                    latency_ms=[100.0, 250.0, None][k % 3], cost_usd=[0.002, None, 0.001, 0.002][k % 4],
                    error="boom" if status == "failed" else "",
                    not_evaluated_reason="no judge" if status == "done" and score is None else "",
                    violated_should_not=k % 7 == 2, disagreement=k % 5 == 1, finished_at=now)


@pytest.fixture(params=["done", "cancelled"])
def run(request):
    blueprint = Blueprint.objects.create(slug="views", title="Views")
    revision, _ = blueprint.save_revision(blueprint_text())
    now = timezone.now()
    made = Run.objects.create(revision=revision, blueprint=blueprint, label="x", status=request.param,
                              resolved_models=list(MODELS), items_total=1, items_done=1, started_at=now,
                              finished_at=now)
    rows = [response(made, n, m, t, now) for n in range(PROMPTS) for m in range(len(MODELS))
            for t in range(2 if n % 4 == 1 else 1)]
    Response.objects.bulk_create([r for r in rows if r is not None])
    forget_matrix(made.pk)
    return made


def reference(matrix, query: grid.GridQuery, searched: dict | None = None):
    """The previous build_grid's rows: one for every prompt, each cell marked, the matching ones sorted."""
    t = query.threshold
    keep = {
        "all": lambda c: True,
        "failures": lambda c: c.score is not None and c.score < t,
        "not-passed": lambda c: c.pass_state == "fail",
        "errors": lambda c: c.state == "failed",
        "not-run": lambda c: c.state == "not-run",
        "not-evaluated": lambda c: c.state == "not-evaluated",
        "disagree": lambda c: c.disagreement,
        "should-not": lambda c: c.violated_should_not,
        "overridden": lambda c: c.overridden,
        "thumbs-down": lambda c: c.thumbs == -1,
        "annotated": lambda c: c.thumbs is not None,
    }[query.filter]
    matching, cells_matching = [], 0
    for row in grid.grid_rows(matrix).values():
        for cell in row.cells:
            cell.below = cell.score is not None and cell.score < t
            cell.matches = cell.state != "missing" and keep(cell) and (
                searched is None or row.index in searched["prompts"]
                or any(tr.response_id in searched["responses"] for tr in cell.cell.trials))
        cells_matching += sum(c.matches for c in row.cells)
        if any(c.matches for c in row.cells):
            matching.append(row)
    by = {"score": lambda r: (r.mean is None, r.mean if r.mean is not None else 0, r.index),
          "spread": lambda r: (r.spread is None, -(r.spread or 0.0), r.index),
          "latency": lambda r: (-max((c.latency_ms or 0) for c in r.cells), r.index),
          "cost": lambda r: (-sum((c.cost_usd or 0) for c in r.cells), r.index)}.get(query.sort)
    return (sorted(matching, key=by) if by else matching), cells_matching


def assert_same(run: Run, spec, query: grid.GridQuery, searched: dict | None = None) -> grid.Grid:
    """Every page of the view (and one past the last) as the previous implementation gave it."""
    matrix = run_matrix(run, spec.prompts)
    expected, cells_matching = reference(matrix, query, searched)
    pages = max(1, math.ceil(len(expected) / grid.PAGE_SIZE))
    whole = grid.build_grid(run, spec, query)  # every matching row (the CSV download)
    assert [r.index for r in whole.matching_rows] == [r.index for r in expected]
    assert ([[(c.matches, c.below, c.cell) for c in r.cells] for r in whole.matching_rows]
            == [[(c.matches, c.below, c.cell) for c in r.cells] for r in expected])
    for page in range(1, pages + 2):
        shown = grid.build_grid(run, spec, grid.GridQuery(**{**query.__dict__, "page": page}), page_only=True)
        assert (shown.matching, shown.cells_matching, shown.pages) == (len(expected), cells_matching, pages)
        want = expected[(min(page, pages) - 1) * grid.PAGE_SIZE: min(page, pages) * grid.PAGE_SIZE]
        assert [r.index for r in shown.rows] == [r.index for r in want]
        for mine, theirs in zip(shown.rows, want):  # the HTML: the same cells, kept, dimmed and below alike
            for a, b in zip(mine.cells, theirs.cells):
                b.preview, b.href, b.open_href = a.preview, a.href, a.open_href
            assert mine.cells_html == theirs.cells_html
            assert mine.summary and (mine.mean, mine.spread) == (theirs.mean, theirs.spread)
        assert all(c.href for r in shown.rows for c in r.cells if c.response_id)  # previews and links filled
    return whole


@pytest.mark.parametrize("sort", list(grid.SORTS))
def test_every_filter_and_order_lists_what_building_every_row_listed(run, sort):
    spec = parsed_blueprint(run.revision)
    for flt in grid.FILTERS:
        for threshold in ([0.9, 0.5, 0.0] if flt == "failures" else [0.8]):
            assert_same(run, spec, grid.GridQuery(filter=flt, threshold=threshold, sort=sort))


def test_the_views_cover_ties_and_the_states_they_are_about(run):
    spec = parsed_blueprint(run.revision)
    matrix = run_matrix(run, spec.prompts)
    means = [matrix.row_mean(i) for i in range(PROMPTS)]
    assert len(set(means)) < len(means) // 4  # many rows tie on their mean: blueprint order decides
    below = grid.build_grid(run, spec, grid.GridQuery(filter="failures", threshold=0.9, sort="score"))
    assert below.cells_matching and below.pages > 1
    assert any(c.score == 0.899 for c in matrix.cells.values())  # shown 0.90: not below a 0.9 cut
    assert not any(c.score == 0.9 and c.matches for r in below.matching_rows for c in r.cells)
    states = {c.state for c in matrix.cells.values()}
    assert {"scored", "failed", "not-evaluated"} <= states
    assert ("not-run" if run.status == "cancelled" else "pending") in states


def test_a_search_narrows_the_view_as_it_did(run):
    spec = parsed_blueprint(run.revision)
    searched = {"prompts": {i for i in range(PROMPTS) if i % 23 == 5},
                "responses": set(Response.objects.filter(run=run, text__icontains="needle").values_list("pk",
                                                                                                     flat=True))}
    for query in (grid.GridQuery(q="needle"), grid.GridQuery(q="needle", filter="failures", sort="score"),
                  grid.GridQuery(q="need.e", regex=True, sort="cost"),
                  grid.GridQuery(q="no such words", filter="errors")):
        found = searched if "such" not in query.q else {"prompts": set(), "responses": set()}
        whole = assert_same(run, spec, query, found)
        assert bool(whole.matching) == ("such" not in query.q)


def test_a_filter_matching_nothing_shows_nothing_every_time(client, run):
    spec = parsed_blueprint(run.revision)
    query = grid.GridQuery(filter="thumbs-down", sort="score")
    for _ in range(2):  # the second time from what the matrix keeps: an empty choice is kept as empty
        empty = grid.build_grid(run, spec, query, page_only=True)
        assert (empty.rows, empty.matching, empty.cells_matching, empty.pages) == ([], 0, 0, 1)
    page = client.get(f"/runs/{run.pk}/results?filter=thumbs-down&sort=score&page=3").content.decode()
    assert "0 responses in 0 prompts match" in page and 'class="gcell ' not in page


def test_a_kept_view_follows_the_runs_results(run):
    spec = parsed_blueprint(run.revision)
    query = grid.GridQuery(filter="thumbs-down", sort="latency")
    assert grid.build_grid(run, spec, query, page_only=True).matching == 0
    down = Response.objects.filter(run=run, prompt_index=7).first()
    Annotation.objects.create(response=down, thumbs=-1)
    bump_results(run.pk)  # as the annotation form does: a new results version, a new matrix
    run.refresh_from_db()
    after = grid.build_grid(run, spec, query, page_only=True)
    assert (after.matching, after.cells_matching, [r.index for r in after.rows]) == (1, 1, [7])
    assert_same(run, spec, query)


def test_a_matrix_keeps_a_few_views_only(run):
    spec = parsed_blueprint(run.revision)
    matrix = run_matrix(run, spec.prompts)
    first = grid.matching_prompts(matrix, grid.GridQuery(filter="failures", threshold=0.5))
    assert grid.matching_prompts(matrix, grid.GridQuery(filter="failures", threshold=0.5)) is first
    for step in range(grid.VIEWS_KEPT):
        grid.matching_prompts(matrix, grid.GridQuery(filter="failures", threshold=step / 100))
    again = grid.matching_prompts(matrix, grid.GridQuery(filter="failures", threshold=0.5))
    assert again is not first and again == first  # dropped, the oldest first; worked out again alike


def test_a_cold_matrixs_intervals_are_worked_out_once_while_the_others_wait(run, monkeypatch):
    spec = parsed_blueprint(run.revision)
    matrix = run_matrix(run, spec.prompts)
    real, calls = stats.mean_intervals, []

    def slow(*args, **kwargs):
        calls.append(threading.get_ident())
        time.sleep(0.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(stats, "mean_intervals", slow)
    start, got = threading.Barrier(6), []

    def view():
        start.wait()
        got.append(grid.model_intervals(matrix))

    threads = [threading.Thread(target=view) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(got) == 6 and all(g is got[0] for g in got)
    assert set(got[0]) == set(matrix.variants)
