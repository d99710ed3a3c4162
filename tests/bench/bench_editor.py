"""Benchmark: server time of one live-validation round trip of the blueprint editor.

Posts the editor's text to /validate/ as htmx does and times the whole Django
response (parse, collections lookup, preview, template) with the test client,
for a 20 KB blueprint and for the largest corpus file. Target (issue 7): under
100 ms for the 20 KB blueprint.
Run with `make bench` or `.venv/bin/python tests/bench/bench_editor.py`.
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
CORPUS = REPO.parent / "shared" / "corpus" / "weval-configs"

os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

PROMPT = """\
- id: prompt-{n}
  description: Checks answer {n} for accuracy, tone and format.
  prompt: |
    A customer writes: "My order {n} arrived damaged and I need it replaced before Friday.
    What can you do, and what do you need from me?" Reply as the support agent.
  ideal: We will send a replacement today by express post; please send a photo of the damage.
  should:
    - Apologises for the damaged order.
    - Offers a replacement or a refund.
    - $icontains_any_of: [photo, picture, image]
    - $word_count_between: [30, 200]
    - - Promises delivery before Friday.
    - - Explains honestly that delivery before Friday cannot be guaranteed.
      - Offers an alternative such as a refund.
  should_not:
    - $imatches: "\\\\bnot our (fault|problem)\\\\b"
"""

HEADER = """\
title: Support replies (benchmark)
description: A synthetic blueprint of about 20 KB for the editor benchmark.
tags: [bench]
models:
  - openai:gpt-4.1-mini
  - anthropic:claude-3-5-haiku-20241022
temperatures: [0, 0.7]
---
"""


def twenty_kb_blueprint() -> str:
    parts, n = [HEADER], 0
    while sum(map(len, parts)) < 20 * 1024:
        parts.append(PROMPT.format(n=n))
        n += 1
    return "".join(parts)


def round_trip_ms(client, text, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.post("/validate/", {"text": text, "slug": "bench"}, HTTP_HX_REQUEST="true")
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.status_code
    return statistics.median(times), min(times)


def main():
    setup_test_environment()
    call_command("migrate", verbosity=0)
    if (CORPUS / "models").is_dir():
        from blueprints.importing import import_collections

        import_collections(CORPUS / "models")  # so CORE and friends resolve as they would after an import
    client = Client()
    text = twenty_kb_blueprint()
    round_trip_ms(client, text, 3)  # warm imports and caches

    med, best = round_trip_ms(client, text, 21)
    print(f"20 KB blueprint ({len(text.encode()) / 1024:.1f} KB, {text.count('- id: ')} prompts): "
          f"median {med:.1f} ms, best {best:.1f} ms  (target < 100 ms)")

    files = sorted(p for folder in ("blueprints", "history-json") for p in (CORPUS / folder).rglob("*")
                   if p.suffix in (".yml", ".yaml", ".json"))
    if files:
        largest = max(files, key=lambda p: p.stat().st_size)
        big = largest.read_text(encoding="utf-8")
        med, best = round_trip_ms(client, big, 7)
        print(f"largest corpus file ({largest.name}, {len(big.encode()) / 1024:.0f} KB): "
              f"median {med:.1f} ms, best {best:.1f} ms")


if __name__ == "__main__":
    main()
