"""Benchmark (issue 26, "Decisions you can defend"): do the verdicts, intervals and the changed-cell list hold up
on simulated data, and is the compare page fast with intervals over 10,000 responses?

Every figure is printed beside its target. Every seed is fixed, so a second run prints the same numbers.
The simulated scores are what a matrix's cells hold: one score in [0, 1] per prompt (rounded to 2 places),
each prompt with its own difficulty (both models' scores on a prompt move together), and noise on top.

Run with `make bench` or `.venv/bin/python tests/bench/bench_decisions.py`.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_results  # noqa: E402  (sets up Django on a throwaway data directory; its builder makes the run)

from runs.engine import stats  # noqa: E402

SIMULATIONS = 200
ITEMS = 200
GAP = 0.10
NOISE = 0.25  # per-cell noise around a prompt's difficulty
GATE_TRIES = 100
GATE_VARIANTS = 3
POINTS = 500
PLANTED = 3
PLANTED_DROP = 0.6
CELL_NOISE = 0.08  # how far a cell's score moves between two runs by chance (judges, sampling)
PAGE_TARGET_MS = 300


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def scores(rng, difficulty, shift=0.0):
    """One model's cell scores: each prompt's difficulty, the model's shift, noise; kept in [0, 1], 2 places."""
    return np.clip(difficulty + shift + rng.normal(0, NOISE, len(difficulty)), 0, 1).round(2)


def true_gap(shift_a: float, shift_b: float) -> float:
    """The population difference of the two models' means (clipping and rounding included), by a large sample."""
    rng = _rng(999)
    difficulty = rng.uniform(0.1, 0.9, 2_000_000)
    return float(np.mean(scores(rng, difficulty, shift_a)) - np.mean(scores(rng, difficulty, shift_b)))


def paired_figures():
    print(f"Paired comparisons: {SIMULATIONS} simulated comparisons of {ITEMS} prompts each ({stats.METHOD})")
    covered = total = 0
    results = {}
    for label, shift, seed0 in (("no true difference", 0.0, 0), ("a true gap of 10 points", GAP, 10_000)):
        truth = true_gap(shift / 2, -shift / 2)
        right = 0
        started = time.perf_counter()
        for s in range(SIMULATIONS):
            rng = _rng(seed0 + s)
            difficulty = rng.uniform(0.1, 0.9, ITEMS)
            c = stats.paired(scores(rng, difficulty, shift / 2), scores(rng, difficulty, -shift / 2))
            right += c.verdict == ("better" if shift else "cant_tell")
            covered += c.low <= truth <= c.high
            total += 1
        results[label] = right / SIMULATIONS
        per = (time.perf_counter() - started) / SIMULATIONS * 1000
        print(f"  {label} (true difference {truth:+.4f}): right verdict in {right}/{SIMULATIONS} = "
              f"{right / SIMULATIONS:.1%}  target {'>= 95%' if not shift else '>= 90%'}  ({per:.1f} ms each)")
    print(f"  interval coverage of the true difference: {covered}/{total} = {covered / total:.1%}  target 93% to 97%")
    return results, covered / total


def gate_figures():
    print(f"The gate (--fail-on-regression) on {GATE_TRIES} seeded unchanged re-runs of {GATE_VARIANTS} variants x "
          f"{ITEMS} prompts")
    cached_fails = noisy_fails = 0
    for s in range(GATE_TRIES):
        rng = _rng(50_000 + s)
        difficulty = rng.uniform(0.1, 0.9, ITEMS)
        base = [scores(rng, difficulty) for _ in range(GATE_VARIANTS)]
        # Unchanged: the same responses (the cache, deterministic points and judges at temperature 0) give the
        # same cell scores, but a share of the cells is judged again and moves a little either way.
        rejudged = [np.where(rng.random(ITEMS) < 0.2, np.clip(b + rng.normal(0, 0.05, ITEMS), 0, 1).round(2), b)
                    for b in base]
        cached_fails += any(stats.paired(b, b).verdict == "worse" for b in base)
        noisy_fails += any(stats.paired(r, b).verdict == "worse" for r, b in zip(rejudged, base))
    print(f"  identical scores (cached re-run): the gate failed {cached_fails}/{GATE_TRIES} times  target 0")
    print(f"  20% of cells re-judged with noise: the gate failed {noisy_fails}/{GATE_TRIES} times  target 0 "
          f"(a 95% interval says 'worse' by chance about {GATE_VARIANTS} x 2.5% of the time)")
    return cached_fails, noisy_fails


