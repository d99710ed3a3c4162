"""Benchmark: parse and validate the largest corpus blueprint and the whole corpus.

Targets (issue 2): under 50 ms for the largest file, under 2 s for the whole corpus, on one core.
Run with `make bench` or `.venv/bin/python tests/bench/bench_parse.py`.
"""

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from blueprints.spec import jsregex  # noqa: E402
from blueprints.spec.collections import _collection_near  # noqa: E402
from blueprints.spec.files import iter_blueprint_files, read_text, validate_file  # noqa: E402
from blueprints.spec.parse import parse_blueprint  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "weval-configs"


def cold_caches():
    # Each measurement starts as a fresh process would: no compiled regexes, no collection files read.
    jsregex._compile_cached.cache_clear()
    _collection_near.cache_clear()


def median_seconds(fn, repeat):
    times = []
    for _ in range(repeat):
        cold_caches()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, as the target says
    files = sorted(iter_blueprint_files([CORPUS / "blueprints", CORPUS / "history-json"]))
    largest = max(files, key=lambda p: p.stat().st_size)
    text = read_text(largest)
    validate_file(largest)  # warm imports

    med, best = median_seconds(lambda: parse_blueprint(text, path=str(largest)), 21)
    print(f"largest file ({largest.name}, {len(text.encode()) / 1024:.0f} KB): "
          f"median {med * 1000:.1f} ms, best {best * 1000:.1f} ms  (target < 50 ms)")

    med, best = median_seconds(lambda: [validate_file(p) for p in files], 7)
    size = sum(p.stat().st_size for p in files) / 1024 / 1024
    print(f"whole corpus ({len(files)} files, {size:.1f} MB, collections resolved from disk): "
          f"median {med:.2f} s, best {best:.2f} s  (target < 2 s)")


if __name__ == "__main__":
    main()
