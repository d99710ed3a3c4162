"""Benchmark: `run_blueprint` as a whole process, against a fake provider with a fixed latency.

    .venv/bin/python tests/bench/bench_cli_run.py [--prompts 2000] [--latency-ms 200]
                                                  [--concurrency 50] [--profile] [--py-spy OUT]

2,000 one-turn prompts with one `$contains` point each, one model, no judges:
the run is all generation and persistence. The ideal is calls / concurrency x
latency (8.0 s with the defaults). Printed: the whole command's wall time
against the ideal (target: ideal / wall >= 0.85), its CPU time per call
(user + system of the whole process, start-up counted; target <= 1.0 ms; also
printed without start-up: an empty command's CPU), and its peak memory. With --profile the
command runs under cProfile and the top functions by cumulative and by own
time are printed, so the figures say where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MANAGE = REPO / "manage.py"


def blueprint(prompts: int) -> str:
    lines = ["title: CLI bench\nmodels: [openai:cand]\n---"]
    for p in range(prompts):
        lines.append(f"- id: q{p}\n  prompt: Please explain topic {p} briefly.\n  should:\n    - $contains: topic")
    return "\n".join(lines) + "\n"


def http_floor(base: str, calls: int, concurrency: int) -> float:
    """Seconds the same calls take over raw HTTP to the same fake server (our transport, nothing else):
    the best any run could do here, the fake server's own time per request included."""
    import asyncio

    sys.path.insert(0, str(REPO))
    from runs.engine.providers.transport import PooledTransport

    async def main() -> float:
        transport, gate = PooledTransport(), asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            body = json.dumps({"model": "cand", "messages": [{"role": "user", "content": f"topic {i}"}]}).encode()
            async with gate:
                await transport.post(f"{base}/v1/chat/completions", {"content-type": "application/json"}, body,
                                     timeout_s=60, connect_timeout_s=10)

        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        await transport.aclose()
        return time.perf_counter() - began

    return asyncio.run(main())


def py_spy_command(out: str, command: list[str]) -> list[str]:
    """``command`` under py-spy, 250 samples a second of the threads holding the GIL (our CPU, idle waits left
    out), stacks collapsed to ``out``."""
    spy = Path(sys.executable).with_name("py-spy")
    return [str(spy), "record", "--format", "raw", "--rate", "250", "--gil", "--subprocesses", "-o", out, "--", *command]


def print_py_spy(out: str, top: int = 25) -> None:
    """The frames the samples were busiest in: by own samples (the frame on top) and by total (anywhere below)."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in Path(out).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + n
    for title, table in (("own", own), ("total", total)):
        print(f"\n  py-spy: busiest frames by {title} samples (of {samples:,})")
        for frame, n in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            print(f"    {n / samples:6.1%}  {frame[:150]}")


def child_usage() -> tuple[float, int]:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--py-spy", metavar="OUT", help="sample the command with py-spy (a dev dependency) and write "
                        "its collapsed stacks to OUT; the busiest frames are printed")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="evalsite-cli-bench-"))
    rules = tmp / "rules.json"
    rules.write_text(json.dumps([{"model": "cand", "match": ".", "reply": "A brief explanation of the topic."}]))
    server = subprocess.Popen([sys.executable, str(REPO / "tests/fakes/llm_server.py"), "--latency-ms",
                               str(args.latency_ms), "--no-log", "--script", str(rules)],
                              stdout=subprocess.PIPE, text=True)
    base = server.stdout.readline().split()[-1]
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("EVALSITE_TASKS_SYNC", None)
    env.pop("DATABASE_URL", None)
    env.update(EVALSITE_DATA_DIR=str(tmp / "data"), OPENAI_BASE_URL=base + "/v1", OPENAI_API_KEY="sk-bench",
               EVALSITE_CONCURRENCY=str(args.concurrency), PYTHONUNBUFFERED="1")
    try:
        subprocess.run([sys.executable, str(MANAGE), "migrate", "--noinput", "-v0"], env=env, check=True)
        # What an empty command costs (interpreter, Django, settings): taken off the CPU per call.
        cpu0, _ = child_usage()
        began = time.perf_counter()
        subprocess.run([sys.executable, str(MANAGE), "shell", "-c", "pass"], env=env, check=True,
                       capture_output=True)
        startup_wall = time.perf_counter() - began
        cpu1, _ = child_usage()
        floor = http_floor(base, args.prompts, args.concurrency)
        startup_cpu = cpu1 - cpu0
        path = tmp / "bench.yml"
        path.write_text(blueprint(args.prompts))
        command = [sys.executable, str(MANAGE), "run_blueprint", str(path)]
        profile = tmp / "profile.out"
        if args.profile:
            command = [sys.executable, "-m", "cProfile", "-o", str(profile), *command[1:]]
        elif args.py_spy:
            command = py_spy_command(args.py_spy, command)
        began = time.perf_counter()
        out = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - began
        cpu2, peak = child_usage()
        if out.returncode != 0:
            raise SystemExit(f"run_blueprint exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        calls = args.prompts
        ideal = calls / args.concurrency * args.latency_ms / 1000
        cpu = cpu2 - cpu1
        print(f"run_blueprint: {args.prompts} prompts x 1 model, one $contains point each, "
              f"{args.latency_ms:g} ms latency, concurrency {args.concurrency}"
              f"{' (under cProfile: slower)' if args.profile else ''}")
        print(f"  wall {wall:.2f} s against an ideal of {ideal:.2f} s: ideal/wall {ideal / wall:.2f} (target >= 0.85)")
        print(f"  what no run can beat here: the same calls over raw HTTP take {floor:.2f} s (ideal/floor "
              f"{ideal / floor:.2f}), and starting Python and Django takes {startup_wall:.2f} s; "
              f"evalsite's own share is {wall - floor - startup_wall:.2f} s")
        print(f"  CPU {cpu:.2f} s in all: {cpu * 1000 / calls:.2f} ms per call counting start-up (target <= 1.0 ms), "
              f"{(cpu - startup_cpu) * 1000 / calls:.2f} ms after start-up ({startup_cpu:.2f} s)")
        print(f"  peak memory {peak / 2**20:.0f} MB (largest child process)")
        if args.profile:
            import pstats

            stats = pstats.Stats(str(profile))
            for key in ("cumulative", "tottime"):
                print(f"\n  top functions by {key}:")
                stats.sort_stats(key).print_stats(25)
        if args.py_spy:
            print_py_spy(args.py_spy)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
