"""Benchmark: the run pages of a 10,000-response run under 20 concurrent clients, served as `make run` serves them.

    .venv/bin/python tests/bench/bench_load.py [--duration 60] [--clients 20] [--no-run]
                                               [--run-prompts 300] [--latency-ms 300] [--dev]
                                               [--data-cache DIR]

Builds the run of bench_results.py (1,000 prompts x 10 models, 100,000 point assessments) in a throwaway
data directory, starts scripts/serve.py (gunicorn with one uvicorn process per core, and the task
worker) on 127.0.0.1 with a free port, warms every web process (each page from several connections at once),
times each page alone, then starts a small run against the fake LLM server (tests/fakes/llm_server.py) so the
worker is busy, as it is while someone watches a run, and lets `--clients` threads fetch the pages back to
back (no pause between requests) for `--duration` seconds.
Printed per page: requests, errors, median, p95 and max against the targets of issue 23: no errors,
p95 under 2 s, median under 0.5 s; the largest web process's memory (after the warm-up, after each page
alone, over the load, and its peak, against issue 37's 300 MB); each figure beside its target and the previous
measurement; and where the CPU went (web server, task worker, this client).
`--dev` serves with Django's development server instead (`make dev`), to compare. `--data-cache DIR` keeps
the built database in DIR and reuses it next time (building it takes a minute or more).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

# Imported for its run builder; the import also points EVALSITE_DATA_DIR at a new temporary folder and
# sets Django up with it.
import bench_results  # noqa: E402
from bench_run import CLOCK, cpu_and_peak, tree  # noqa: E402

import httpx  # noqa: E402

REPO = bench_results.REPO
DATA_DIR = Path(os.environ["EVALSITE_DATA_DIR"])
TARGET_MEDIAN_S = 0.5
TARGET_P95_S = 2.0
TARGET_PEAK_MB = 300  # the largest web server process (issue 37: kept matrices bounded, EVALSITE_MATRIX_CACHE_MB)
# The last figures measured (branch grid: filtered and sorted grid views read off the matrix's cells, 20 clients for
# 40 s on the 2-core machine shared with other work: over 40% of its CPU went elsewhere), printed beside today's.
# "Below 0.9, lowest first" then had the plain grid's median (0.66 s; before, in the same minutes: 1.07 s against
# 0.84, the worst page), 31.6 pages a second of the web server's CPU against 21.3; the worst median was the run
# page's. Before it (b52409b, a fifth of the CPU elsewhere): p95 1.42 s, worst median 0.75 s, peak 238 MB,
# 29.4 pages/s; (1c89163, a third elsewhere): p95 2.96 s, worst median 1.42 s, peak 418 MB, 14.2 pages/s.
PREVIOUS = {"p95": 1.64, "median": 0.73, "peak_mb": 258, "pages_per_s": 28.2}
BENCH_TOKEN = "bench-token-" + "0" * 20
AUTH = {"Authorization": f"Bearer {BENCH_TOKEN}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def session_pids(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) == sid:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def small_blueprint(prompts: int) -> str:
    lines = ["title: Working run (load bench)\nmodels: [openai:cand-a, openai:cand-b]\n---"]
    for p in range(prompts):
        lines.append(f"- id: w{p}\n  prompt: Please explain topic {p} briefly.\n  should:")
        lines.extend(f"    - Mentions aspect {k} of topic {p}" for k in range(3))
    return "\n".join(lines) + "\n"


def page_makers(run_id: int, response_ids: list[int], prompts: int):
    """Each page: a name and a function giving the next URL (random within the page's kind)."""
    return [
        ("run page", lambda rng: f"/runs/{run_id}/"),
        ("heatmap (a page of 100 prompts)", lambda rng: f"/runs/{run_id}/heatmap?page={rng.randint(1, 10)}"),
        ("results grid", lambda rng: f"/runs/{run_id}/results"),
        ("results grid, below 0.9, lowest first",
         lambda rng: f"/runs/{run_id}/results?filter=failures&threshold=0.9&sort=score"),
        ("response page", lambda rng: f"/runs/{run_id}/responses/{rng.choice(response_ids)}/"),
        ("one prompt, 10 models", lambda rng: f"/runs/{run_id}/prompts/{rng.randrange(prompts)}/"),
    ]


def fetch(client: httpx.Client, url: str) -> tuple[float, str | None]:
    started = time.perf_counter()
    try:
        answer = client.get(url)
        error = None if answer.status_code == 200 else f"HTTP {answer.status_code}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    return time.perf_counter() - started, error


def load(base: str, pages, clients: int, duration_s: float, web_pids: list[int]):
    results: dict[str, list[float]] = {name: [] for name, _ in pages}
    errors: dict[str, list[str]] = {name: [] for name, _ in pages}
    lock = threading.Lock()
    begun = time.monotonic()
    deadline = begun + duration_s
    slow: list[tuple[float, float, str]] = []  # (when it started, seconds, page) of requests over 5 s

    def client_loop(index: int):
        rng = random.Random(index)
        turn = index
        with httpx.Client(base_url=base, timeout=60, headers=AUTH) as client:
            while time.monotonic() < deadline:
                name, make = pages[turn % len(pages)]
                turn += 1
                at = time.monotonic() - begun
                seconds, error = fetch(client, make(rng))
                with lock:
                    results[name].append(seconds)
                    if seconds > 5:
                        slow.append((at, seconds, name))
                    if error:
                        errors[name].append(error)

    rss: list[tuple[float, float]] = []  # (seconds into the load, the largest web process's RSS in MB)

    def watch_memory():
        while time.monotonic() < deadline:
            rss.append((time.monotonic() - begun, largest_rss_mb(web_pids)))
            time.sleep(0.5)

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(clients)]
    for thread in [*threads, threading.Thread(target=watch_memory, daemon=True)]:
        thread.start()
    for thread in threads:
        thread.join(duration_s + 90)
    if rss:  # whether the largest process grew at once (cold pages built at the same time) or kept growing
        tenths: dict[int, float] = {}
        for at, mb in rss:
            tenth = min(9, int(at * 10 / duration_s))
            tenths[tenth] = max(tenths.get(tenth, 0.0), mb)
        steps = [tenths[k] for k in sorted(tenths)]
        print("largest web process's RSS, the most in each tenth of the load: "
              + " ".join(f"{mb:.0f}" for mb in steps) + " MB")
    if slow:  # when the slowest requests began: a stall of the whole server shows as one cluster
        first, last = min(s[0] for s in slow), max(s[0] + s[1] for s in slow)
        print(f"{len(slow)} requests took over 5 s, begun between {first:.1f} s and {max(s[0] for s in slow):.1f} s "
              f"into the load (all done by {last:.1f} s)")
    return results, errors


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (everything but idle and I/O wait)."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLOCK


