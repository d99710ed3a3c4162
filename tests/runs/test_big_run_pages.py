"""A big run's pages stay pages: the run page's 'Verdicts and trials' shows the prompts of its heatmap's page (a
run of 2,000 prompts with trials rendered all 20,000 cells on every view: 16 s), and its pager reaches the rest;
the cells it shows are the matrix's (pages read the engine's values)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from blueprints.models import Blueprint
from runs.heatmap import HEATMAP_PAGE_SIZE
from runs.models import Response, Run
from runs.records import forget_matrix, run_matrix
from runs.spec import parsed_blueprint

pytestmark = pytest.mark.django_db

MODELS = ["openai:model-a", "openai:model-b"]
PROMPTS = HEATMAP_PAGE_SIZE + 30


@pytest.fixture
def run():
    text = ("title: Big\nmodels: [" + ", ".join(MODELS) + "]\n---\n" + "".join(
        f"- id: p{n:03d}\n  prompt: Question {n}?\n  trials: 2\n  should:\n    - $contains: fine\n"
        for n in range(PROMPTS)))
    blueprint = Blueprint.objects.create(slug="big", title="Big")
    revision, _ = blueprint.save_revision(text)
    now = timezone.now()
    made = Run.objects.create(revision=revision, blueprint=blueprint, label="x", status="done",
                              resolved_models=list(MODELS), items_total=PROMPTS * 4, items_done=PROMPTS * 4,
                              started_at=now, finished_at=now)
    Response.objects.bulk_create([
        Response(run=made, prompt_id=f"p{n:03d}", prompt_index=n, variant_id=m, model_id=m, trial=t, status="done",
                 score=(n % 4) / 4 if t == 0 else 1.0, judged_score=(n % 4) / 4 if t == 0 else 1.0, text="fine",
                 final_text="fine", finished_at=now)
        for n in range(PROMPTS) for m in MODELS for t in range(2)])
    forget_matrix(made.pk)
    return made


def verdict_rows(html: str) -> dict[str, str]:
    table = html.split('<table class="verdicts-table', 1)[1].split("</table>", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r'<th scope="row"><code>(p\d+)</code></th>(.*?)</tr>',
                                                         table, re.S)}


def test_the_run_page_shows_the_verdicts_of_its_heatmap_page_and_pages_to_the_rest(client, run):
    first = client.get(f"/runs/{run.pk}/").content.decode()
    rows = verdict_rows(first)
    assert list(rows) == [f"p{n:03d}" for n in range(HEATMAP_PAGE_SIZE)]
    assert f"Prompts 1–{HEATMAP_PAGE_SIZE} of {PROMPTS}" in first and f"?page=2#verdicts-heading" in first
    second = client.get(f"/runs/{run.pk}/?page=2").content.decode()
    assert list(verdict_rows(second)) == [f"p{n:03d}" for n in range(HEATMAP_PAGE_SIZE, PROMPTS)]
    assert "?page=1#verdicts-heading" in second and "Next prompts →</a>" not in second.split("verdicts-heading")[-1]
    # Each cell shows the matrix's score for it (mean of its two trials).
    matrix = run_matrix(run, parsed_blueprint(run.revision).prompts)
    for prompt_id, row in list(verdict_rows(second).items())[:5]:
        index = int(prompt_id[1:])
        shown = re.findall(r'score-chip[^>]*>([\d.]+)<', row)
        assert shown == [f"{matrix.cell(index, v).shown:.2f}" for v in matrix.variants]


@pytest.mark.parametrize("page", [1, 2, 9])
def test_the_grids_plain_view_builds_its_page_alone_and_shows_what_the_whole_grid_shows(run, page):
    from runs import grid

    spec = parsed_blueprint(run.revision)
    query = grid.GridQuery(page=page)
    fast = grid.build_grid(run, spec, query, page_only=True)
    whole = grid.build_grid(run, spec, query)
    assert (fast.matching, fast.cells_matching, fast.pages) == (whole.matching, whole.cells_matching, whole.pages)
    assert [r.index for r in fast.rows] == [r.index for r in whole.rows] and fast.rows
    assert [r.cells_html for r in fast.rows] == [r.cells_html for r in whole.rows]
    assert [m.mean for m in fast.models] == [m.mean for m in whole.models]
