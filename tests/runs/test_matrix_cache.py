"""The results matrices a web process keeps are bounded by their estimated size (EVALSITE_MATRIX_CACHE_MB).

The estimate (``records.matrix_size``) is held to what tracemalloc measures for a matrix built as the pages build
it (records read as ``response_records`` reads them, the heatmap's cell HTML kept with it), so a bound in MB means
MB; the cache keeps the most recently used matrices that fit, never one larger than the whole bound, and a kept
matrix is the very one the engine built (pages read its values).
"""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest
from django.utils import timezone

from blueprints.models import Blueprint
from blueprints.spec import parse_blueprint
from runs import heatmap as heat_map
from runs.engine.matrix import ResponseRecord, build_matrix
from runs.models import Response, Run
from runs.records import forget_matrix, kept_matrices, matrix_size, response_records, run_matrix
from runs.spec import parsed_blueprint

MODELS = [f"openai:model-{i}" for i in range(4)]


def blueprint_text(prompts: int, trials: int = 1) -> str:
    return ("title: Cache\nmodels: [" + ", ".join(MODELS) + "]\n---\n" + "".join(
        f"- id: q{n}\n  prompt: Question {n}?\n  trials: {trials}\n  should:\n    - $contains: fine\n"
        for n in range(prompts)))


def measured_bytes(prompts: int, trials: int) -> tuple[int, object]:
    """What tracemalloc counts for a matrix built from records as ``response_records`` makes them (strings as
    the database hands them back: a new object per row), with every row's heatmap HTML kept."""
    spec = parse_blueprint(blueprint_text(prompts, trials)).blueprint
    rng = random.Random(3)
    rows = [(10_000 + len(MODELS) * trials * n + trials * v + t, n, "".join(["openai:model-", str(v)]), t,
             "".join(["do", "ne"]), round(rng.random(), 2), rng.uniform(100, 3000), 40, 60, 0.0001, False, False,
             "", "", "") for n in range(prompts) for v in range(len(MODELS)) for t in range(trials)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        shared: dict[str, str] = {}
        one = shared.setdefault
        no_usage: dict = {}
        records = [ResponseRecord(prompt_index=n, variant_id=one(v, v), trial=t, score=score, status=one(s, s),
                                  response_id=pk, latency_ms=latency, input_tokens=i, output_tokens=o, cost_usd=c,
                                  judge_usage=no_usage, reason=one(r, r))
                   for pk, n, v, t, s, score, latency, i, o, c, _, _, _, _, r in rows]
        matrix = build_matrix(records, spec.prompts)
        del records, shared
        heat_map.with_cells_html(heat_map.rows(matrix, list(range(prompts))), lambda pk: f"/runs/1/responses/{pk}/",
                                 matrix.__dict__.setdefault("_heatmap_html", {}))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, matrix


@pytest.mark.parametrize("trials", [1, 5])
def test_a_matrix_size_estimate_is_within_a_fifth_of_what_it_takes(trials):
    taken, matrix = measured_bytes(400, trials)
    estimate = matrix_size(matrix)
    assert 0.8 * taken <= estimate <= 1.25 * taken, (estimate, taken)


def make_run(blueprint: Blueprint, revision, prompts: int) -> Run:
    now = timezone.now()
    run = Run.objects.create(revision=revision, blueprint=blueprint, label="x", status="done",
                             resolved_models=list(MODELS), items_total=prompts * len(MODELS),
                             items_done=prompts * len(MODELS), started_at=now, finished_at=now)
    Response.objects.bulk_create([
        Response(run=run, prompt_id=f"q{n}", prompt_index=n, variant_id=m, model_id=m, status="done",
                 score=(n % 5) / 4, judged_score=(n % 5) / 4, text="yes", final_text="yes", finished_at=now)
        for n in range(prompts) for m in MODELS])
    return run


@pytest.mark.django_db
def test_kept_matrices_stay_within_the_bound_most_recently_used_kept(settings):
    blueprint = Blueprint.objects.create(slug="cache", title="Cache")
    revision, _ = blueprint.save_revision(blueprint_text(300))
    prompts = parsed_blueprint(revision).prompts
    runs = [make_run(blueprint, revision, 300) for _ in range(4)]
    forget_matrix()
    one = matrix_size(run_matrix(runs[0], prompts))
    forget_matrix()
    settings.EVALSITE_MATRIX_CACHE_MB = 2.5 * one / 2**20  # room for two of them, not three
    built = [run_matrix(run, prompts) for run in runs]
    count, size = kept_matrices()
    assert count == 2 and size <= settings.EVALSITE_MATRIX_CACHE_MB * 2**20
    assert run_matrix(runs[3], prompts) is built[3] and run_matrix(runs[2], prompts) is built[2]  # kept
    again = run_matrix(runs[0], prompts)  # dropped: built again, the same values
    assert again is not built[0]
    assert {k: c.shown for k, c in again.cells.items()} == {k: c.shown for k, c in built[0].cells.items()}
    assert again.summaries == built[0].summaries
    # runs[0] now pushed out the least recently used (runs[3]), and runs[2] is kept
    assert run_matrix(runs[2], prompts) is built[2]
    assert kept_matrices()[0] == 2


@pytest.mark.django_db
def test_a_matrix_larger_than_the_bound_is_not_kept_and_zero_keeps_none(settings):
    blueprint = Blueprint.objects.create(slug="cache-big", title="Cache")
    revision, _ = blueprint.save_revision(blueprint_text(50))
    prompts = parsed_blueprint(revision).prompts
    run = make_run(blueprint, revision, 50)
    forget_matrix()
    settings.EVALSITE_MATRIX_CACHE_MB = 0
    first = run_matrix(run, prompts)
    assert kept_matrices() == (0, 0)
    assert run_matrix(run, prompts) is not first
    settings.EVALSITE_MATRIX_CACHE_MB = 100
    kept = run_matrix(run, prompts)
    assert run_matrix(run, prompts) is kept and kept_matrices()[0] == 1
    forget_matrix()


@pytest.mark.django_db
def test_records_share_their_repeated_strings():
    blueprint = Blueprint.objects.create(slug="cache-strings", title="Cache")
    revision, _ = blueprint.save_revision(blueprint_text(20))
    run = make_run(blueprint, revision, 20)
    records = response_records(run.pk)
    assert len({id(r.variant_id) for r in records}) == len(MODELS)
    assert len({id(r.status) for r in records}) == 1
