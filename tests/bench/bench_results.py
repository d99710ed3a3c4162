"""Benchmark: server time of the result pages for a run of 10,000 responses and 100,000 point assessments.

Builds the run with bulk_create in a throwaway SQLite database (1,000 prompts x 10 model variants, 10 points
each: 3 functions and 7 judged by two judges, one pair of alternative paths and a should-not point; realistic
reflections and raw judge answers), stores its aggregates as a finished run does, then times each page with
Django's test client: the whole response, templates included. Target (issue 8): each page under 300 ms.
Run with `make bench` or `.venv/bin/python tests/bench/bench_results.py`.
"""

import os
import random
import statistics
import sys
import tempfile
import time
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
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

PROMPTS = 1000
MODELS = [f"openai:model-{i}[temp:0]" for i in range(10)]
TARGET_MS = 300
POLL_TARGET_MS = 50
REPORT_TARGET_S = 5
SEARCH_BUDGET_S = 0.25  # runs.grid.SEARCH_BUDGET_S

PROMPT = """\
- id: q{n:04d}
  prompt: "Question {n}: explain how a heat pump moves heat from a cold place to a warm one, briefly."
  ideal: A heat pump uses work to move heat against its natural direction, with a refrigerant cycle.
  should:
    - $icontains: heat
    - $word_count_between: [10, 300]
    - Explains that the pump uses work (electricity) to move heat.
    - Mentions a refrigerant that evaporates and condenses.
    - point: Says that heat flows from cold to warm only because of the work done.
      weight: 2
    - Uses an everyday comparison such as a fridge.
    - - Gives a coefficient of performance above 1.
    - - Says that it moves more heat than the energy it uses.
  should_not:
    - $imatches: "perpetual motion"
    - Claims that a heat pump creates heat from nothing.
"""
HEADER = "title: Heat pumps (benchmark)\nmodels: [{models}]\n---\n"
REFLECTION = ("The response states the point directly in its second sentence and supports it with a short, "
              "correct example; nothing in it contradicts the criterion.")
RAW = f"<reflection>{REFLECTION}</reflection>\n<classification>CLASS_MAJORLY_MET</classification>"
ANSWER = ("A heat pump moves heat from a cold place to a warm one by doing work on a refrigerant. "
          "The refrigerant evaporates in the cold coil, taking in heat, is compressed so it gets hotter, and "
          "condenses in the warm coil, giving the heat out. **Like a fridge**, it moves more heat than the "
          "electricity it uses: a coefficient of performance of 3 is common.\n\n") * 3


