"""Benchmark: what scaling out buys -- one run on PostgreSQL and Redis through 1, 2 and 4 worker processes.

    .venv/bin/python tests/bench/bench_scale.py [--prompts 2000] [--models 2] [--points 2] [--judges 2]
                                                [--latency-ms 500] [--concurrency 50] [--workers 1,2,4]
                                                [--kill-workers 4] [--kill-at 0.3] [--py-spy OUT]

2,000 prompts x 2 models x 2 judged points with 2 judges is 4,000 items and 20,000 calls. The site runs as a
scaled-out deployment would: the project's throwaway PostgreSQL and Redis (tests/services.py) as
DATABASE_URL and REDIS_URL (Redis is django-q2's broker), and N ``manage.py qcluster`` processes, each with
one worker process and its own connection limit (EVALSITE_WORKERS=1, EVALSITE_CONCURRENCY=50), against
the fake LLM server of bench_run.py in its own process (a new one, and a new tag in every prompt so no
answer comes from the cache, for each run). The run is meant to be latency-bound, so that the figures
measure how the workers share a run, not how many cores there are: at 500 ms a call, N workers keep N x 50
calls in flight, 100 calls a second each, which on PostgreSQL costs a worker a third of a core or so (3-4 ms
of CPU a call, the response cache's queries included). Each run says whether it was latency-bound (at the
ideal pace its processes would need at most half the cores); on 2 cores four workers are at the edge, and
other load on the machine pushes them over (docs/runs.md, "Scaling out", has the figures). About 10
minutes by default: one worker's run alone is 200 s of calls; ``--latency-ms 1000`` is twice that.

Printed per run: the wall time from the first item to the finished run (the run's own timestamps) against
the ideal (calls / (N x concurrency) x latency) and against one worker's time (targets: two workers <= 0.55
of it, four <= 0.30); that every item was done exactly once, counted twice: in the database (every item
done, claimed once, its points stored once) and at the fake server (its tally of requests by model and
conversation: every call arrived, none twice). Then one more run with ``--kill-workers`` workers, one of
which gets SIGKILL (its whole process group) once ``--kill-at`` of the items are done: the items it held
must finish on the others, no item may be stored twice, and the only calls sent twice may be those of the
items it held (a call in flight when a process dies had no answer yet and is sent again).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli_run import print_py_spy, py_spy_command  # noqa: E402
from bench_run import blueprint, cpu_and_peak, tree  # noqa: E402

from tests.services import missing_binaries, start_postgres, start_redis  # noqa: E402

MANAGE = REPO / "manage.py"


def fake_rules(models: int) -> list[dict]:
    """The judges say "met"; each candidate answers in its own words, so no two items send a judge the same
    conversation (the fake server's tally tells calls apart by their conversation)."""
    return [{"model": "judge", "match": "<CRITERION>",
             "reply": "<reflection>Mentioned.</reflection><classification>CLASS_EXACTLY_MET</classification>"},
            *({"model": f"^cand-{i}$", "match": ".",
               "reply": f"A brief explanation that covers the topic in a few words (candidate {i})."}
              for i in range(models))]


TARGETS = {2: 0.55, 4: 0.30}  # of one worker's wall time (issue 37)
READY_TIMEOUT_S = 120


@dataclass
class Outcome:
    workers: int
    wall: float
    ideal: float
    items: int
    calls: int
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)


class Deployment:
    """PostgreSQL, Redis and a data directory shared by every run's workers."""

    def __init__(self, args, database_url: str, redis_url: str, tmp: Path, services: list[int]):
        self.args, self.tmp = args, tmp
        self.services = services  # PostgreSQL's and Redis's process ids
        self.database_url, self.redis_url = database_url, redis_url
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        for name in ("EVALSITE_TASKS_SYNC", "EVALSITE_CONCURRENCY", "EVALSITE_CHUNK_SIZE",
                     "EVALSITE_ITEMS_IN_FLIGHT"):
            env.pop(name, None)
        env.update(EVALSITE_DATA_DIR=str(tmp / "data"), DATABASE_URL=database_url, REDIS_URL=redis_url,
                   OPENAI_API_KEY="sk-bench", EVALSITE_CONCURRENCY=str(args.concurrency), EVALSITE_WORKERS="1",
                   PYTHONUNBUFFERED="1")
        self.env = env
        subprocess.run([sys.executable, str(MANAGE), "migrate", "--noinput", "-v0"], env=env, check=True)

    def flush_broker(self) -> None:
        import redis

        redis.Redis.from_url(self.redis_url).flushdb()

    def query(self, sql: str, *params):
        import psycopg

        with psycopg.connect(self.database_url) as connection:
            return connection.execute(sql, params).fetchall()


