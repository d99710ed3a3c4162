"""Benchmark: generation throughput and client CPU against the fake LLM server.

    .venv/bin/python tests/bench/bench_providers.py [--n 2000] [--concurrency 50] [--latency-ms 200]

The fake server runs in a separate process (so its CPU does not share ours).
This process then makes the same N chat-completion calls twice, each time at
most ``concurrency`` at once:

1. a bare asyncio client (raw streams, persistent connections, minimal
   HTTP/1.1): the ceiling of this machine;
2. evalsite: ``generate()`` through ``Router.complete`` (httpx, limits,
   retry machinery, result objects), one distinct prompt per call.

It prints wall times, each as a fraction of the ideal (N / concurrency x
latency), ours as a fraction of the ceiling (target: at least 0.9), and our
CPU time per call measured with time.process_time (target: under 2 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from blueprints.spec.schema import Blueprint, Message, Prompt  # noqa: E402
from runs.engine.generate import expand_variants, generate  # noqa: E402
from runs.engine.providers import Router, settings_from_env  # noqa: E402

MODEL = "bench-model"


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str, int]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fakes" / "llm_server.py"), "--port", "0",
         "--latency-ms", str(latency_ms), "--no-log"],
        stdout=subprocess.PIPE, text=True,
    )
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    url = line.removeprefix("listening on ")
    return process, url, int(url.rsplit(":", 1)[1])


async def bare_client(port: int, n: int, concurrency: int) -> float:
    """N requests over ``concurrency`` keep-alive connections; the least a client can do."""
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while remaining > 0:
                remaining -= 1
                body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": f"q {remaining}"}],
                                   "temperature": 0}).encode()
                writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                data = json.loads(await reader.readexactly(length))
                assert data["choices"][0]["message"]["content"]
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def evalsite_client(base_url: str, n: int, concurrency: int, prompts: list[Prompt]) -> tuple[float, float, int]:
    settings = settings_from_env({"OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": base_url + "/v1",
                                  "EVALSITE_CONCURRENCY": str(concurrency)})
    variant, = expand_variants(Blueprint(), [f"openai:{MODEL}"])
    async with Router(settings) as router:
        # Warm up connections so both clients start with the same pool.
        await asyncio.gather(*(generate(p, variant, router.complete) for p in prompts[:concurrency]))
        cpu_started, started = time.process_time(), time.perf_counter()
        responses = await asyncio.gather(*(generate(p, variant, router.complete) for p in prompts[:n]))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    failures = sum(r.error is not None for r in responses)
    return wall, cpu, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    args = parser.parse_args()
    n, concurrency = args.n, args.concurrency
    ideal = n / concurrency * args.latency_ms / 1000
    prompts = [Prompt(id=f"p{i}", messages=[Message(role="user", content=f"Question number {i}?")])
               for i in range(max(n, concurrency))]

    server, base_url, port = start_server(args.latency_ms)
    try:
        asyncio.run(bare_client(port, concurrency, concurrency))  # warm-up
        bare = asyncio.run(bare_client(port, n, concurrency))
        ours, cpu, failures = asyncio.run(evalsite_client(base_url, n, concurrency, prompts))
    finally:
        server.terminate()
        server.wait(10)

    print(f"{n} calls, {args.latency_ms:g} ms latency, concurrency {concurrency}: ideal {ideal:.2f} s")
    print(f"bare asyncio client : {bare:6.2f} s  ({ideal / bare:.2f} of ideal)  <- ceiling on this machine")
    print(f"evalsite generate() : {ours:6.2f} s  ({ideal / ours:.2f} of ideal)  failures: {failures}")
    print(f"throughput vs ceiling: {bare / ours:.3f}  (target >= 0.9)")
    print(f"client CPU per call : {cpu / n * 1000:.3f} ms  (target < 2 ms; time.process_time)")


if __name__ == "__main__":
    main()