def build():
    from blueprints.models import Blueprint
    from runs.models import PointAssessment, Response, Run
    from runs.records import compute_aggregates
    from runs.start import run_label

    text = HEADER.format(models=", ".join(m.split("[")[0] for m in MODELS)) + \
        "".join(PROMPT.format(n=n) for n in range(PROMPTS))
    blueprint = Blueprint.objects.create(slug="bench-results", title="Heat pumps (benchmark)")
    revision, _ = blueprint.save_revision(text)
    now = timezone.now()
    run = Run.objects.create(
        revision=revision, blueprint=blueprint, label=run_label(revision), status="running",
        resolved_models=[m.split("[")[0] for m in MODELS],
        judges={"judges": [{"id": "a", "model": "openai:judge-a", "approach": "holistic"},
                           {"id": "b", "model": "openai:judge-b", "approach": "holistic"}],
                "backup": None, "configured": True, "scale": "five"},
        items_total=PROMPTS * len(MODELS), items_done=PROMPTS * len(MODELS),
        judge_calls_total=PROMPTS * len(MODELS) * 8 * 2, judge_calls_done=PROMPTS * len(MODELS) * 8 * 2,
        started_at=now, created_at=now)
    rng = random.Random(8)
    responses = []
    for n in range(PROMPTS):
        for model in MODELS:
            responses.append(Response(
                run=run, prompt_id=f"q{n:04d}", prompt_index=n, variant_id=model, model_id=model.split("[")[0],
                status="done", conversation=[
                    {"role": "user", "content": f"Question {n}: explain how a heat pump moves heat.",
                     "generated": False},
                    {"role": "assistant", "content": ANSWER, "generated": True}],
                text=ANSWER, final_text=ANSWER, latency_ms=rng.uniform(300, 3000), input_tokens=40,
                output_tokens=180, cost_usd=0.0002, score_basis="coverage", finished_at=now,
                judge_usage={"calls": 16, "inputTokens": 9000, "outputTokens": 400, "costUsd": 0.002}))
    Response.objects.bulk_create(responses, batch_size=1000)
    responses = list(Response.objects.filter(run=run).order_by("pk"))
    layout = [("function", "icontains", "heat", ""), ("function", "word_count_between", [10, 300], ""),
              ("judged", "", None, ""), ("judged", "", None, ""), ("judged", "", None, ""),
              ("judged", "", None, ""), ("judged", "", None, "path_0"), ("judged", "", None, "path_1"),
              ("function", "imatches", "perpetual motion", ""), ("judged", "", None, "")]
    texts = ["", "", "Explains that the pump uses work (electricity) to move heat.",
             "Mentions a refrigerant that evaporates and condenses.",
             "Says that heat flows from cold to warm only because of the work done.",
             "Uses an everyday comparison such as a fridge.", "Gives a coefficient of performance above 1.",
             "Says that it moves more heat than the energy it uses.", "",
             "Claims that a heat pump creates heat from nothing."]
    from runs.engine.scoring import ScoredPoint, calculate, round2

    points, updates = [], []
    for response in responses:
        scores = []
        for position, (kind, fn, args, path) in enumerate(layout):
            inverted = position >= 8
            raw = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])
            score = 1 - raw if inverted else raw
            verdicts = [] if kind == "function" else [
                {"judgeId": f"holistic-{j}(openai:judge-{j})", "model": f"openai:judge-{j}", "approach": "holistic",
                 "role": "primary", "score": raw, "label": "CLASS_MAJORLY_MET", "reflection": REFLECTION,
                 "rawAnswers": [RAW], "error": None, "latencyMs": 800.0, "inputTokens": 560, "outputTokens": 25,
                 "costUsd": 0.0001, "calls": 1, "cached": False} for j in ("a", "b")]
            points.append(PointAssessment(
                response=response, position=position, kind=kind, text=texts[position], fn=fn, fn_args=args,
                multiplier=2.0 if position == 4 else 1.0, path_id=path, inverted=inverted,
                key_point_text=texts[position] or f"Function: {fn}", score=score, raw_score=raw,
                reflection="" if kind == "judged" else f"Function '{fn}' evaluated to {raw:.2f}.",
                verdicts=verdicts, judge_std_dev=0.0 if verdicts else None))
            scores.append(ScoredPoint(score, 2.0 if position == 4 else 1.0, path or None))
        calc = calculate(scores)
        response.score = response.judged_score = round2(calc.score)
        response.calculation = calc.to_dict()
        updates.append(response)
        if len(points) >= 20_000:
            PointAssessment.objects.bulk_create(points, batch_size=2000)
            points = []
    PointAssessment.objects.bulk_create(points, batch_size=2000)
    Response.objects.bulk_update(updates, ["score", "judged_score", "calculation"], batch_size=1000)
    started = time.perf_counter()
    aggregates = compute_aggregates(run.pk)
    aggregate_ms = (time.perf_counter() - started) * 1000
    Run.objects.filter(pk=run.pk).update(status="done", finished_at=timezone.now(), aggregates=aggregates)
    return Run.objects.get(pk=run.pk), aggregate_ms


def timed(client, method, url, repeat, **extra):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = getattr(client, method)(url, **extra)
        if response.streaming:
            b"".join(response.streaming_content)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code in (200, 286, 302), (url, response.status_code)  # 286: a poll of a finished run
    return statistics.median(times), max(times)


