"""Benchmark: the estimate is the bill, on the corpus (/work/shared/corpus/weval-configs/blueprints).

    .venv/bin/python tests/bench/bench_estimate.py [--sample 20] [--all]

Each file is imported and run for real (runs.start.start_run, fresh, tasks inline) against the fake LLM
server, its models replaced by two fake candidates and its judges by two fake judges (a fixed answer each),
and the estimate of the same run (runs.start.estimate_start, told the answers' length) is compared with
what the fake server received. Targets: estimated calls == requests received, for every file; estimated
input tokens within 10% of the requests' (both counted as characters / 4). Output tokens are an upper
bound (every answer its whole max_tokens) unless the answer length is given, as here.
A fixed sample of 20 files (every n-th of the sorted list) by default: all of them take long on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path("/work/shared/corpus/weval-configs/blueprints")
ANSWER = "A short fixed answer from the fake model, the same for every prompt and turn of the benchmark run."
JUDGE_REPLY = "<reflection>It does.</reflection>\n<classification>CLASS_EXACTLY_MET</classification>"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="bench-estimate-"))
    os.environ["EVALSITE_TASKS_SYNC"] = "1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    from tests.fakes.llm_server import FakeLLMServer

    server = FakeLLMServer(latency_ms=0)
    server.start_in_thread()
    os.environ["OPENAI_BASE_URL"] = server.base_url + "/v1"
    os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-real-key-123456"
    import django

    django.setup()
    import logging

    logging.getLogger("django-q").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from blueprints.importing import import_files
    from blueprints.spec.files import read_text
    from runs import start as run_start
    from runs.engine.estimate import tokens
    from runs.spec import RunRefused

    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yml", ".yaml", ".json") and p.is_file())
    if not args.all:
        step = max(1, len(files) // args.sample)
        files = files[::step][:args.sample]
    models, judges = ["openai:bench-a", "openai:bench-b"], ["openai:bench-judge-1", "openai:bench-judge-2"]
    print(f"{len(files)} files; models {models}, judges {judges}, fresh runs against the fake server")
    print(f"{'file':50} {'calls est':>9} {'made':>6} {'in est':>9} {'in made':>9} {'diff':>6}  ok")
    bad, started = 0, time.monotonic()
    totals = [0, 0, 0, 0]
    for path in files:
        server.reset()
        server.script([{"model": "judge", "match": "CRITERION", "reply": JUDGE_REPLY},
                       {"model": "bench-[ab]", "match": "", "reply": ANSWER}])
        text = read_text(path)
        item = import_files([(path.name, text, {})], via="bench").items[0]
        if item.blueprint is None:
            print(f"{path.name[:50]:50} skipped: {item.message[:60]}")
            continue
        try:
            planned = run_start.plan_start(item.blueprint, models=models, judges=judges)
            estimate = run_start.estimate_run(planned.blueprint, planned.models, planned.plan, fresh=True,
                                              embedding_model=planned.embedding_model,
                                              answer_tokens=tokens(len(ANSWER)))
            if estimate.total_calls > 3000:
                print(f"{path.name[:50]:50} skipped: {estimate.total_calls} calls is too many for this bench")
                continue
            run_start.start_run(item.blueprint, models=models, judges=judges, fresh=True, source="cli")
        except RunRefused as refused:
            print(f"{path.name[:50]:50} refused: {refused.message[:60]}")
            continue
        sent = server.requests()
        made_in = sum(tokens(sum(len(m.get("content") or "") for m in r.get("messages", []))) for r in sent)
        est_in = estimate.input_tokens
        diff = (est_in - made_in) / made_in if made_in else 0.0
        ok = estimate.total_calls == len(sent) and abs(diff) <= 0.10
        bad += not ok
        totals = [totals[0] + estimate.total_calls, totals[1] + len(sent), totals[2] + est_in, totals[3] + made_in]
        print(f"{path.name[:50]:50} {estimate.total_calls:9} {len(sent):6} {est_in:9} {made_in:9} {diff:+6.1%}"
              f"  {'ok' if ok else 'MISS'}")
    server.stop_in_thread()
    print(f"calls: estimated {totals[0]:,}, made {totals[1]:,} (target: equal for every file)")
    print(f"input tokens: estimated {totals[2]:,}, made {totals[3]:,} "
          f"({(totals[2] - totals[3]) / max(1, totals[3]):+.1%}; target within 10% for every file)")
    print(f"{bad} file(s) off target; {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
