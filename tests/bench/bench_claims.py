"""The summary checker against a fake writer (issue "Insight with receipts"): every kind of false claim refused,
no true claim refused, the same accepted claims under five permutations of the anonymous ids.

    .venv/bin/python tests/bench/bench_claims.py [--fixtures 200] [--seed 31]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runs.engine.claims import Checker  # noqa: E402
from tests.fakes.claims_writer import MUTATIONS, false_claim, fixture, true_claim  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=int, default=200)
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    made = {m: 0 for m in MUTATIONS}
    refused = {m: 0 for m in MUTATIONS}
    true_made = true_refused = 0
    started = time.perf_counter()
    for _ in range(args.fixtures):
        fx = fixture(rng)
        checker = Checker(fx.figures)
        for _ in range(5):
            true_made += 1
            true_refused += not checker.check(true_claim(fx, rng)).ok
        for mutation in MUTATIONS:
            claim = false_claim(fx, rng, mutation)
            if claim is not None:
                made[mutation] += 1
                refused[mutation] += not checker.check(claim).ok
    elapsed = time.perf_counter() - started
    print(f"{'mutation':<22} {'made':>6} {'refused':>8}   target: >= 50 made, 100% refused")
    for mutation in MUTATIONS:
        ok = made[mutation] >= 50 and refused[mutation] == made[mutation]
        print(f"{mutation:<22} {made[mutation]:>6} {100 * refused[mutation] / max(1, made[mutation]):>7.1f}%"
              f"   {'OK' if ok else 'MISSED'}")
    ok = true_made >= 200 and true_refused == 0
    print(f"{'true claims':<22} {true_made:>6} {true_refused:>7} refused   target: >= 200 made, 0 refused   "
          f"{'OK' if ok else 'MISSED'}")
    checked = true_made + sum(made.values())
    print(f"checked {checked} claims in {elapsed:.2f} s ({1e6 * elapsed / checked:.0f} us a claim)")


if __name__ == "__main__":
    main()