def group_cpu(pgid: int | None) -> tuple[float, int]:
    """CPU seconds and the largest peak RSS among a process group's processes."""
    if pgid is None:
        return 0.0, 0
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and pgid_of(int(p.name)) == pgid]
    cpu, peak, _ = cpu_and_peak(pids)
    return cpu, peak


def largest_rss_mb(pids: list[int]) -> float:
    """The largest resident set among the processes now, in MB."""
    largest = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        largest = max(largest, next((int(line.split()[1]) for line in status.splitlines()
                                     if line.startswith("VmRSS:")), 0))
    return largest / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=60, help="seconds of load (default 60)")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--no-run", action="store_true", help="no run working in the background")
    parser.add_argument("--run-prompts", type=int, default=300,
                        help="prompts of the background run (x 2 models); 300 keep the worker busy about a minute")
    parser.add_argument("--latency-ms", type=float, default=300, help="the fake LLM server's latency")
    parser.add_argument("--dev", action="store_true", help="serve as `make dev` does (runserver), to compare")
    parser.add_argument("--data-cache", type=Path, metavar="DIR",
                        help="reuse the database built into DIR by an earlier run of this option (the run takes a "
                             "minute or more to build), or build it and keep a copy there")
    args = parser.parse_args()

    from django.core.management import call_command
    from django.db import connections

    from runs.models import Response, Run

    tmp = Path(tempfile.mkdtemp(prefix="evalsite-load-"))
    served = fake = None
    try:
        cached = args.data_cache / "db.sqlite3" if args.data_cache else None
        started = time.perf_counter()
        if cached is not None and cached.exists():
            shutil.copyfile(cached, DATA_DIR / "db.sqlite3")  # before Django opens its connection
            call_command("migrate", verbosity=0, interactive=False)
            run = Run.objects.order_by("pk").first()
            how = f"copied from {cached}"
        else:
            call_command("migrate", verbosity=0, interactive=False)
            run, _ = bench_results.build()
            how = f"built in {time.perf_counter() - started:.0f} s"
        response_ids = list(Response.objects.filter(run=run).values_list("pk", flat=True))
        print(f"a run of {len(response_ids):,} responses, {how}")
        connections.close_all()
        if cached is not None and not cached.exists():
            cached.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(DATA_DIR / "db.sqlite3", cached)

        rules = tmp / "rules.json"
        rules.write_text(json.dumps([
            {"model": "judge", "match": "<CRITERION>",
             "reply": "<reflection>Mentioned.</reflection><classification>CLASS_EXACTLY_MET</classification>"},
            {"model": "cand", "match": ".", "reply": "A brief explanation that covers the topic in a few words."},
        ]))
        fake = subprocess.Popen([sys.executable, str(REPO / "tests/fakes/llm_server.py"), "--latency-ms",
                                 str(args.latency_ms), "--no-log", "--script", str(rules)],
                                stdout=subprocess.PIPE, text=True)
        llm_base = fake.stdout.readline().split()[-1]

        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in (
            "EVALSITE_TASKS_SYNC", "DATABASE_URL", "REDIS_URL", "EVALSITE_API_TOKEN")}
        env.update(PORT=str(port), EVALSITE_DATA_DIR=str(DATA_DIR), OPENAI_BASE_URL=llm_base + "/v1",
                   OPENAI_API_KEY="sk-bench", EVALSITE_API_TOKEN=BENCH_TOKEN)
        log = open(tmp / "serve.log", "w")
        command = [sys.executable, str(REPO / "scripts" / "serve.py"), *(["--dev"] if args.dev else [])]
        served = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        with httpx.Client(base_url=base, timeout=5) as client:
            while True:
                try:
                    if client.get("/healthz").text == "ok":
                        break
                except httpx.HTTPError:
                    pass
                if served.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the server did not start; its output:\n{(tmp / 'serve.log').read_text()}")
                time.sleep(0.3)
        text = (tmp / "serve.log").read_text()
        server, web_pid = re.search(r"web server \((\w+)\) started, pid (\d+)", text).groups()
        web_pid = int(web_pid)
        worker_pid = int(re.search(r"task worker \(qcluster\) started, pid (\d+)", text).group(1))
        processes = len([p for p in tree(web_pid) if p != web_pid])
        print(f"serving at {base}: {server} with {processes} child processes, the task worker beside it")

        pages = page_makers(run.pk, response_ids, bench_results.PROMPTS)
        rng = random.Random(0)
        alone: dict[str, float] = {}
        # Starting a run through the API needs the token, even on loopback (README, "Security").
        with httpx.Client(base_url=base, timeout=60, headers=AUTH) as client:
            started = time.perf_counter()
            # Each process parses the 1,000-prompt revision once and builds the run's matrix: requests on a
            # connection of their own each, at the same time, so that every process gets some (one connection
            # kept alive would take them all to one process, and the others would meet the load cold).
            def warm_up(seed: int):
                with httpx.Client(base_url=base, timeout=60, headers=AUTH) as own:
                    for _, make in pages:
                        fetch(own, make(random.Random(seed)))

            warm = [threading.Thread(target=warm_up, args=(i,)) for i in range(max(processes, 1) * 3)]
            for thread in warm:
                thread.start()
            for thread in warm:
                thread.join()
            print(f"warm-up (every page {len(warm)} times at once): {time.perf_counter() - started:.1f} s")
            web_pids = [p for p in tree(web_pid) if p != web_pid] or [web_pid]
            print("web processes after the warm-up: "
                  + ", ".join(f"{largest_rss_mb([pid]):.0f}" for pid in web_pids) + " MB")
            rss_alone = {}
            for name, make in pages:
                alone[name] = statistics.median(fetch(client, make(rng))[0] for _ in range(5))
                rss_alone[name] = largest_rss_mb(web_pids)
            print("largest web process after each page alone (5 requests, one at a time): " + ", ".join(
                f"{name} {mb:.0f} MB" for name, mb in rss_alone.items()))

            working = None
            if not args.no_run:
                answer = client.post("/api/runs", json={"blueprint": small_blueprint(args.run_prompts),
                                                        "judges": ["openai:judge-a", "openai:judge-b"]})
                answer.raise_for_status()
                working = answer.json()["id"]
                pages.append(("working run's page", lambda rng: f"/runs/{working}/"))
                alone["working run's page"] = statistics.median(
                    fetch(client, f"/runs/{working}/")[0] for _ in range(3))
                calls = args.run_prompts * 2 * (1 + 3 * 2)
                print(f"started run {working} in the background: {args.run_prompts} prompts x 2 models, 3 points, "
                      f"2 judges ({calls:,} calls at {args.latency_ms:.0f} ms) against the fake LLM server")

        web_group, worker_group = pgid_of(web_pid), pgid_of(worker_pid)
        cpu_before = (group_cpu(web_group)[0], group_cpu(worker_group)[0], time.process_time(), machine_busy())
        print(f"{args.clients} clients, back to back, for {args.duration:.0f} s ...", flush=True)
        started = time.perf_counter()
        results, errors = load(base, pages, args.clients, args.duration, web_pids)
        elapsed = time.perf_counter() - started
        (web_cpu_after, web_peak), worker_cpu_after = group_cpu(web_group), group_cpu(worker_group)[0]
        cpu_after = (web_cpu_after, worker_cpu_after, time.process_time(), machine_busy())

        total = sum(len(v) for v in results.values())
        print(f"\n{total:,} requests in {elapsed:.0f} s ({total / elapsed:.1f}/s)\n")
        print(f"{'page':40s} {'alone':>7s} {'requests':>8s} {'errors':>6s} {'median':>7s} {'p95':>7s} {'max':>7s}")
        worst = {"errors": 0, "median": 0.0, "p95": 0.0}
        for name, _ in pages:
            times = results[name]
            if not times:
                print(f"{name:40s} no request finished")
                continue
            median, p95 = statistics.median(times), percentile(times, 0.95)
            worst = {"errors": worst["errors"] + len(errors[name]), "median": max(worst["median"], median),
                     "p95": max(worst["p95"], p95)}
            print(f"{name:40s} {alone[name]:6.2f}s {len(times):8d} {len(errors[name]):6d} {median:6.2f}s "
                  f"{p95:6.2f}s {max(times):6.2f}s")
            for error in sorted(set(errors[name]))[:3]:
                print(f"    {error}")
        verdict = lambda ok: "OK" if ok else "MISSED"  # noqa: E731
        before = lambda name, unit: "-" if PREVIOUS.get(name) is None else f"{PREVIOUS[name]:g}{unit}"  # noqa: E731
        peak_mb = web_peak / 2**20
        print(f"\n{'figure':36s} {'now':>9s} {'target':>9s} {'previous':>9s}")
        for name, now, target, ok, previous in (
                ("errors", f"{worst['errors']}", "0", worst["errors"] == 0, "-"),
                ("worst median", f"{worst['median']:.2f}s", f"< {TARGET_MEDIAN_S:g}s",
                 worst["median"] < TARGET_MEDIAN_S, before("median", "s")),
                ("worst p95", f"{worst['p95']:.2f}s", f"< {TARGET_P95_S:g}s", worst["p95"] < TARGET_P95_S,
                 before("p95", "s")),
                ("largest web process, peak", f"{peak_mb:.0f}MB", f"< {TARGET_PEAK_MB}MB", peak_mb < TARGET_PEAK_MB,
                 before("peak_mb", "MB")),
                ("pages a second", f"{total / elapsed:.1f}", "-", True, before("pages_per_s", ""))):
            print(f"{name:36s} {now:>9s} {target:>9s} {previous:>9s}  {verdict(ok) if target != '-' else ''}")
        print(f"(EVALSITE_MATRIX_CACHE_MB = {os.environ.get('EVALSITE_MATRIX_CACHE_MB', 'default')}; this machine "
              f"may be shared with other work: figures are noisy)")
        web_cpu, worker_cpu, client_cpu, busy = (after - before for after, before in zip(cpu_after, cpu_before))
        cores = len(os.sched_getaffinity(0))
        print(f"CPU during the load: web server {web_cpu:.0f} s, task worker {worker_cpu:.0f} s, this client "
              f"{client_cpu:.0f} s, other processes {max(0.0, busy - web_cpu - worker_cpu - client_cpu):.0f} s, "
              f"of {cores * elapsed:.0f} s on {cores} cores; the largest web server process peaked at "
              f"{peak_mb:.0f} MB")
        mean_alone = statistics.mean(alone.values())
        print(f"capacity bound: {cores} cores / {mean_alone:.2f} s mean page time alone = "
              f"{cores / mean_alone:.1f} pages/s; {args.clients} clients back to back then wait about "
              f"{args.clients * mean_alone / cores:.1f} s a page however the server is arranged")
        if working is not None:
            with httpx.Client(base_url=base, timeout=30, headers=AUTH) as client:
                status = client.get(f"/api/runs/{working}").json()
            took = ""
            if status.get("startedAt") and status.get("finishedAt"):
                from datetime import datetime

                seconds = (datetime.fromisoformat(status["finishedAt"])
                           - datetime.fromisoformat(status["startedAt"])).total_seconds()
                took = f", finished {seconds:.0f} s after it started (the load lasted {elapsed:.0f} s)"
            print(f"background run {working}: {status.get('status')}, items {json.dumps(status.get('items'))}{took}")
    finally:
        if served is not None:
            served.send_signal(signal.SIGTERM)
            try:
                served.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            for pid in session_pids(served.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            served.wait()
        if fake is not None:
            fake.terminate()
            fake.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(DATA_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
