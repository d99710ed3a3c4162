"""A fake summary writer: true claims from a run's figures, and each kind of false one (the mutation suite of
the issue "Insight with receipts"). Used by tests/engine/test_summary.py and tests/bench/bench_claims.py."""

from __future__ import annotations

import random
from dataclasses import dataclass

from runs.engine.claims import Figures
from runs.engine.stats import paired_many

MUTATIONS = ("wrong_number", "wrong_entity", "wrong_direction", "cant_tell_direction", "percent_for_points",
             "bare_for_score", "invented_model", "invented_prompt", "invented_finding", "stray_number")


@dataclass
class Fixture:
    figures: Figures
    variants: list[str]
    prompts: list[str]


def fixture(rng: random.Random) -> Fixture:
    k, n = rng.randint(3, 6), rng.randint(10, 30)
    variants = [f"{p}:{m}-{i}[temp:0]" for i, (p, m) in enumerate(
        rng.sample([("openai", "gpt-x"), ("anthropic", "claude-y"), ("google", "gemini-z"), ("mistral", "small"),
                    ("xai", "grok-q"), ("together", "llama-r"), ("openrouter", "qwen-s")], k))]
    prompts = [f"prompt-{i}" for i in range(n)]
    quality = {v: rng.uniform(0.3, 0.9) for v in variants}
    cells = {(p, v): round(min(1.0, max(0.0, rng.gauss(quality[v], 0.15))), 2) for p in prompts for v in variants}
    means = {v: sum(cells[(p, v)] for p in prompts) / n for v in variants}
    scores = {v: {p: cells[(p, v)] for p in prompts} for v in variants}
    pairs = [(a, b) for i, a in enumerate(variants) for b in variants[i + 1:]]
    comparisons = paired_many([(scores[a], scores[b]) for a, b in pairs], {})
    deltas = {(a, b): (c.delta, c.verdict) for (a, b), c in zip(pairs, comparisons)}
    pass_rates = {v: sum(cells[(p, v)] >= 0.8 for p in prompts) / n for v in variants}
    costs = {v: rng.uniform(0.0005, 0.5) for v in variants}
    findings = frozenset(f"F{i}" for i in range(1, rng.randint(2, 8)))
    figures = Figures(frozenset(variants), frozenset(prompts), findings, means, cells, deltas, pass_rates, costs)
    return Fixture(figures, variants, prompts)


def _claim(text, values, says=(), findings=()):
    return {"text": text, "values": list(values), "says": list(says), "findings": list(findings)}


def true_claim(fx: Fixture, rng: random.Random) -> dict:
    f = fx.figures
    m = rng.choice(fx.variants)
    kind = rng.choice(["mean", "mean_pct", "delta", "cell", "pass_rate", "cost", "cited"])
    if kind == "delta":
        decided = [(a, b) for (a, b), (d, verdict) in f.deltas.items() if verdict != "cant_tell"]
        if decided:
            a, b = rng.choice(decided)
            d, verdict = f.deltas[(a, b)]
            winner, loser = (a, b) if verdict == "better" else (b, a)
            gap = abs(d)
            written = f"{100 * gap:.0f} points" if rng.random() < 0.5 else f"{gap:.2f}"
            return _claim(f"{winner} is better than {loser} by {written}.",
                          [{"metric": "delta", "model": winner, "vs": loser, "value": round(gap, 4)}],
                          [{"model": winner, "vs": loser, "direction": "better"}])
        kind = "mean"
    if kind == "mean_pct":
        return _claim(f"{m} scores {100 * f.means[m]:.0f}% on average.",
                      [{"metric": "mean", "model": m, "value": round(f.means[m], 4)}])
    if kind == "cell":
        p = rng.choice(fx.prompts)
        return _claim(f"On {p}, {m} scores {f.cells[(p, m)]:.2f}.",
                      [{"metric": "cell", "model": m, "prompt": p, "value": f.cells[(p, m)]}])
    if kind == "pass_rate":
        return _claim(f"{m} passes {100 * f.pass_rates[m]:.0f}% of the prompts.",
                      [{"metric": "pass_rate", "model": m, "value": round(f.pass_rates[m], 4)}])
    if kind == "cost":
        return _claim(f"{m} cost ${f.costs[m]:.4f} in all.",
                      [{"metric": "cost_usd", "model": m, "value": round(f.costs[m], 6)}])
    if kind == "cited":
        finding = rng.choice(sorted(f.findings))
        return _claim(f"{m} averages {f.means[m]:.2f} ({finding}).",
                      [{"metric": "mean", "model": m, "value": round(f.means[m], 4)}], findings=[finding])
    return _claim(f"{m} averages {f.means[m]:.2f}.", [{"metric": "mean", "model": m, "value": round(f.means[m], 4)}])


