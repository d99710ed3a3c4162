"""Benchmark: server time of the pages across runs, over 100 finished runs of one blueprint (two revisions, 100
prompts x 10 model variants each: 100,000 stored responses), built with bulk rows in a throwaway SQLite database.

Times, with Django's test client (the whole response, templates included): the history page (cold: each run's
summary built from its matrix and stored; then warm), a model page, the models list, the tag leaderboard, the
overview and the history API; and counts each page's queries. Target (issue 27): history and a model page under
300 ms with a bounded number of queries.
Run with `make bench` or `.venv/bin/python tests/bench/bench_across.py`.
"""

import os
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

RUNS = 100
PROMPTS = 100
MODELS = [f"openai:model-{i}" for i in range(10)]
TARGET_MS = 300

HEADER = "title: Across (benchmark)\ntags: [bench]\nmodels: [{models}]\n---\n"
PROMPT = "- id: q{n:03d}\n  prompt: \"Question {n}{extra}: explain a heat pump briefly.\"\n  should:\n    - $icontains: heat\n"


def text(revision: int) -> str:
    return HEADER.format(models=", ".join(MODELS)) + "".join(
        PROMPT.format(n=n, extra=" (reworded)" if revision == 2 and n < 5 else "") for n in range(PROMPTS))


def build():
    from blueprints.models import Blueprint
    from runs.models import Response, Run
    from runs.start import run_label

    blueprint = Blueprint.objects.create(slug="bench-across", title="Across (benchmark)", tags=["bench"])
    first, _ = blueprint.save_revision(text(1))
    second, _ = blueprint.save_revision(text(2))
    rng = random.Random(27)
    now = timezone.now()
    rows = []
    for r in range(RUNS):
        revision = first if r < RUNS // 2 else second
        when = now - timedelta(days=RUNS - r)
        run = Run.objects.create(
            revision=revision, blueprint=blueprint, label=run_label(revision), status="done",
            resolved_models=MODELS, items_total=PROMPTS * len(MODELS), items_done=PROMPTS * len(MODELS),
            created_at=when, started_at=when, finished_at=when + timedelta(minutes=5), results_version=1)
        for n in range(PROMPTS):
            for m, model in enumerate(MODELS):
                skill = 0.45 + 0.04 * m - (0.2 if m == 3 and r >= RUNS - 10 else 0.0)  # model-3 drifts down
                score = round(min(1.0, max(0.0, rng.gauss(skill, 0.2))), 2)
                rows.append(Response(
                    run=run, prompt_id=f"q{n:03d}", prompt_index=n, variant_id=f"{model}[temp:0]", model_id=model,
                    variant_index=m, temperature=0.0, status="done", text="A heat pump moves heat.",
                    latency_ms=rng.uniform(300, 3000), input_tokens=40, output_tokens=180, cost_usd=0.0002,
                    score=score, judged_score=score, score_basis="coverage", finished_at=when))
        if len(rows) >= 20_000:
            Response.objects.bulk_create(rows, batch_size=2000)
            rows = []
    Response.objects.bulk_create(rows, batch_size=2000)
    return blueprint


def timed(client, url, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), max(times)


def queries(client, url) -> int:
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return len(captured)


def main():
    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    from runs.across import figures as across
    from runs.models import Response, Run

    started = time.perf_counter()
    blueprint = build()
    print(f"built {Run.objects.count()} runs, {Response.objects.count():,} responses in "
          f"{time.perf_counter() - started:.1f} s ({connection.vendor})")
    across.pin_baseline(blueprint, Run.objects.order_by("created_at").first())
    client = Client()
    history = f"/runs/history/{blueprint.slug}"
    started = time.perf_counter()
    client.get(history)
    print(f"{'history, cold (100 summaries built and stored)':48s} {(time.perf_counter() - started) * 1000:7.0f} ms")
    pages = [("history page (100 runs x 10 variants)", history),
             ("model page (100 runs, weakest prompts, drift)", "/runs/models/openai:model-3/"),
             ("models list", "/runs/models/"),
             ("tag leaderboard", "/runs/leaderboards/bench/"),
             ("overview (drift, leaderboards, since last visit)", "/overview/"),
             ("history API", f"/api/runs-history/{blueprint.slug}"),
             ("model API", "/api/models/openai:model-3")]
    worst = 0.0
    for name, url in pages:
        median, slowest = timed(client, url, 7)
        if name.startswith(("history page", "model page")):
            worst = max(worst, median)
        print(f"{name:48s} median {median:6.1f} ms   max {slowest:6.1f} ms   {queries(client, url):3d} queries")
    # One run's results change (an override moves its version): the next read rebuilds that summary alone.
    Run.objects.filter(pk=Run.objects.order_by("-created_at").first().pk).update(results_version=2)
    started = time.perf_counter()
    client.get(history)
    print(f"{'history after one run changed (one rebuild)':48s} {(time.perf_counter() - started) * 1000:7.0f} ms")
    print(f"history and model page: worst median {worst:.1f} ms, target {TARGET_MS} ms: "
          f"{'OK' if worst < TARGET_MS else 'OVER'}")


if __name__ == "__main__":
    main()
