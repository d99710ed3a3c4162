"""Benchmark: server time of the pages of a run of 100,000 responses, on PostgreSQL (issue 37, pages on big runs).

    .venv/bin/python tests/bench/bench_bigrun.py [--prompts 2000] [--trials 5] [--repeat 5] [--profile PAGE]
                                                 [--skip PART-OF-A-NAME]

Starts the project's throwaway PostgreSQL (tests/services.py), fills it with COPY: one blueprint of 2,000
prompts (one function point and two judged points, two judges each) run on 10 models with 5 trials, twice (a
baseline and a later run: 100,000 responses and 300,000 point assessments each), finished by the real
``records.finish_run`` (aggregates, counters, the summary the pages across runs read), the first run pinned as
the blueprint's baseline. Then times with Django's test client (the whole response, templates included):

- the run page, and its per-model table (htmx, loaded in place by the run page),
- the results grid,
- compare against the baseline,
- a model page,
- the blueprint's history,

each on its first view (nothing of the runs kept in this process: what a web process that has just parsed the
revision sees) and kept (median of ``--repeat`` views), each beside its target (issue 37: 300 ms) and the
previous figure where there is one, and the web process's CPU time of each (steadier on a shared machine: the
database server's time is not in it). Also prints the size of the kept matrices (records.matrix_size), against
``EVALSITE_MATRIX_CACHE_MB``, and what storing the figures compare reads of a run takes at its finish
(``records.store_cell_figures``) and weighs. ``--profile PAGE`` prints cProfile's top functions of that page's
first and kept views; ``--skip "(htmx)"`` leaves out the two parts that work out what would flip each verdict
(minutes at this size on a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

TARGET_MS = 300
MODELS = [f"openai:model-{i}" for i in range(10)]
# (first, kept) before the page matrices (records.page_matrix) and the run page's reading of its stored figures
# alone, on the same shared 2-core machine (2,000 prompts x 10 models x 5 trials, --skip "(htmx)"); the run page
# before issue 37's first changes took 28,601 and 16,528 ms. Compare: before it read the runs' stored cell figures
# (records.cell_figures_for) and Benjamini-Hochberg in NumPy, when it built both whole matrices (7,485 ms of CPU).
PREVIOUS_MS: dict[str, tuple[float | None, float | None]] = {
    "run page": (5_347, 690), "results grid": (3_215, 41), "compare against the baseline": (12_323, 215),
    "model page": (130, 66), "history": (166, 80)}

PROMPT = """\
- id: q{n:05d}
  prompt: "Question {n}: explain how a heat pump moves heat from a cold place to a warm one, briefly."
  should:
    - $icontains: heat
    - Explains that the pump uses work (electricity) to move heat.
    - Mentions a refrigerant that evaporates and condenses.
"""
HEADER = "title: Heat pumps (big run)\nmodels: [{models}]\n---\n"
ANSWER = ("A heat pump moves heat from a cold place to a warm one by doing work on a refrigerant. The refrigerant "
          "evaporates in the cold coil and condenses in the warm coil. Like a fridge, it moves more heat than the "
          "electricity it uses.")
REFLECTION = "The response states the point directly and supports it with a short, correct example."


def copy_rows(model, rows) -> None:
    """Write ``rows`` (dicts of field name -> value; every other column takes its field's default) with COPY."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    defaults = {f.attname: f.get_default() for f in fields}
    with connection.cursor() as cursor:
        raw = cursor.cursor
        with raw.copy(f"COPY {model._meta.db_table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([f.get_db_prep_save(row[f.attname] if f.attname in row else defaults[f.attname],
                                                   connection) for f in fields])


