"""Benchmark (issue 35, "the cheapest evidence to decide"): follow-ups decided by the anytime-valid sequence.

1. 200 seeded null follow-ups (no difference on any prompt): an original run of 60 prompts, the suggested
   follow-up (``sequential.plan``: the prompts where the two disagree most, the answers needed), its answers
   looked at after every 10 and stopped at the first decision. Target: a false "better" or "worse" in at most 5%.
2. The same with a planted 5-point gap (model A 0.05 above B on every prompt). Target: the follow-up reaches
   "better" in at least 80% of seeds.
3. A real follow-up through ``manage.py followup`` against the fake LLM server (a judged point, prices of the
   bench's own), where the two now answer alike so that it runs to its end: the predicted calls against the calls
   the fake server received (target: equal), the expected cost against what the run spent (target: within 15%).

Run with `make bench` or `.venv/bin/python tests/bench/bench_followup.py` (`--seed-offset N` for other seeds).
"""

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runs.engine import sequential, stats  # noqa: E402

SEEDS = 200
PROMPTS = 60
NOISE = 0.2
LOOK_EVERY = 10


def _scores(rng, quality, gap, n_trials):
    """Answers on a five-point scale around each prompt's quality (plus the gap), per prompt x trial."""
    raw = quality[:, None] + gap + rng.normal(0, NOISE, (len(quality), n_trials))
    return np.clip(np.round(raw * 4) / 4, 0, 1)


def simulate(gap: float, seed: int) -> tuple[str, int, int]:
    """One original run and its suggested follow-up: (the follow-up's verdict, answers asked, answers planned)."""
    rng = np.random.default_rng(seed)
    quality = rng.uniform(0.2, 0.8, PROMPTS)
    a, b = _scores(rng, quality, gap, 1)[:, 0], _scores(rng, quality, 0.0, 1)[:, 0]
    ids = [f"p{i}" for i in range(PROMPTS)]
    original = stats.paired(a, b)
    plan = sequential.plan({k: float(x - y) for k, x, y in zip(ids, a, b)}, original.delta)
    if not plan.prompts:
        return "cant_tell", 0, 0
    chosen = sorted(int(k[1:]) for k in plan.prompts)  # the order items are worked: prompt by prompt, then trial
    fa = _scores(rng, quality[chosen], gap, plan.trials)
    fb = _scores(rng, quality[chosen], 0.0, plan.trials)
    diffs = (fa - fb).ravel()
    n, verdict = sequential.first_decision(diffs, every=LOOK_EVERY)
    return verdict, n, len(diffs)


def simulations(offset: int) -> None:
    false = [simulate(0.0, offset + s) for s in range(SEEDS)]
    wrong = sum(1 for v, _, _ in false if v != "cant_tell")
    print(f"null follow-ups: a false 'better' or 'worse' in {wrong} of {SEEDS} ({wrong / SEEDS:.1%}; target <= 5%), "
          f"looked at after every {LOOK_EVERY} answers; answers asked: median {np.median([n for _, n, _ in false]):.0f}")
    planted = [simulate(0.05, 10_000 + offset + s) for s in range(SEEDS)]
    right = sum(1 for v, _, _ in planted if v == "better")
    reversed_ = sum(1 for v, _, _ in planted if v == "worse")
    asked = [n for _, n, _ in planted]
    planned = [m for _, _, m in planted]
    print(f"planted 5-point gap: the follow-up says 'better' in {right} of {SEEDS} ({right / SEEDS:.1%}; target >= 80%), "
          f"'worse' in {reversed_}; answers asked: median {np.median(asked):.0f} of a planned median "
          f"{np.median(planned):.0f} (stopped early in {sum(1 for n, m in zip(asked, planned) if n < m)})")


def real_followup() -> None:
    os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
    os.environ["EVALSITE_TASKS_SYNC"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    from tests.fakes.llm_server import FakeLLMServer

    server = FakeLLMServer(latency_ms=0, hang_s=30)
    server.start_in_thread()
    os.environ["OPENAI_BASE_URL"] = server.base_url + "/v1"
    os.environ["OPENAI_API_KEY"] = "sk-test-not-a-real-key-123456"
    import django

    django.setup()
    from django.core.management import call_command

    from blueprints.importing import import_files
    from runs import start as run_start
    from runs.engine.providers import prices as engine_prices
    from runs.models import Run

    call_command("migrate", verbosity=0, interactive=False)
    table = Path(os.environ["EVALSITE_DATA_DIR"]) / "prices.json"
    table.write_text(json.dumps({"models": {m: {"input": 2.0, "output": 8.0, "as_of": "2026-01-01"}
                                            for m in ("openai:cand-a", "openai:cand-b", "openai:judge")}}))
    engine_prices.PRICES_FILE = table
    text = ("title: Follow-up bench\nmodels: [openai:cand-a, openai:cand-b]\nevaluationConfig:\n  llm-coverage:\n"
            "    judges:\n      - {id: judge, model: openai:judge, approach: standard}\n---\n"
            + "".join(f"- id: q{i}\n  prompt: Question number {i}?\n  should:\n    - $contains: FINE\n"
                      f"    - Answers question {i} well\n" for i in range(12)))
    blueprint = import_files([("bench.yml", text, {})], via="bench").items[0].blueprint
    judge = {"model": "judge", "match": ".", "reply": "<reflection>Yes.</reflection>"
                                                      "<classification>CLASS_EXACTLY_MET</classification>"}
    server.script([{"model": "cand-b", "match": r"Question number (2|5|9)\b", "reply": "GOOD BAD answer"},
                   {"model": "cand-a", "match": ".", "reply": "GOOD FINE answer"},
                   {"model": "cand-b", "match": ".", "reply": "GOOD FINE answer"}, judge])
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    # From now on the two answer alike, in as many words: the follow-up never decides and asks everything.
    server.script([{"model": "cand-a", "match": ".", "reply": "GOOD FINE answer"},
                   {"model": "cand-b", "match": ".", "reply": "GOOD FINE answer"}, judge])
    before = len(server.requests())
    out = Path(os.environ["EVALSITE_DATA_DIR"]) / "followup.json"
    call_command("followup", str(run.pk), "--a", "openai:cand-a[temp:0]", "--b", "openai:cand-b[temp:0]",
                 "--json", str(out), stdout=io.StringIO())
    data = json.loads(out.read_text())
    made = len(server.requests()) - before
    follow = Run.objects.get(pk=data["followup"]["run"])
    spent = (follow.candidate_cost_usd or 0) + (follow.judge_cost_usd or 0)
    suggestion = data["suggestion"]
    print(f"real follow-up (run {follow.pk}, {follow.status}, {suggestion['answers']} answers of each model on "
          f"{len(suggestion['prompts'])} prompts): predicted calls {suggestion['calls']}, calls made {made} "
          f"(target: equal): {'ok' if made == suggestion['calls'] else 'OFF'}")
    expected = suggestion["costExpectedUsd"]
    off = abs(expected - spent) / spent if spent else float("inf")
    print(f"  expected cost ${expected:.6f}, spent ${spent:.6f}: off by {off:.1%} (target within 15%): "
          f"{'ok' if off <= 0.15 else 'OFF'}; at most ${suggestion['costMostUsd']:.4f}")
    server.stop_in_thread()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed-offset", type=int, default=0)
    args = parser.parse_args()
    simulations(args.seed_offset)
    real_followup()


if __name__ == "__main__":
    main()
