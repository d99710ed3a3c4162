"""Benchmark: `run_blueprint`'s own CPU, with the network taken out.

    .venv/bin/python tests/bench/bench_cli_instant.py [--prompts 2000] [--judged] [--repeat N] [--py-spy OUT]

The command runs in a process of its own whose transport answers every call at once (a canned chat completion;
a judge's classification when the request is a judge's), on a fresh data directory each time. What it prints
is evalsite's CPU for the items alone (no HTTP, no fake server, no waiting): the whole command's CPU after
Django's start, and per item. ``--judged``: bench_run.py's shape (500 prompts x 4 models x 5 judged points x 2
judges at the default size) instead of bench_cli_run.py's (one ``$contains`` point a prompt, no judges).
``--py-spy OUT``: the process sampled by py-spy, busiest frames printed, collapsed stacks in OUT.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli_run import compile_sources, print_py_spy, py_spy_command, spread  # noqa: E402

CHILD = """
import os, sys, time, asyncio
sys.path[:0] = [{repo!r}, {bench!r}]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django
django.setup()
from django.core.management import call_command
from runs.engine import jsonfast
from runs.engine.providers import transport

def completion(text, prompt_tokens):
    return jsonfast.dumps({{"choices": [{{"message": {{"role": "assistant", "content": text}}, "finish_reason": "stop"}}],
                           "usage": {{"prompt_tokens": prompt_tokens, "completion_tokens": 12}}}})

CANDIDATE = completion("A brief explanation that covers the topic in a few words.", 10)
JUDGE = completion("<reflection>Mentioned.</reflection><classification>CLASS_EXACTLY_MET</classification>", 300)
HEAD = [(b"content-type", b"application/json")]

async def post(self, url, headers, body, *, timeout_s, connect_timeout_s):
    await asyncio.sleep(0)
    return transport.Answer(200, HEAD, JUDGE if b"<CRITERION>" in body else CANDIDATE)

transport.PooledTransport.post = post
began = time.process_time()
call_command("run_blueprint", {path!r}, *{args!r}, stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))
print("cpu", time.process_time() - began)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=None, help="default 2000, or 500 with --judged")
    parser.add_argument("--judged", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--py-spy", metavar="OUT")
    args = parser.parse_args()

    compile_sources()
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-instant-"))
    if args.judged:
        from bench_run import blueprint

        prompts = args.prompts or 500
        text, items, command_args = blueprint(prompts, 4, 5), prompts * 4, ["--judges", "openai:judge-0,openai:judge-1"]
        calls = items * 11
    else:
        from bench_cli_run import blueprint

        prompts = args.prompts or 2000
        text, items, command_args, calls = blueprint(prompts), prompts, [], prompts
    path = tmp / "bench.yml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("EVALSITE_TASKS_SYNC", None)
    env.pop("DATABASE_URL", None)
    # Never reached: the transport answers at once. A port nothing listens on, in case it did not.
    env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="sk-bench", EVALSITE_CONCURRENCY="50")
    code = CHILD.format(repo=str(REPO), bench=str(Path(__file__).resolve().parent), path=str(path),
                        args=command_args)
    cpus = []
    for attempt in range(max(1, args.repeat)):
        env["EVALSITE_DATA_DIR"] = str(tmp / f"data-{attempt}")
        subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--noinput", "-v0"], env=env, check=True)
        command = [sys.executable, "-c", code]
        if args.py_spy:
            command = py_spy_command(args.py_spy, command)
        out = subprocess.run(command, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"run_blueprint exited {out.returncode}:\n{out.stderr[-3000:]}")
        cpus.append(float(out.stdout.split("cpu", 1)[1].split()[0]))
    print(f"run_blueprint with an instant transport: {items:,} items, {calls:,} calls"
          f"{' (judged)' if args.judged else ''}, {len(cpus)} run(s)")
    print(f"  CPU after Django's start {spread(cpus)} s; per item {spread([c * 1000 / items for c in cpus])} ms, "
          f"per call {spread([c * 1000 / calls for c in cpus])} ms")
    if args.py_spy:
        print_py_spy(args.py_spy)


if __name__ == "__main__":
    main()