def build(prompts: int, trials: int):
    from django.utils import timezone

    from blueprints.models import Blueprint
    from runs.across.figures import pin_baseline
    from runs.models import PointAssessment, Response, Run
    from runs.records import finish_run
    from runs.start import run_label

    text = HEADER.format(models=", ".join(MODELS)) + "".join(PROMPT.format(n=n) for n in range(prompts))
    blueprint = Blueprint.objects.create(slug="bench-bigrun", title="Heat pumps (big run)", tags=["bench"])
    revision, _ = blueprint.save_revision(text)
    runs = []
    for number, shift in enumerate((0.0, 0.05)):
        now = timezone.now()
        run = Run.objects.create(
            revision=revision, blueprint=blueprint, label=run_label(revision), status="running",
            resolved_models=list(MODELS), options={"trials": trials},
            judges={"judges": [{"id": "a", "model": "openai:judge-a", "approach": "holistic"},
                               {"id": "b", "model": "openai:judge-b", "approach": "holistic"}],
                    "backup": None, "configured": True, "scale": "five"},
            items_total=prompts * len(MODELS) * trials, judge_calls_total=prompts * len(MODELS) * trials * 4,
            started_at=now, created_at=now)
        rng = random.Random(37 + number)
        scores: dict[tuple, list[float]] = {}
        usage = {"calls": 4, "inputTokens": 2200, "outputTokens": 100, "costUsd": 0.0004}

        def responses():
            for n in range(prompts):
                for v, model in enumerate(MODELS):
                    skill = 0.45 + 0.05 * v + shift * (v % 3 == 0)
                    for trial in range(trials):
                        judged = [min(1.0, max(0.0, round(rng.gauss(skill, 0.25) * 4) / 4)) for _ in range(2)]
                        scores[(n, model, trial)] = judged
                        score = round((1.0 + sum(judged)) / 3, 2)
                        yield dict(run_id=run.pk, prompt_id=f"q{n:05d}", prompt_index=n, variant_id=model,
                                   model_id=model, variant_index=v, temperature=None, trial=trial, status="done",
                                   conversation=[{"role": "assistant", "content": ANSWER, "generated": True}],
                                   text=ANSWER, final_text=ANSWER, latency_ms=rng.uniform(300, 3000),
                                   input_tokens=40, output_tokens=60, cost_usd=0.0001, score=score,
                                   judged_score=score, score_basis="coverage", judge_usage=usage,
                                   judge_calls_sent=4, candidate_calls_sent=1, finished_at=now)

        copy_rows(Response, responses())
        ids = list(Response.objects.filter(run=run).values_list("pk", "prompt_index", "variant_id", "trial"))

        def points():
            for pk, n, model, trial in ids:
                yield dict(response_id=pk, position=0, kind="function", fn="icontains", fn_args="heat",
                           key_point_text="Function: icontains", score=1.0, raw_score=1.0,
                           reflection="Function 'icontains' evaluated to 1.00.", verdicts=[])
                for position, raw in enumerate(scores[(n, model, trial)], start=1):
                    verdicts = [{"judgeId": f"holistic-{j}(openai:judge-{j})", "model": f"openai:judge-{j}",
                                 "approach": "holistic", "role": "primary", "score": raw, "label": "CLASS_MAJORLY_MET",
                                 "reflection": REFLECTION, "error": None, "latencyMs": 800.0, "inputTokens": 550,
                                 "outputTokens": 25, "costUsd": 0.0001, "calls": 1, "cached": False}
                                for j in ("a", "b")]
                    yield dict(response_id=pk, position=position, kind="judged", text=f"Point {position}",
                               key_point_text=f"Point {position}", score=raw, raw_score=raw, verdicts=verdicts,
                               judge_std_dev=0.0)

        copy_rows(PointAssessment, points())
        Run.objects.filter(pk=run.pk).update(items_done=prompts * len(MODELS) * trials)
        started = time.perf_counter()
        finish_run(run.pk)
        print(f"run {run.pk}: {prompts * len(MODELS) * trials:,} responses stored, finished by finish_run in "
              f"{time.perf_counter() - started:.1f} s", flush=True)
        runs.append(Run.objects.get(pk=run.pk))
    pin_baseline(blueprint, runs[0])
    return blueprint, runs


def forget() -> None:
    """What a web process keeps of runs (not the parsed revision): as a new process would see them."""
    from runs.compare import forget_robustness
    from runs.records import forget_matrix

    forget_matrix()
    forget_robustness()