def false_claim(fx: Fixture, rng: random.Random, mutation: str) -> dict | None:
    """A claim broken in one way, or None when this fixture cannot break it that way (draw another)."""
    f = fx.figures
    m = rng.choice(fx.variants)
    mean = f.means[m]
    if mutation == "wrong_number":
        shift = rng.choice([-1, 1]) * rng.uniform(0.02, 0.3)
        wrong = mean + shift
        if not 0 <= wrong <= 1:
            wrong = mean - shift
        return _claim(f"{m} averages {wrong:.2f}.", [{"metric": "mean", "model": m, "value": round(wrong, 4)}])
    if mutation == "wrong_entity":
        other = rng.choice([v for v in fx.variants if v != m])
        if abs(f.means[other] - mean) <= 0.006:
            return None
        return _claim(f"{other} averages {mean:.2f}.", [{"metric": "mean", "model": other, "value": round(mean, 4)}])
    if mutation in ("wrong_direction", "cant_tell_direction"):
        want_decided = mutation == "wrong_direction"
        found = [(a, b, d, verdict) for (a, b), (d, verdict) in f.deltas.items()
                 if (verdict != "cant_tell") == want_decided]
        if not found:
            return None
        a, b, d, verdict = rng.choice(found)
        if want_decided:  # the loser said better
            winner, loser = (a, b) if verdict == "better" else (b, a)
            return _claim(f"{loser} is better than {winner}.", [], [{"model": loser, "vs": winner,
                                                                     "direction": "better"}])
        return _claim(f"{a} is better than {b}.", [], [{"model": a, "vs": b, "direction": "better"}])
    if mutation == "percent_for_points":
        (a, b), (d, _) = rng.choice(list(f.deltas.items()))
        if abs(d) < 0.01:
            return None
        return _claim(f"{a} differs from {b} by {100 * abs(d):.0f}%.",
                      [{"metric": "delta", "model": a, "vs": b, "value": round(d, 4)}])
    if mutation == "bare_for_score":
        if mean < 0.02:
            return None
        return _claim(f"{m} averages {100 * mean:.0f}.", [{"metric": "mean", "model": m, "value": round(mean, 4)}])
    if mutation == "invented_model":
        ghost = rng.choice(["openai:gpt-9[temp:0]", "M99", "acme:model-x[temp:0]"])
        return _claim(f"{ghost} averages {mean:.2f}.", [{"metric": "mean", "model": ghost, "value": round(mean, 4)}])
    if mutation == "invented_prompt":
        return _claim(f"On prompt-999, {m} scores 0.50.",
                      [{"metric": "cell", "model": m, "prompt": "prompt-999", "value": 0.5}])
    if mutation == "invented_finding":
        return _claim(f"{m} averages {mean:.2f} (F99).", [{"metric": "mean", "model": m, "value": round(mean, 4)}],
                      findings=["F99"])
    if mutation == "stray_number":
        count = rng.randint(2, 500)
        return _claim(f"{m} averages {mean:.2f} over {count} answers.",
                      [{"metric": "mean", "model": m, "value": round(mean, 4)}])
    raise ValueError(mutation)