def fdr_figures():
    print(f"Changed cells (Benjamini-Hochberg at {stats.FDR_LEVEL:.0%}): {POINTS} cells, noise sd {CELL_NOISE}, "
          f"{PLANTED} planted drops of {PLANTED_DROP}, 100 seeds each")
    all_found = 0
    planted_false = []
    for s in range(100):
        rng = _rng(70_000 + s)
        deltas = {i: float(x) for i, x in enumerate(rng.normal(0, CELL_NOISE, POINTS).round(2))}
        planted = set(rng.choice(POINTS, PLANTED, replace=False).tolist())
        for i in planted:
            deltas[i] = round(deltas[i] - PLANTED_DROP, 2)
        listed = {c.key for c in stats.changed(deltas) if c.changed}
        all_found += planted <= listed
        planted_false.append(len(listed - planted))
    null_false = []
    for s in range(100):
        rng = _rng(90_000 + s)
        deltas = {i: float(x) for i, x in enumerate(rng.normal(0, CELL_NOISE, POINTS).round(2))}
        null_false.append(sum(c.changed for c in stats.changed(deltas)))
    print(f"  all {PLANTED} planted regressions found in {all_found}/100 seeds  target 100/100")
    print(f"  false alarms beside them: {sum(planted_false)} over 100 seeds (at most {max(planted_false)} in one)  "
          f"target at most 1 per seed")
    print(f"  false alarms with nothing planted: {sum(null_false)} over 100 null seeds "
          f"({sum(1 for x in null_false if x)} seeds with any)  target at most 1")
    return all_found, planted_false, null_false


def page_figures():
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.utils import timezone

    from runs.models import Response, Run

    setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)
    started = time.perf_counter()
    run, _ = bench_results.build()
    # The baseline: the same run's responses, each cell's score moved a little (and 3 prompts much lower).
    rng = _rng(4)
    base = Run.objects.get(pk=run.pk)
    base.pk = None
    base.aggregates = {}
    base.finished_at = timezone.now()
    base.save()
    columns = ("prompt_id", "prompt_index", "variant_id", "model_id", "trial", "status", "score", "text",
               "final_text", "latency_ms", "input_tokens", "output_tokens", "cost_usd", "score_basis", "finished_at")
    rows = []
    for values in Response.objects.filter(run=run).order_by("pk").values(*columns):
        moved = values["score"] + rng.normal(0, 0.05) + (0.5 if values["prompt_index"] in (10, 500, 900) else 0)
        values["score"] = float(np.clip(round(moved, 2), 0, 1))
        rows.append(Response(run=base, judged_score=values["score"], **values))
    Response.objects.bulk_create(rows, batch_size=1000)
    print(f"Compare page: built runs {base.pk} and {run.pk} ({len(rows):,} responses each) in "
          f"{time.perf_counter() - started:.1f} s")
    client = Client()
    pages = [("compare page with intervals, 10 variants x 1,000 prompts", f"/runs/{run.pk}/compare?with={base.pk}"),
             ("compare page, no base: 45 variant pairs and 10 means", f"/runs/{run.pk}/compare"),
             ("run page's model table with intervals (htmx)", f"/runs/{run.pk}/compare?part=models"),
             ("results grid with per-model intervals", f"/runs/{run.pk}/results")]
    worst = 0.0
    for label, url in pages:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            response = client.get(url, **({"HTTP_HX_REQUEST": "true"} if "part=" in url else {}))
            times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        median = statistics.median(times)
        worst = max(worst, median)
        print(f"  {label}: median {median:.0f} ms, first {times[0]:.0f} ms  target < {PAGE_TARGET_MS} ms")
    return worst


def main():
    started = time.perf_counter()
    paired_figures()
    gate_figures()
    fdr_figures()
    page_figures()
    print(f"bench_decisions: {time.perf_counter() - started:.0f} s in all  target < 180 s")


if __name__ == "__main__":
    main()
