"""Findings on runs with planted facts (issue "Insight with receipts"): over many seeds, each planted fact (one
model meets every should-not point, two give identical answers, one refuses a fifth of prompts) is among the top 3
findings, and the identical pair is the first merge of the similarity tree (embeddings as the fake server makes
them: letter counts).

    .venv/bin/python tests/bench/bench_insight.py [--seeds 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runs.engine.findings import findings  # noqa: E402
from runs.engine.similarity import similarity  # noqa: E402
from tests.fakes.insight_fixture import comparisons, planted  # noqa: E402


def letters(text: str) -> list[float]:
    return [text.lower().count(c) + 0.001 for c in "abcdefghijklmnopqrstuvwxyz"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    hits = {"should_not": 0, "identical": 0, "refusal": 0}
    first_merge = 0
    started = time.perf_counter()
    for seed in range(args.seeds):
        matrix, points, report, answers = planted(seed)
        top = {f.kind: f for f in findings(matrix, comparisons(matrix), points, report)[:3]}
        hits["should_not"] += "should_not" in top and top["should_not"].models == ["unsafe"]
        hits["identical"] += "identical" in top and top["identical"].models == ["twin-a", "twin-b"]
        hits["refusal"] += "refusal" in top and top["refusal"].models == ["refuser"]
        by_prompt: dict[str, dict[str, list[float]]] = {}
        for a in answers:
            by_prompt.setdefault(a.prompt_id, {})[a.variant_id] = letters(a.text or "")
        merge = similarity(by_prompt).merges[0]
        first_merge += {*merge.a, *merge.b} == {"twin-a", "twin-b"}
    elapsed = time.perf_counter() - started
    n = args.seeds
    for fact, label in (("should_not", "meets every should-not point"), ("identical", "identical answers"),
                        ("refusal", "refuses a fifth of prompts")):
        print(f"planted fact '{label}' in the top 3: {hits[fact]}/{n}   target {n}/{n}   "
              f"{'OK' if hits[fact] == n else 'MISSED'}")
    print(f"identical pair is the first merge: {first_merge}/{n}   target {n}/{n}   "
          f"{'OK' if first_merge == n else 'MISSED'}")
    print(f"{n} runs of 5 models x 20 prompts in {elapsed:.2f} s ({1000 * elapsed / n:.0f} ms a run)")


if __name__ == "__main__":
    main()
