"""Benchmark (issue 26, "Decisions you can defend"): do the verdicts, intervals and the changed-cell list hold up
on simulated data, and is the compare page fast with intervals over 10,000 responses?

Every figure is printed beside its target. Every seed is fixed, so a second run prints the same numbers.
The simulated scores are what a matrix's cells hold: one score in [0, 1] per prompt (rounded to 2 places),
each prompt with its own difficulty (both models' scores on a prompt move together), and noise on top.

Run with `make bench` or `.venv/bin/python tests/bench/bench_decisions.py`. `--seed-offset N` adds N to every
simulation's seeds (a second, independent set of seeds: the figures should hold there too); `--no-page` skips the
compare page's timing (the slow part: it builds two runs of 10,000 responses).
"""

from __future__ import annotations

import argparse
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
NULL_RATE_SEEDS = 10_000  # the changed-cell rule's false-alarm rate, measured over this many null seeds


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


def paired_figures(offset: int = 0):
    print(f"Paired comparisons: {SIMULATIONS} simulated comparisons of {ITEMS} prompts each ({stats.METHOD})")
    covered = total = 0
    results = {}
    for label, shift, seed0 in (("no true difference", 0.0, offset), ("a true gap of 10 points", GAP, 10_000 + offset)):
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


def gate_fails(new, base) -> set[int]:
    """The variants (by position) that fail the gate, as `manage.py compare --fail-on-regression` decides:
    `stats.gate` over every variant, each with its shown verdict."""
    verdicts = {i: stats.paired(n, b).verdict for i, (n, b) in enumerate(zip(new, base))}
    tests = stats.gate({i: (n, b, None) for i, (n, b) in enumerate(zip(new, base))}, verdicts)
    return {g.key for g in tests if g.fails}


def gate_figures(offset: int = 0):
    print(f"The gate (--fail-on-regression: {stats.GATE_RULE}) on {GATE_TRIES} seeded re-runs of "
          f"{GATE_VARIANTS} variants x {ITEMS} prompts")
    cached_fails = noisy_fails = noisy_worse = caught = planted_others = fresh_worse = fresh_caught = 0
    drops = []
    for s in range(GATE_TRIES):
        rng = _rng(50_000 + offset + s)
        difficulty = rng.uniform(0.1, 0.9, ITEMS)
        base = [scores(rng, difficulty) for _ in range(GATE_VARIANTS)]
        # Unchanged: the same responses (the cache, deterministic points and judges at temperature 0) give the
        # same cell scores, but a share of the cells is judged again and moves a little either way.
        rejudged = [np.where(rng.random(ITEMS) < 0.2, np.clip(b + rng.normal(0, 0.05, ITEMS), 0, 1).round(2), b)
                    for b in base]
        cached_fails += bool(gate_fails(base, base))
        noisy_fails += bool(gate_fails(rejudged, base))
        noisy_worse += any(stats.paired(r, b).verdict == "worse" for r, b in zip(rejudged, base))
        # A planted regression: the first variant 10 points lower on every prompt (kept in [0, 1]), the others
        # as in the re-judged re-run.
        planted = [np.clip(rejudged[0] - GAP, 0, 1).round(2), *rejudged[1:]]
        drops.append(float(np.mean(base[0] - planted[0])))
        failing = gate_fails(planted, base)
        caught += 0 in failing
        planted_others += len(failing - {0})
        # The first variant answered anew by a model 10 points worse (per-prompt noise as in the paired figures).
        fresh = [scores(rng, difficulty, -GAP), *rejudged[1:]]
        fresh_worse += stats.paired(fresh[0], base[0]).verdict == "worse"
        fresh_caught += 0 in gate_fails(fresh, base)
    print(f"  identical scores (cached re-run): the gate failed {cached_fails}/{GATE_TRIES} times  target 0")
    print(f"  20% of cells re-judged with noise: the gate failed {noisy_fails}/{GATE_TRIES} times  target 0 "
          f"(the 95% verdicts alone said 'worse' of some variant {noisy_worse}/{GATE_TRIES} times, about "
          f"{GATE_VARIANTS} x 2.5% by chance)")
    print(f"  a planted regression (one variant 10 points lower on every prompt, {statistics.mean(drops):.3f} "
          f"on average once kept in [0, 1]; the others re-judged): caught {caught}/{GATE_TRIES} times  "
          f"target {GATE_TRIES}/{GATE_TRIES} (all); unchanged variants failed beside it {planted_others} times  "
          f"target 0")
    print(f"  for information, no target: one variant answered anew by a model 10 points worse (true difference "
          f"{true_gap(-GAP, 0.0):+.4f}, per-prompt noise {NOISE}): the verdict said 'worse' "
          f"{fresh_worse}/{GATE_TRIES}, the gate failed {fresh_caught}/{GATE_TRIES} (what the stricter level costs "
          f"on {ITEMS} prompts)")
    return cached_fails, noisy_fails, caught