def main():
    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    from runs.models import PointAssessment, Response, Run

    started = time.perf_counter()
    run, aggregate_ms = build()
    responses, assessments = Response.objects.filter(run=run).count(), \
        PointAssessment.objects.filter(response__run=run).count()
    print(f"built a run of {responses:,} responses and {assessments:,} assessments in "
          f"{time.perf_counter() - started:.1f} s ({connection.vendor}); compute_aggregates {aggregate_ms:.0f} ms")

    client = Client()
    middle = Response.objects.filter(run=run, prompt_index=PROMPTS // 2).order_by("variant_id").first()
    pages = [
        ("run page", f"/runs/{run.pk}/"),
        ("heatmap page 5 (100 prompts x 10 models)", f"/runs/{run.pk}/heatmap?page=5"),
        ("heatmap, lowest mean first", f"/runs/{run.pk}/heatmap?sort=lowest&page=3"),
        ("response page (10 points, 14 verdicts)", f"/runs/{run.pk}/responses/{middle.pk}/"),
        ("one prompt, 10 models", f"/runs/{run.pk}/prompts/{PROMPTS // 2}/"),
        ("runs list", "/runs/"),
        ("results grid, every response", f"/runs/{run.pk}/results"),
        ("results grid, below 0.9, lowest first", f"/runs/{run.pk}/results?filter=failures&threshold=0.9&sort=score"),
        ("results grid, judges disagree, by spread", f"/runs/{run.pk}/results?filter=disagree&sort=spread"),
        ("results grid, errors, by cost", f"/runs/{run.pk}/results?filter=errors&sort=cost"),
        ("results grid, not evaluated, by latency", f"/runs/{run.pk}/results?filter=not-evaluated&sort=latency"),
        ("results grid, should-not met", f"/runs/{run.pk}/results?filter=should-not"),
        ("results grid, overridden", f"/runs/{run.pk}/results?filter=overridden"),
    ]
    searches = [
        ("results grid, text search", f"/runs/{run.pk}/results?q=refrigerant+cycle"),
        ("results grid, regex search (every answer)", f"/runs/{run.pk}/results?q=heat%5Cs%2Bpump%5Cb.*work&regex=1"),
        ("results grid, regex search (no answer)", f"/runs/{run.pk}/results?q=%5Cbturbine%5Cb&regex=1"),
    ]
    started = time.perf_counter()
    client.get(pages[0][1])  # the first request parses the 1,000-prompt revision once per process
    print(f"first request (parses the revision, then cached): {(time.perf_counter() - started) * 1000:.0f} ms")
    worst = 0.0
    for name, url in pages:
        median, slowest = timed(client, "get", url, 7)
        worst = max(worst, median)
        print(f"{name:45s} median {median:6.1f} ms   max {slowest:6.1f} ms")
    for name, url in searches:
        median, slowest = timed(client, "get", url, 5)
        print(f"{name:45s} median {median:6.1f} ms   max {slowest:6.1f} ms   (a regex matches for at most "
              f"{SEARCH_BUDGET_S * 1000:.0f} ms, then says its results are partial)")
    pages += searches
    if os.environ.get("BENCH_PROFILE"):  # where a page's time goes: BENCH_PROFILE=<part of a page's name>
        import cProfile
        import pstats

        for name, url in pages:
            if os.environ["BENCH_PROFILE"] in name:
                profile = cProfile.Profile()
                profile.runcall(client.get, url)
                print(f"\n== {name}")
                pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    from django.db import reset_queries
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        client.get(f"/runs/{run.pk}/results?filter=failures&threshold=0.9&sort=score&q=pump")
    print(f"{'results grid queries (filter, sort and search)':45s} {len(captured)} queries")
    reset_queries()
    poll = f"/runs/{run.pk}/results?since={int((timezone.now().timestamp() - 5) * 1000)}"
    median, slowest = timed(client, "get", poll, 7, HTTP_HX_REQUEST="true")
    print(f"{'live poll (what changed in the last 5 s)':45s} median {median:6.1f} ms   max {slowest:6.1f} ms"
          f"   target {POLL_TARGET_MS} ms: {'OK' if median < POLL_TARGET_MS else 'OVER'}")
    # While a run works its matrix is built for every poll (only a finished run's is kept): the poll's cost then.
    Run.objects.filter(pk=run.pk).update(status="running")
    median, slowest = timed(client, "get", poll, 5, HTTP_HX_REQUEST="true")
    Run.objects.filter(pk=run.pk).update(status="done")
    print(f"{'live poll of a run still working (no kept matrix)':45s} median {median:6.1f} ms   max {slowest:6.1f} ms")
    override = f"/runs/{run.pk}/responses/{middle.pk}/points/2/override"
    median, slowest = timed(client, "post", override, 3, data={"score": "1", "reason": "bench"},
                            HTTP_HX_REQUEST="true")
    print(f"{'override (recomputes the run aggregates)':45s} median {median:6.1f} ms   max {slowest:6.1f} ms")
    median, _ = timed(client, "get", f"/runs/{run.pk}/report.html", 3)
    print(f"{'HTML report, streamed (every response)':45s} median {median / 1000:.1f} s   target "
          f"{REPORT_TARGET_S} s: {'OK' if median / 1000 < REPORT_TARGET_S else 'OVER'} (most of it is "
          f"rendering 11,000 markdown texts)")
    print(f"pages (every view with any filter or sort): worst median {worst:.1f} ms, target {TARGET_MS} ms: "
          f"{'OK' if worst < TARGET_MS else 'OVER'}")


if __name__ == "__main__":
    main()
