"""Benchmark: fuzzed blueprints through `validate_blueprint --json` and `/validate/` (issue 12).

Inputs are corpus files (../shared/corpus/weval-configs and the seed suites) with values
swapped for hostile ones, keys dropped and added and characters changed, generated
structures, and the hostile table (tests/spec/hostile_cases.py). Each input goes through
both paths. Prints how many ran, how many raised, how many answered 500 or carried the
last-resort `internal` error, the slowest input, and the process's peak memory.
Done when: 0 raised, 0 500s, 0 internal, every input under 2 s, peak under 500 MB.

Run with `make bench` (1,000 inputs) or `.venv/bin/python tests/bench/bench_fuzz.py 10000`.
"""

import io
import json
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django  # noqa: E402

django.setup()

import yaml  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from tests.spec.hostile_cases import CASES  # noqa: E402
from tests.spec.test_fuzz import DOCUMENTS, HOSTILE_VALUES, KEYS, _Dumper, mutate, text_mutations  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "weval-configs"


def structure(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 4 or roll < 0.4:
        return rng.choice(HOSTILE_VALUES + ["openai:gpt-4o", "says hi", 0.5, 3, "CORE", "$contains"])
    if roll < 0.7:
        return [structure(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS): structure(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def fuzzed_input(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.02:
        return rng.choice(CASES).text
    if roll < 0.75:
        suffix, docs = rng.choice(DOCUMENTS)
        mutated = [mutate(d, rng) for d in docs]
        if suffix == ".json" and len(mutated) == 1 and rng.random() < 0.5:
            text = json.dumps(mutated[0], allow_nan=True)
        else:
            text = yaml.dump_all(mutated, Dumper=_Dumper, allow_unicode=True, sort_keys=False)
        return text_mutations(text, rng, rng.randint(0, 6)) if rng.random() < 0.5 else text
    header = {rng.choice(KEYS): structure(rng) for _ in range(rng.randint(0, 8))}
    prompts = [{rng.choice(KEYS): structure(rng) for _ in range(rng.randint(0, 6))} for _ in range(rng.randint(0, 4))]
    if rng.random() < 0.3:
        return json.dumps({**header, "prompts": prompts}, allow_nan=True)
    return yaml.dump_all([header, prompts], Dumper=_Dumper, allow_unicode=True)


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    setup_test_environment()
    call_command("migrate", verbosity=0)
    if (CORPUS / "models").is_dir():
        from blueprints.importing import import_collections

        import_collections(CORPUS / "models")
    client = Client(raise_request_exception=False)
    # Warm up (imports, templates, collections) so the slowest input is an input, not the first one.
    warm = CASES[0].text
    client.post("/validate/", {"text": warm}, HTTP_HX_REQUEST="true")
    client.post("/validate/", {"text": "models: [openai:x]\n---\n- prompt: hi\n  should: [says hi]\n"},
                HTTP_HX_REQUEST="true")
    rng = random.Random(12)
    folder = Path(tempfile.mkdtemp(prefix="evalsite-fuzz-"))
    raised, status_500, internal = Counter(), 0, 0
    slowest = (0.0, "")
    started = time.perf_counter()
    for index in range(count):
        text = fuzzed_input(rng)
        path = folder / ("input.json" if text.lstrip().startswith("{") else "input.yml")
        path.write_text(text, encoding="utf-8")
        begin = time.perf_counter()
        out = io.StringIO()
        try:
            call_command("validate_blueprint", str(path), "--json", stdout=out, stderr=io.StringIO())
        except SystemExit:
            pass
        except Exception as exc:  # noqa: BLE001 - counting is the point
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            raised[f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"] += 1
        else:
            pass
        if out.getvalue():
            internal += sum(e["code"] == "internal" for r in json.loads(out.getvalue()) for e in r["errors"])
        response = client.post("/validate/", {"text": text}, HTTP_HX_REQUEST="true")
        if response.status_code >= 500:
            status_500 += 1
        elif "internal error" in response.content.decode("utf-8", "replace"):
            internal += 1
        took = time.perf_counter() - begin
        if took > slowest[0]:
            slowest = (took, f"input {index} ({len(text):,} chars)")
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fuzz: {count:,} inputs through validate_blueprint --json and /validate/ in {elapsed:.1f} s: "
          f"{sum(raised.values())} raised, {status_500} answered 500, {internal} internal errors; "
          f"slowest {slowest[0] * 1000:.0f} ms ({slowest[1]}); peak memory {peak_mb:.0f} MB "
          f"(targets: 0, 0, 0, < 2000 ms, < 500 MB)")
    for what, n in raised.most_common():
        print(f"  raised {n}x: {what}")


if __name__ == "__main__":
    main()