def fdr_figures(offset: int = 0):
    print(f"Changed cells (Benjamini-Hochberg at {stats.FDR_LEVEL:.0%}): {POINTS} cells, noise sd {CELL_NOISE}, "
          f"{PLANTED} planted drops of {PLANTED_DROP}, 100 seeds each")
    all_found = 0
    planted_false = []
    for s in range(100):
        rng = _rng(70_000 + offset + s)
        deltas = {i: float(x) for i, x in enumerate(rng.normal(0, CELL_NOISE, POINTS).round(2))}
        planted = set(rng.choice(POINTS, PLANTED, replace=False).tolist())
        for i in planted:
            deltas[i] = round(deltas[i] - PLANTED_DROP, 2)
        listed = {c.key for c in stats.changed(deltas) if c.changed}
        all_found += planted <= listed
        planted_false.append(len(listed - planted))
    null_false = []
    for s in range(100):
        rng = _rng(90_000 + offset + s)
        deltas = {i: float(x) for i, x in enumerate(rng.normal(0, CELL_NOISE, POINTS).round(2))}
        null_false.append(sum(c.changed for c in stats.changed(deltas)))
    print(f"  all {PLANTED} planted regressions found in {all_found}/100 seeds  target 100/100")
    print(f"  false alarms beside them: {sum(planted_false)} over 100 seeds (at most {max(planted_false)} in one)  "
          f"target at most 1 per seed")
    print(f"  false alarms with nothing planted: {sum(null_false)} over 100 null seeds "
          f"({sum(1 for x in null_false if x)} seeds with any)  target at most 1")
    # The rate behind that count: with nothing planted, Benjamini-Hochberg lists anything at all in about
    # FDR_LEVEL of the runs, so 100 seeds see about 100 x FDR_LEVEL false alarms and the count above is a
    # Poisson draw around that (2 or more in about one seed set of five at 1%, even with the true noise known).
    rate_false = rate_seeds = 0
    for s in range(NULL_RATE_SEEDS):
        rng = _rng(200_000 + offset + s)
        listed = sum(c.changed for c in stats.changed(dict(enumerate(rng.normal(0, CELL_NOISE, POINTS).round(2)))))
        rate_false += listed
        rate_seeds += bool(listed)
    print(f"  the false-alarm rate behind it, over {NULL_RATE_SEEDS:,} null seeds: "
          f"{100 * rate_false / NULL_RATE_SEEDS:.2f} per 100 seeds ({100 * rate_seeds / NULL_RATE_SEEDS:.2f}% of seeds "
          f"with any)  target at most 1 per 100 (Benjamini-Hochberg at {stats.FDR_LEVEL:.0%} promises about "
          f"{100 * stats.FDR_LEVEL:.0f})")
    return all_found, planted_false, null_false


BINARY_PROMPTS = (10, 30)
BINARY_SIMULATIONS = 2000
CACHED_SETS = 200  # data sets for the cached-against-none planted-drop figure
CACHED_DROPS, CACHED_DROP, CACHED_SHARE = 25, 0.4, 0.7
NEARLY_ALIKE = [  # (move size, count) groups: moves nearly all alike, beyond the 24 the gate enumerates
    [(1.0, 59), (0.99, 1)], [(1.0, 52), (0.99, 3)], [(1.0, 54), (0.9, 1)], [(1.0, 81), (0.99, 1)],
    [(1.0, 38), (0.5, 2)], [(0.5, 40), (0.25, 1)],
]


