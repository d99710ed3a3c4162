"""Benchmark: hostile input that aliases make big (issue 23), each figure beside its target.

* A 4 MB scalar anchored once and used as the text of 100 prompts: refused (the character limit,
  EVALSITE_MAX_EXPANDED_CHARS) in under 1 s with under 100 MB of extra memory, by the parser and by
  a whole /validate/ round trip. Before: 1.5 s to parse, and /validate/ answered 410 MB from a 1.2 GB
  server.
* A model id repeated 1,000 times by an alias: parsed in under 1 s. Before: a 3,000-space id took 16 s
  (the issue's 77 s was a longer one), all of it in one quadratic regex per alias.
* A model id of 30,000 characters that is almost a collection name (`AAAA…Ax`): under 1 s (5.5 s before).

Each case runs in a fresh child process, so its peak memory (ru_maxrss, less what the process held once the
text was built) is its own. Run with `.venv/bin/python tests/bench/bench_anchored.py`.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r'''
import json, os, resource, sys, time, tracemalloc
sys.path.insert(0, REPO)
case, door = sys.argv[1], sys.argv[2]

def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

if door == "web":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django
    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    setup_test_environment()
    call_command("migrate", verbosity=0)
    client = Client()
    client.post("/validate/", {"text": "title: warm\n"}, HTTP_HX_REQUEST="true")
    def run(text):
        response = client.post("/validate/", {"text": text}, HTTP_HX_REQUEST="true")
        assert response.status_code == 200, response.status_code
        return response.content.decode(), len(response.content)
else:
    from blueprints.spec.parse import parse_blueprint
    parse_blueprint("title: warm\n")
    def run(text):
        result = parse_blueprint(text)
        return " ".join(d.message + " " + (d.hint or "") for d in result.errors), None

PROMPT = "---\n- prompt: hi\n  should: [says hi]\n"
if case == "anchored":
    text = ("title: t\nmodels: [openai:gpt-4o-mini]\nlong: &long " + "x" * 4_000_000 + "\nprompts:\n"
            + "".join("- prompt: *long\n  should: [says hi]\n" for _ in range(100)))
elif case == "model-id":
    text = 'title: t\nmodels: [&m "openai' + " " * 3_000 + 'x"' + ", *m" * 1_000 + "]\n" + PROMPT
else:
    text = "title: t\nmodels: [&m " + "A" * 30_000 + "x" + ", *m" * 1_000 + "]\n" + PROMPT
base = rss_mb()
tracemalloc.start()
start = time.perf_counter()
cpu = time.process_time()
errors, size = run(text)
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
traced = tracemalloc.get_traced_memory()[1] / 2**20
tracemalloc.stop()
print(json.dumps({"s": elapsed, "cpu": cpu, "extra_mb": rss_mb() - base, "traced_mb": traced, "bytes": size,
                  "refused": "EVALSITE_MAX_EXPANDED_CHARS" in errors, "chars": len(text)}))
'''

CASES = [
    ("anchored", "parse", "4 MB anchored, 100 aliases: parse_blueprint", 1.0, 100),
    ("anchored", "web", "4 MB anchored, 100 aliases: /validate/      ", 1.0, 100),
    ("model-id", "parse", "3,000-space model id x 1,000: parse       ", 1.0, None),
    ("model-id", "web", "3,000-space model id x 1,000: /validate/  ", 1.0, None),
    ("collection", "parse", "'AAAA…Ax' (30,001) model id x 1,000: parse", 1.0, None),
]


def measure(case, door):
    env = dict(os.environ, EVALSITE_DATA_DIR=tempfile.mkdtemp(prefix="evalsite-bench-"), EVALSITE_TASKS_SYNC="1")
    out = subprocess.run([sys.executable, "-c", CHILD.replace("REPO", repr(str(REPO)), 1), case, door],
                         capture_output=True, text=True, env=env, cwd=REPO, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    for case, door, label, seconds, megabytes in CASES:
        m = measure(case, door)
        line = f"{label}: {m['s'] * 1000:7.1f} ms (cpu {m['cpu'] * 1000:.0f} ms)  (target < {seconds:g} s)"
        if megabytes is not None:
            line += (f"; extra peak RSS {m['extra_mb']:.0f} MB, traced {m['traced_mb']:.0f} MB  "
                     f"(target < {megabytes} MB); refused: {'yes' if m['refused'] else 'NO'}")
        if m["bytes"] is not None:
            line += f"; response {m['bytes'] / 1024:.0f} KB"
        print(line, flush=True)


if __name__ == "__main__":
    main()