def start_fake(latency_ms: float, models: int, tmp: Path) -> tuple[subprocess.Popen, str]:
    rules = tmp / "rules.json"
    rules.write_text(json.dumps(fake_rules(models)))
    server = subprocess.Popen([sys.executable, str(REPO / "tests/fakes/llm_server.py"), "--latency-ms",
                               str(latency_ms), "--no-log", "--script", str(rules)], stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().split()[-1]


def stop_all(groups: list[subprocess.Popen], timeout: float = 10.0) -> None:
    """SIGTERM to every process group at once, SIGKILL to those still there after ``timeout`` (the run is over:
    a worker has nothing left to finish)."""
    running = [p for p in groups if p.poll() is None]
    for process in running:
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def start_workers(site: Deployment, env: dict, count: int, tag: str, spy: str | None = None) -> list[subprocess.Popen]:
    """``count`` qclusters, each in its own process group; returns once every one says it is running. ``spy``:
    the first runs under py-spy, which writes its samples there."""
    workers, logs = [], []
    for n in range(count):
        logs.append(site.tmp / f"worker-{tag}-{n}.log")
        command = [sys.executable, str(MANAGE), "qcluster"]
        if spy and n == 0:
            command = py_spy_command(spy, command)
        workers.append(subprocess.Popen(command, env=env,
                                        stdout=open(logs[-1], "w"), stderr=subprocess.STDOUT,
                                        start_new_session=True))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not all(re.search(r"Q Cluster .* running", log.read_text()) for log in logs):
        for worker, log in zip(workers, logs):
            if worker.poll() is not None:
                raise SystemExit(f"a worker stopped while starting:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"the workers were not running after {READY_TIMEOUT_S} s")
        time.sleep(0.2)
    return workers


def services_cpu(site: Deployment) -> float:
    """CPU seconds PostgreSQL and Redis have used so far, their exited children's included (PostgreSQL's
    backends end with their connections and are counted in the postmaster then)."""
    total = 0.0
    for root in site.services:
        for pid in tree(root):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def fake_tally(base: str) -> dict:
    with urllib.request.urlopen(base + "/_control/tally", timeout=60) as answer:
        return json.load(answer)


def one_run(site: Deployment, workers_count: int, tag: str, *, kill_at: float | None = None,
            spy: str | None = None) -> Outcome:
    args = site.args
    items = args.prompts * args.models
    calls = items * (1 + args.points * args.judges)
    ideal = calls / (workers_count * args.concurrency) * args.latency_ms / 1000
    server, base = start_fake(args.latency_ms, args.models, site.tmp)
    env = {**site.env, "OPENAI_BASE_URL": base + "/v1"}
    workers: list[subprocess.Popen] = []
    outcome = Outcome(workers_count, 0.0, ideal, items, calls)
    try:
        workers = start_workers(site, env, workers_count, tag, spy)
        path = site.tmp / f"{tag}.yml"
        path.write_text(blueprint(args.prompts, args.models, args.points, tag=f" [{tag}]"))
        judges = ",".join(f"openai:judge-{j}" for j in range(args.judges))
        out = subprocess.run([sys.executable, str(MANAGE), "run_blueprint", str(path), "--judges", judges,
                              "--enqueue"], env=env, check=True, capture_output=True, text=True)
        run_id = int(out.stdout.strip().splitlines()[-1])
        seen: dict[int, float] = {}
        services_before = services_cpu(site)
        killed: subprocess.Popen | None = None
        held: list[tuple[int, int]] = []  # (response id, prompt index) the killed worker held
        killed_at = taken_over_at = None
        while True:
            status, done = site.query("SELECT status, items_done FROM runs_run WHERE id = %s", run_id)[0]
            for worker in workers:
                if worker is not killed:
                    seen.update(cpu_and_peak(tree(worker.pid))[2])
            if kill_at is not None and killed is None and done >= kill_at * items:
                killed = workers[0]
                pids = [str(pid) for pid in tree(killed.pid)]
                os.killpg(killed.pid, signal.SIGKILL)
                killed.wait(timeout=10)
                killed_at = time.monotonic()
                held = site.query("SELECT id, prompt_index FROM runs_response WHERE run_id = %s AND status = 'running'"
                                  " AND split_part(claimed_by, ':', 2) = ANY(%s)", run_id, pids)
                outcome.facts.append(f"killed one worker (SIGKILL to its qcluster's process group) with "
                                     f"{done:,} of {items:,} items done; it held {len(held)} items")
            if held and taken_over_at is None:
                left = site.query("SELECT COUNT(*) FROM runs_response WHERE id = ANY(%s) AND status <> 'done'",
                                  [pk for pk, _ in held])[0][0]
                if left == 0:
                    taken_over_at = time.monotonic()
            if status in ("done", "failed", "cancelled"):
                break
            for worker in workers:
                if worker is not killed and worker.poll() is not None:
                    raise SystemExit(f"a worker stopped: {worker.returncode}")
            time.sleep(0.25)
        began, ended = site.query("SELECT started_at, finished_at FROM runs_run WHERE id = %s", run_id)[0]
        outcome.wall = (ended - began).total_seconds()
        outcome.cpu = {"workers": sum(u + s for u, s in seen.values()), "fake server": cpu_and_peak([server.pid])[0],
                       "PostgreSQL and Redis": services_cpu(site) - services_before}
        if killed is not None:
            if taken_over_at is not None:
                outcome.facts.append(f"its {len(held)} items finished on the other workers "
                                     f"{taken_over_at - killed_at:.1f} s after the kill")
            elif held:
                outcome.problems.append(f"{len(held)} items the killed worker held were not finished")
        check(site, run_id, outcome, status, fake_tally(base), held)
    finally:
        if spy and workers:
            os.killpg(workers[0].pid, signal.SIGINT)  # py-spy writes its file when the sampled processes end
            workers[0].wait(timeout=60)
        stop_all(workers)
        server.terminate()
        server.wait(timeout=10)
        site.flush_broker()  # the run's chunk tasks its workers never needed (they took the items as top-ups)
    if spy:
        print_py_spy(spy)
    return outcome


def check(site: Deployment, run_id: int, outcome: Outcome, status: str, tally: dict,
          held: list[tuple[int, int]]) -> None:
    """Every item done exactly once: from the database, then from the fake server's tally. ``held``: the
    (response id, prompt index) of the items a killed worker held, which alone may be claimed and asked twice."""
    args = site.args
    held_prompts = {index for _, index in held}
    problems = outcome.problems
    if status != "done":
        problems.append(f"the run ended {status}")
    by_status = dict(site.query("SELECT status, COUNT(*) FROM runs_response WHERE run_id = %s GROUP BY status",
                                run_id))
    counters = site.query("SELECT items_done, items_failed, judge_calls_failed FROM runs_run WHERE id = %s",
                          run_id)[0]
    claims = dict(site.query("SELECT attempts, COUNT(*) FROM runs_response WHERE run_id = %s GROUP BY attempts",
                             run_id))
    points = site.query("SELECT COUNT(*), COUNT(DISTINCT (a.response_id, a.position)) FROM runs_pointassessment a "
                        "JOIN runs_response r ON r.id = a.response_id WHERE r.run_id = %s", run_id)[0]
    earlier = site.query("SELECT COUNT(*) FROM runs_earlierattempt WHERE run_id = %s", run_id)[0][0]
    lost = outcome.items - by_status.get("done", 0)
    claimed_again = sum(count for attempts, count in claims.items() if attempts != 1)
    allowed_again = site.query("SELECT COUNT(*) FROM runs_response WHERE id = ANY(%s) AND attempts = 2",
                               [pk for pk, _ in held])[0][0] if held else 0
    if lost:
        problems.append(f"{lost} items not done ({by_status})")
    if counters != (outcome.items, 0, 0):
        problems.append(f"the run's counters (done, failed, judge calls failed) are {counters}")
    if points[0] != outcome.items * args.points or points[1] != points[0]:
        problems.append(f"{points[0]} points stored ({points[1]} distinct), not {outcome.items * args.points}")
    if claimed_again != allowed_again:
        problems.append(f"items claimed other than once: {claims} (the killed worker held {len(held)} items)")
    if earlier:
        problems.append(f"{earlier} earlier attempts stored")
    never = outcome.calls - tally["distinct"]
    repeated = tally["repeated"]
    stray = [r for r in repeated if not (m := re.search(r"topic (\d+)", r["lastUser"]))
             or int(m.group(1)) not in held_prompts]
    if never:
        problems.append(f"{never} calls never reached the fake server")
    if stray:
        problems.append(f"{len(stray)} calls reached the fake server more than once, not of the killed worker's "
                        f"items: {[brief(r) for r in stray[:3]]}")
    outcome.facts.append(
        f"database: {by_status.get('done', 0):,}/{outcome.items:,} items done, {lost} lost, "
        f"{claimed_again} claimed more than once ({allowed_again} allowed: held by a killed worker), "
        f"{points[0]:,} points stored for {outcome.items * args.points:,}")
    outcome.facts.append(
        f"fake server: {tally['requests']:,} requests, {tally['distinct']:,} distinct of {outcome.calls:,} calls, "
        f"{never} never made, {sum(r['times'] - 1 for r in repeated)} sent again "
        f"({sum(r['times'] - 1 for r in repeated if r not in stray)} of them of the killed worker's items)")


def brief(request: dict) -> str:
    """A repeated request in a line: its model, the prompt it is about, and how often it came."""
    text = request["lastUser"]
    about = re.findall(r"(?:explain|Mentions) [^\n]*", text)
    return f"{request['model']}: {' / '.join(about)[:160] or text[:160]!r} x{request['times']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--points", type=int, default=2)
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=500)
    parser.add_argument("--concurrency", type=int, default=50, help="each worker's connection limit")
    parser.add_argument("--workers", default="1,2,4", help="worker processes of each timed run")
    parser.add_argument("--kill-workers", type=int, default=4, help="workers of the run where one is killed; "
                        "0: no such run")
    parser.add_argument("--kill-at", type=float, default=0.3, help="the share of items done when it is killed")
    parser.add_argument("--py-spy", metavar="OUT", help="sample the first run's first worker with py-spy (a dev "
                        "dependency), collapsed stacks to OUT; the busiest frames are printed")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    missing = missing_binaries()
    if missing:
        raise SystemExit("\n".join(missing))

    calls = args.prompts * args.models * (1 + args.points * args.judges)
    print(f"{args.prompts} prompts x {args.models} models x {args.points} judged points x {args.judges} judges: "
          f"{calls:,} calls a run, {args.latency_ms:g} ms latency, {args.concurrency} connections per worker; "
          f"PostgreSQL + Redis (django-q2's broker), one qcluster per worker process; {os.cpu_count()} cores")
    print("latency-bound by choice: the calls in flight (workers x connections) should set the pace, not the CPU; "
          "each run says whether it did (at the ideal pace its processes would need at most half the cores)")
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-bench-scale-"))
    outcomes: list[Outcome] = []
    with start_postgres() as postgres, start_redis() as redis:
        site = Deployment(args, postgres.url, redis.url, tmp, [postgres.process.pid, redis.process.pid])
        for count in counts:
            outcomes.append(one_run(site, count, f"w{count}", spy=args.py_spy if not outcomes else None))
            report(outcomes[-1], outcomes[0] if outcomes[0].workers == 1 else None)
        if args.kill_workers:
            killed = one_run(site, args.kill_workers, "kill", kill_at=args.kill_at)
            print(f"-- {args.kill_workers} workers, one killed once {args.kill_at:.0%} of the items were done")
            report(killed, None, same=next((o for o in outcomes if o.workers == args.kill_workers), None))
            outcomes.append(killed)
    failed = [o for o in outcomes if o.problems]
    if failed:
        raise SystemExit(f"FAILED: {sum(len(o.problems) for o in failed)} problem(s) above")