def view(client, url, headers=None) -> tuple[float, float]:
    """The view's wall time and this process's CPU time, in ms (the database server's time is in the first only:
    on a shared machine the second is the steadier figure of what the web process did)."""
    started, cpu = time.perf_counter(), time.process_time()
    response = client.get(url, headers=headers or {})
    if response.streaming:
        b"".join(response.streaming_content)
    assert response.status_code == 200, (url, response.status_code, response.content[:500])
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5, help="kept views timed per page (the median is printed)")
    parser.add_argument("--profile", default="", help="print cProfile's top functions of this page's first view")
    parser.add_argument("--skip", default="", help="leave out the pages whose name has this in it")
    args = parser.parse_args()

    from tests.services import start_postgres

    postgres = start_postgres()
    os.environ["DATABASE_URL"] = postgres.url
    os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext, setup_test_environment

        from runs import records
        from runs.spec import parsed_blueprint

        setup_test_environment()
        call_command("migrate", verbosity=0, interactive=False)
        started = time.perf_counter()
        blueprint, (base, run) = build(args.prompts, args.trials)
        print(f"built 2 runs of {args.prompts:,} prompts x {len(MODELS)} models x {args.trials} trials on PostgreSQL "
              f"in {time.perf_counter() - started:.0f} s (this machine may be shared: figures are noisy)")
        # The tables' statistics, as autovacuum gathers them on a live site: without them the first pages were timed
        # against plans made blind and against the autovacuum the COPY had just set off.
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE after the load: {time.perf_counter() - started:.1f} s (not counted below)")
        started = time.perf_counter()
        from runs import spec as run_spec

        run_spec._PARSED.clear()  # noqa: SLF001
        parsed_blueprint(run.revision)
        print(f"parsing the revision ({args.prompts:,} prompts), once per web process: "
              f"{(time.perf_counter() - started) * 1000:.0f} ms (not counted below)")

        model = MODELS[3]
        pages = [
            ("run page", f"/runs/{run.pk}/", None),
            ("run page's model table (htmx)", f"/runs/{run.pk}/compare?part=models", {"HX-Request": "true"}),
            ("results grid", f"/runs/{run.pk}/results", None),
            ("compare against the baseline", f"/runs/{run.pk}/compare?with={base.pk}", None),
            ("compare: what would flip (htmx)", f"/runs/{run.pk}/compare?with={base.pk}&part=robustness",
             {"HX-Request": "true"}),
            ("model page", f"/runs/models/{model}/", None),
            ("history", f"/runs/history/{blueprint.slug}", None),
        ]
        client = Client()
        view(client, "/runs/")  # the first request of a process imports what the pages need: not counted
        print(f"\n{'page':34s} {'first':>9s} {'target':>7s} {'previous':>9s}   {'kept':>9s} {'target':>7s} "
              f"{'previous':>9s}  queries  {'CPU first':>9s} {'CPU kept':>9s}")
        worst = 0.0
        for name, url, headers in pages:
            if args.skip and args.skip in name:
                print(f"{name:34s} (left out: --skip)")
                continue
            forget()
            if args.profile and args.profile in name:
                import cProfile
                import pstats

                for which in ("first", "kept"):
                    profile = cProfile.Profile()
                    profile.runcall(client.get, url, headers=headers or {})
                    print(f"== {name}, {which} view")
                    pstats.Stats(profile).sort_stats("cumulative").print_stats(r"evalsite|runs|blueprints", 30); pstats.Stats(profile).sort_stats("tottime").print_stats(25)
                forget()
            first, first_cpu = view(client, url, headers)
            again = [view(client, url, headers) for _ in range(args.repeat)]
            kept, kept_cpu = statistics.median(w for w, _ in again), statistics.median(c for _, c in again)
            with CaptureQueriesContext(connection) as captured:
                view(client, url, headers)
            worst = max(worst, first, kept)
            if name.startswith("compare against"):  # both runs' matrices are kept now
                held = records.kept_matrices()
            before_first, before_kept = PREVIOUS_MS.get(name, (None, None))
            shown = lambda ms: "-" if ms is None else f"{ms:7.0f}ms"  # noqa: E731
            print(f"{name:34s} {first:7.0f}ms {TARGET_MS:5d}ms {shown(before_first):>9s}   {kept:7.0f}ms "
                  f"{TARGET_MS:5d}ms {shown(before_kept):>9s}  {len(captured):4d}     {first_cpu:7.0f}ms "
                  f"{kept_cpu:7.0f}ms")
        print(f"\nworst page: {worst:.0f} ms, target {TARGET_MS} ms: {'OK' if worst < TARGET_MS else 'OVER'}")
        count, size = held if "held" in locals() else records.kept_matrices()
        print(f"kept matrices after compare: {count}, {size / 2**20:.0f} MB estimated (records.matrix_size), bound "
              f"EVALSITE_MATRIX_CACHE_MB = {settings.EVALSITE_MATRIX_CACHE_MB:g} MB")
        import json

        from runs.models import RunCells

        matrix = records.run_matrix(run, parsed_blueprint(run.revision).prompts)
        started, cpu = time.perf_counter(), time.process_time()
        records.store_cell_figures(run, matrix)
        stored = RunCells.objects.get(run=run)
        print(f"storing what compare reads of a run (records.store_cell_figures, part of finish_run): "
              f"{(time.perf_counter() - started) * 1000:.0f} ms ({(time.process_time() - cpu) * 1000:.0f} ms CPU), "
              f"{len(json.dumps(stored.data)) / 1000:.0f} kB of JSON for {len(matrix.cells):,} cells")
    finally:
        from django.db import connections

        connections.close_all()
        postgres.stop()


if __name__ == "__main__":
    main()