def binary_figures(offset: int = 0, simulations: int = BINARY_SIMULATIONS):
    """Pass/fail prompts: how often the 95% interval holds the true difference (Newcombe's score interval for
    paired proportions; the bootstrap before)."""
    print(f"Pass/fail scores: interval coverage of the true difference, {simulations} seeded samples each")
    figures = {}
    for n in BINARY_PROMPTS:
        covered = boot = 0
        for s in range(simulations):
            rng = _rng(300_000 + offset + s)
            difficulty = rng.uniform(0.1, 0.9, n)  # each prompt's pass chance; a 0.1 better than b on every one
            a = (rng.random(n) < difficulty + GAP / 2).astype(float)
            b = (rng.random(n) < difficulty - GAP / 2).astype(float)
            c = stats.paired(a, b)
            covered += c.low <= GAP <= c.high
            (_, low, high), = stats.bootstrap_means((a - b)[:, None], np.ones((n, 1)))  # the interval before
            boot += low <= GAP <= high
        figures[n] = covered / simulations
        print(f"  {n} prompts, a true difference of {GAP:.2f} (pass chances from 0.1 to 0.9 per prompt): "
              f"{covered}/{simulations} = {covered / simulations:.1%}  target 93% to 97% (the bootstrap, as "
              f"before: {boot / simulations:.1%})")
    for pass_a, pass_b in ((0.85, 0.75), (0.55, 0.45), (0.15, 0.05)):
        covered = boot = 0
        for s in range(simulations // 4):
            rng = _rng(320_000 + offset + s)
            a, b = (rng.random(10) < pass_a).astype(float), (rng.random(10) < pass_b).astype(float)
            c = stats.paired(a, b)
            covered += c.low <= pass_a - pass_b <= c.high
            (_, low, high), = stats.bootstrap_means((a - b)[:, None], np.ones((10, 1)))
            boot += low <= pass_a - pass_b <= high
        print(f"  for information: 10 prompts, pass rates {pass_a} against {pass_b}: "
              f"{covered / (simulations // 4):.1%} (the bootstrap: {boot / (simulations // 4):.1%})")
    return figures


def _sign_flip_patterns(groups):
    """Every count of moves that went up in each group, its chance with no true change, and one such pattern."""
    import itertools

    from scipy import stats as sps

    for ups in itertools.product(*[range(c + 1) for _, c in groups]):
        x = np.concatenate([np.r_[[m] * u, [-m] * (c - u)] for (m, c), u in zip(groups, ups)])
        yield float(np.prod([sps.binom.pmf(u, c, 0.5) for (_, c), u in zip(groups, ups)])), x


def gate_grid_figures():
    """The gate's own false-fail rate on moves nearly all alike, counted exactly over every sign pattern."""
    from scipy.special import ndtr

    print(f"The gate's test with no true change, moves nearly all alike (every sign pattern weighed by its chance; "
          f"before Holm and the verdict, which only lower it)")
    worst = 0.0
    for groups in NEARLY_ALIKE:
        now = normal = 0.0
        for chance, x in _sign_flip_patterns(groups):
            now += chance * (stats.worse_p(x, np.zeros(len(x))) < stats.GATE_LEVEL)
            normal += chance * (ndtr(x.sum() / np.sqrt(x @ x)) < stats.GATE_LEVEL)
        worst = max(worst, now)
        label = " + ".join(f"{c} x {m:g}" for m, c in groups)
        print(f"  moves {label}: fails {now:.4%} of the time  target at most {stats.GATE_LEVEL:.1%}  "
              f"(the normal curve before: {normal:.4%})")
    return worst


def cached_figures(offset: int = 0, sets: int = CACHED_SETS):
    """Planted drops among many cells, with most cells cached (unmoved) and with none."""
    from scipy import stats as sps

    cached = int(POINTS * CACHED_SHARE)
    print(f"Changed cells with caching: {CACHED_DROPS} drops of {CACHED_DROP} among {POINTS} cells (noise sd "
          f"{CELL_NOISE}), {sets} data sets each")
    found, truth, false = {}, [], {}
    for label, unmoved in (("none cached", 0), (f"{CACHED_SHARE:.0%} cached", cached)):
        shares, alarms = [], 0
        for s in range(sets):
            rng = _rng(400_000 + offset + s)
            d = np.zeros(POINTS)
            d[:POINTS - unmoved] = rng.normal(0, CELL_NOISE, POINTS - unmoved)
            d[:CACHED_DROPS] -= CACHED_DROP
            d = d.round(2)
            listed = {c.key for c in stats.changed(dict(enumerate(d))) if c.changed}
            shares.append(len(listed & set(range(CACHED_DROPS))) / CACHED_DROPS)
            alarms += len(listed - set(range(CACHED_DROPS)))
            if unmoved:  # the reference: Benjamini-Hochberg over the moved cells with the true noise known
                moved = d != 0
                p = 2 * sps.norm.sf(np.maximum(np.abs(d[moved]) - 0.005, 0) / CELL_NOISE)
                hit = np.flatnonzero(moved)[sps.false_discovery_control(p) < stats.FDR_LEVEL]
                truth.append(np.count_nonzero(hit < CACHED_DROPS) / CACHED_DROPS)
        found[label], false[label] = float(np.mean(shares)), alarms / sets
    none, most = found["none cached"], found[f"{CACHED_SHARE:.0%} cached"]
    print(f"  drops found with none cached: {none:.1%}; with {CACHED_SHARE:.0%} cached: {most:.1%}  target: cached "
          f"at least as often as none ({'yes' if most >= none else 'NO'}); Benjamini-Hochberg with the true noise: "
          f"{np.mean(truth):.1%}; the old yardstick listed none with 65% or 70% cached")
    print(f"  false alarms beside them per data set: none cached {false['none cached']:.2f}, "
          f"{CACHED_SHARE:.0%} cached {false[f'{CACHED_SHARE:.0%} cached']:.2f}  target at most 1")
    grid_missed = 0
    for s in range(1000):
        rng = _rng(500_000 + offset + s)
        a = np.round(rng.integers(0, 7, 24) / 6, 2)  # seven-point Likert scores kept to 2 places
        b = a.copy()
        moved = rng.random(24) < 0.3
        b[moved] = np.round(rng.integers(0, 7, int(moved.sum())) / 6, 2)
        d = b - a
        if np.any(d != 0):
            expected = np.gcd.reduce(np.round(np.abs(d) / 0.01).astype(int)) * 0.01
            grid_missed += abs(stats._grid_step(d) - expected) > 1e-9
    print(f"  Likert data sets (7 points, kept to 2 places, 24 cells) whose grid step was missed: {grid_missed}/1000  "
          f"target 0 (the smallest gap, before: about half)")
    return none, most


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed-offset", type=int, default=0, metavar="N",
                        help="add N to every simulation's seeds (a second set of seeds)")
    parser.add_argument("--no-page", action="store_true", help="skip the compare page's timing")
    parser.add_argument("--quick", action="store_true",
                        help="fewer seeds everywhere (a tenth): rough figures in a fraction of the time")
    options = parser.parse_args(argv)
    global SIMULATIONS, GATE_TRIES, NULL_RATE_SEEDS
    if options.quick:
        SIMULATIONS, GATE_TRIES, NULL_RATE_SEEDS = 40, 20, 1000
    started = time.perf_counter()
    if options.seed_offset:
        print(f"Seeds offset by {options.seed_offset}")
    paired_figures(options.seed_offset)
    gate_figures(options.seed_offset)
    fdr_figures(options.seed_offset)
    binary_figures(options.seed_offset, BINARY_SIMULATIONS // (10 if options.quick else 1))
    gate_grid_figures()
    cached_figures(options.seed_offset, CACHED_SETS // (5 if options.quick else 1))
    if not options.no_page:
        page_figures()
    print(f"bench_decisions: {time.perf_counter() - started:.0f} s in all  target < 180 s")


if __name__ == "__main__":
    main()