def report(outcome: Outcome, one: Outcome | None, same: Outcome | None = None) -> None:
    n = outcome.workers
    line = (f"{n} worker{'s' if n > 1 else ''}: wall {outcome.wall:.1f} s (first item to finished run); "
            f"ideal {outcome.ideal:.1f} s, ratio {outcome.wall / outcome.ideal:.2f}")
    if one is not None and n > 1:
        share = outcome.wall / one.wall
        target = TARGETS.get(n, 1.1 / n)
        line += (f"; {share:.2f} of one worker's {one.wall:.1f} s (target <= {target:.2f}: "
                 f"{'met' if share <= target else 'MISSED'})")
    if same is not None:
        line += f"; the same run without a kill took {same.wall:.1f} s"
    print(line)
    busy = sum(outcome.cpu.values())
    cores = os.cpu_count() or 1
    print(f"  CPU: {', '.join(f'{name} {seconds:.1f} s' for name, seconds in outcome.cpu.items())}"
          f" = {busy / outcome.wall / cores:.0%} of the machine's {cores} cores over the "
          f"wall time ({busy / outcome.calls * 1000:.2f} ms a call, start-up included; the machine may be shared)")
    # At the ideal pace the same CPU would be spent in the ideal time: over half the cores, and the run's pace
    # is set by the CPU (and whatever else the machine is running), not by the calls' latency.
    needed = busy / outcome.ideal / cores
    print(f"  {'latency-bound' if needed <= 0.5 else 'NOT latency-bound on this machine'}: at the ideal pace these "
          f"processes would keep {needed:.0%} of the cores busy"
          + ("" if needed <= 0.5 else " (over half; raise --latency-ms or lower --concurrency)"))
    for fact in outcome.facts:
        print(f"  {fact}")
    for problem in outcome.problems:
        print(f"  PROBLEM: {problem}")
    print(f"  every item done exactly once: {'yes' if not outcome.problems else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
