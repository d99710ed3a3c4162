"""Benchmark: a run at the provider's rate limit (issue 25).

    .venv/bin/python tests/bench/bench_ratelimit.py [--rpm 6000] [--calls 3000] [--latency-ms 100]
                                                    [--concurrency 20] [--window-s 1] [--tpm 0] [--compare]
    .venv/bin/python tests/bench/bench_ratelimit.py --starvation --calls 200

The question: against a provider that allows N requests a minute, does a run
finish near N a minute, with no failed item and no storm of 429s?

The issue's case is 600 requests a minute and 3,000 calls: 300 s at the ideal
pace, too long for a benchmark here. It is scaled ten times: 6,000 a minute
and 3,000 calls, 30 s ideal. (The pacer's arithmetic is the same at any
scale: it spaces calls 60/N s apart; ``--rpm 600`` runs the unscaled case.)

The fake LLM server runs in its own process with its rate-limit mode on for
the model: a bucket that refills N/60 a second and holds ``window_s``
seconds' worth (OpenAI enforces a minute's limit over shorter windows), the
headers OpenAI sends (``x-ratelimit-*``, resets like ``20ms``), and a 429
with ``retry-after`` past it. This process runs the calls through
``Router.complete`` (at most ``concurrency`` at once, the default per-provider
limit), every call distinct (no cache), and prints each figure beside its
target:

* wall time / ideal (calls / N minutes): at most 1.10;
* failed items: 0;
* share of calls answered 429: at most 1%.

``--compare`` then runs the same calls with pacing off (retries and
Retry-After only, as before the pacer) to show what it saves.

``--starvation`` runs the case of issue "Hostile input, third round" (2)
instead: ``--calls`` calls to a healthy model and as many to a model of the
same provider whose every answer is OpenAI's 429 ``insufficient_quota`` (no
Retry-After), all at once, with the production back-off (1 s, doubling) and
the default breaker. Targets: no healthy call fails, every healthy call is
answered within 5 s, the no-quota model's calls all fail (its breaker open,
with the provider's words) and the whole run ends within 30 s. (Before the
fix the no-quota model's calls waited out an ever longer pace while holding
the provider's slots: the healthy calls waited behind them for minutes.)
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runs.engine.providers import Router, settings_from_env  # noqa: E402
from runs.engine.types import ChatRequest  # noqa: E402

MODEL = "bench-limited"


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fakes" / "llm_server.py"), "--port", "0",
         "--latency-ms", str(latency_ms), "--no-log"],
        stdout=subprocess.PIPE, text=True,
    )
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return process, line.removeprefix("listening on ")


def configure(url: str, rpm: int, tpm: int, window_s: float) -> None:
    with httpx.Client(base_url=url) as client:
        client.post("/_control/reset").raise_for_status()  # counters, rules and buckets
        rule = {"model": f"^{MODEL}$", "rpm": rpm, "window_s": window_s}
        if tpm:
            rule["tpm"] = tpm
        client.post("/_control/config", json={"rate_limits": [rule]}).raise_for_status()


def statuses(url: str) -> dict[str, int]:
    return httpx.get(url + "/_control/stats").json()["statuses"]


async def run(url: str, calls: int, concurrency: int, *, pacing: bool) -> dict:
    settings = settings_from_env({"OPENAI_API_KEY": "sk-bench-not-a-key", "OPENAI_BASE_URL": url + "/v1",
                                  "EVALSITE_CONCURRENCY": str(concurrency)})
    async with Router(settings) as router:
        router.pacing = pacing
        started = time.perf_counter()
        results = await asyncio.gather(*(router.complete(ChatRequest(
            model_id=f"openai:{MODEL}", messages=({"role": "user", "content": f"question {i}: what is {i} + 1?"},),
            temperature=0, max_tokens=32, use_cache=False)) for i in range(calls)))
        elapsed = time.perf_counter() - started
        pacer = next(iter(router._pacers.values()), None)
        return {"elapsed": elapsed, "failed": sum(r.error is not None for r in results),
                "errors": sorted({r.error[:120] for r in results if r.error})[:3], "sent": router.calls_sent,
                "waited": pacer.waited_s if pacer else 0.0, "holds": pacer.holds if pacer else 0,
                "attempts": max(r.attempts for r in results)}


async def starvation(url: str, calls: int, concurrency: int) -> bool:
    settings = settings_from_env({"OPENAI_API_KEY": "sk-bench-not-a-key", "OPENAI_BASE_URL": url + "/v1",
                                  "EVALSITE_CONCURRENCY": str(concurrency)})
    ends: dict[str, list[float]] = {"healthy": [], "noquota": []}
    errors: list[str] = []
    async with Router(settings) as router:
        started = time.perf_counter()

        async def one(kind: str, model: str, i: int):
            result = await router.complete(ChatRequest(
                model_id=f"openai:{model}", messages=({"role": "user", "content": f"question {i}"},),
                temperature=0, max_tokens=32, use_cache=False))
            ends[kind].append(time.perf_counter() - started)
            if kind == "noquota" and result.error and len(errors) < 2 and "Circuit" in result.error:
                errors.append(result.error[:160])
            return kind, result

        results = await asyncio.gather(*(one("healthy", "steady", i) for i in range(calls)),
                                       *(one("noquota", "starved-noquota-always-429", i) for i in range(calls)))
        elapsed = time.perf_counter() - started
    healthy_failed = sum(1 for kind, r in results if kind == "healthy" and not r.ok)
    noquota_answered = sum(1 for kind, r in results if kind == "noquota" and r.ok)
    healthy_last = max(ends["healthy"])
    rows = [
        ("healthy calls failed", f"{healthy_failed} of {calls}", "0"),
        ("last healthy answer", f"{healthy_last:.2f} s", "<= 5 s"),
        ("no-quota calls answered", f"{noquota_answered} of {calls}", "0 (all fail, breaker open)"),
        ("whole run", f"{elapsed:.1f} s", "<= 30 s"),
        ("HTTP requests sent", f"{router.calls_sent}", ""),
    ]
    print(f"\nstarvation: {calls} healthy calls beside {calls} to a no-quota model, {concurrency} in flight")
    width = max(len(r[0]) for r in rows)
    for name, value, target in rows:
        print(f"  {name:<{width}}  {value:<40} target: {target}" if target else f"  {name:<{width}}  {value}")
    for error in errors[:1]:
        print(f"  e.g. {error}")
    return healthy_failed == 0 and healthy_last <= 5 and noquota_answered == 0 and elapsed <= 30


def report(title: str, result: dict, answered: dict[str, int], calls: int, rpm: int) -> bool:
    ideal = calls / rpm * 60
    ratio = result["elapsed"] / ideal
    limited = answered.get("429", 0)
    share = limited / max(1, result["sent"])
    rate = calls / result["elapsed"] * 60
    rows = [
        ("wall time", f"{result['elapsed']:.1f} s", f"ideal {ideal:.1f} s"),
        ("wall time / ideal", f"{ratio:.3f}", "<= 1.10"),
        ("pace reached", f"{rate:,.0f} calls/min", f"limit {rpm:,}/min"),
        ("failed items", f"{result['failed']}", "0"),
        ("calls answered 429", f"{limited} of {result['sent']} sent ({share:.2%})", "<= 1%"),
        ("HTTP requests sent", f"{result['sent']}", f"{calls} (one per item)"),
        ("most attempts for one item", f"{result['attempts']}", "1"),
    ]
    if result["holds"] or result["waited"]:
        rows.append(("pacer", f"waited {result['waited']:.1f} s in all, held the key {result['holds']}x", ""))
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    for name, value, target in rows:
        print(f"  {name:<{width}}  {value:<40} target: {target}" if target else f"  {name:<{width}}  {value}")
    for error in result["errors"]:
        print(f"  e.g. {error}")
    return ratio <= 1.10 and result["failed"] == 0 and share <= 0.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rpm", type=int, default=6000, help="requests a minute the fake allows (6000: the "
                                                                 "issue's 600 scaled 10x)")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--latency-ms", type=float, default=100.0, help="the fake's answer time")
    parser.add_argument("--concurrency", type=int, default=20, help="calls in flight (EVALSITE_CONCURRENCY)")
    parser.add_argument("--window-s", type=float, default=1.0, help="the seconds' worth the fake lets in at once")
    parser.add_argument("--tpm", type=int, default=0, help="also a token limit a minute (0: none)")
    parser.add_argument("--compare", action="store_true", help="also run with pacing off")
    parser.add_argument("--starvation", action="store_true",
                        help="a healthy model beside a no-quota one of the same provider (see above)")
    args = parser.parse_args()

    process, url = start_server(args.latency_ms)
    if args.starvation:
        try:
            ok = asyncio.run(starvation(url, min(args.calls, 1000), args.concurrency))
            print(f"\n{'PASS' if ok else 'FAIL'}")
        finally:
            process.terminate()
            process.wait(10)
        sys.exit(0 if ok else 1)
    try:
        print(f"fake provider: {args.rpm:,} requests/min" + (f", {args.tpm:,} tokens/min" if args.tpm else "")
              + f", enforced over {args.window_s:g} s windows, {args.latency_ms:g} ms per answer; "
              f"{args.calls:,} calls, {args.concurrency} in flight")
        if args.rpm == 6000 and args.calls == 3000:
            print("(the issue's 600/min x 3,000 calls = 300 s, scaled 10x to 6,000/min: 30 s ideal)")
        configure(url, args.rpm, args.tpm, args.window_s)
        result = asyncio.run(run(url, args.calls, args.concurrency, pacing=True))
        ok = report("paced (pacing.py)", result, statuses(url), args.calls, args.rpm)
        if args.compare:
            configure(url, args.rpm, args.tpm, args.window_s)
            unpaced = asyncio.run(run(url, args.calls, args.concurrency, pacing=False))
            report("unpaced (pacing off: retries with Retry-After only)", unpaced, statuses(url), args.calls,
                   args.rpm)
        print(f"\n{'PASS' if ok else 'FAIL'}: paced run {'meets' if ok else 'misses'} every target")
    finally:
        process.terminate()
        process.wait(10)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
