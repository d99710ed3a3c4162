"""Pacing to a provider's rate limits (issue 25, part 2): the headers, the pacer on a fake clock, the router
against the fake server's rate-limit mode."""

from __future__ import annotations

import asyncio
import time
from email.utils import format_datetime
from datetime import datetime, timezone

import httpx
import pytest

from runs.engine.providers import Router, settings_from_env
from runs.engine.providers.pacing import (
    Pacer,
    RateLimits,
    estimated_tokens,
    parse_duration,
    parse_reset,
    parse_retry_after,
    read_rate_limits,
    retry_delay_from_body,
)
from runs.engine.types import ChatRequest
from tests.fakes.llm_server import FakeLLMServer, openai_duration

WALL = 1_790_000_000.0  # a fixed "now" for RFC 3339 and HTTP-date resets


# --------------------------------------------------------------------------
# Headers


@pytest.mark.parametrize("text,seconds", [
    ("6m0s", 360.0), ("1s", 1.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0s", 0.0), ("17.123s", 17.123),
    ("2m30.5s", 150.5), ("500us", 0.0005), ("1µs", 0.000001), ("3ns", 3e-9), ("0.5", 0.5), ("12", 12.0),
    (" 1s ", 1.0),
])
def test_openai_durations_are_read(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "1x", "1s2", "m1s", "-1s", "1 s", "abc", "inf", "nan", "-3", None])
def test_what_is_not_a_duration_is_none(text):
    assert parse_duration(text) is None


def test_anthropic_resets_are_rfc3339_times_from_now():
    assert parse_reset("2026-09-21T14:33:30Z", wall=datetime(2026, 9, 21, 14, 33, 0, tzinfo=timezone.utc)
                       .timestamp()) == pytest.approx(30.0)
    assert parse_reset("2026-09-21T16:33:30+02:00", wall=datetime(2026, 9, 21, 14, 33, 20, tzinfo=timezone.utc)
                       .timestamp()) == pytest.approx(10.0)
    assert parse_reset("2026-09-21T14:33:30.250Z", wall=datetime(2026, 9, 21, 14, 33, 30, tzinfo=timezone.utc)
                       .timestamp()) == pytest.approx(0.25)
    assert parse_reset("2020-01-01T00:00:00Z", wall=WALL) == 0.0  # past: now
    assert parse_reset("2026-09-21T14:33:30", wall=WALL) is None  # no offset: not RFC 3339
    assert parse_reset("tomorrow", wall=WALL) is None
    assert parse_reset("250ms", wall=WALL) == pytest.approx(0.25)  # OpenAI's form through the same door


def test_retry_after_in_milliseconds_seconds_or_a_date():
    assert parse_retry_after("3", "150") == pytest.approx(0.15)  # retry-after-ms wins
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("0.5") == 0.5
    date = format_datetime(datetime.fromtimestamp(WALL + 20, timezone.utc), usegmt=True)
    assert parse_retry_after(date, wall=WALL) == pytest.approx(20.0)
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


def test_gemini_puts_the_retry_delay_in_its_429_body():
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded", "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}]}}
    assert retry_delay_from_body(body) == 13.0
    assert retry_delay_from_body([body]) == 13.0
    body["error"]["details"][1]["retryDelay"] = {"seconds": 2, "nanos": 500_000_000}
    assert retry_delay_from_body(body) == 2.5
    for nothing in (None, {}, {"error": "x"}, {"error": {"details": "x"}}, {"error": {"details": [None, 1]}}):
        assert retry_delay_from_body(nothing) is None


def test_openai_headers_as_sent_with_an_answer():
    headers = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999",
               "x-ratelimit-reset-requests": "6ms", "x-ratelimit-limit-tokens": "2000000",
               "x-ratelimit-remaining-tokens": "1999970", "x-ratelimit-reset-tokens": "0s",
               "content-type": "application/json", "openai-processing-ms": "420"}
    assert read_rate_limits(headers) == RateLimits(10000, 9999, 0.006, 2000000, 1999970, 0.0, None)


def test_raw_header_pairs_in_any_case_and_a_429s_retry_after():
    raw = [(b"Content-Type", b"application/json"), (b"X-RateLimit-Limit-Requests", b"600"),
           (b"X-RateLimit-Remaining-Requests", b"0"), (b"X-RateLimit-Reset-Requests", b"6m0s"),
           (b"Retry-After", b"2"), (b"retry-after-ms", b"1500")]
    limits = read_rate_limits(raw)
    assert (limits.limit_requests, limits.remaining_requests, limits.reset_requests_s, limits.retry_after_s) == (
        600, 0, 360.0, 1.5)
    assert limits.limit_tokens is None


def test_anthropic_headers():
    wall = datetime(2026, 9, 21, 14, 33, 0, tzinfo=timezone.utc).timestamp()
    headers = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
               "anthropic-ratelimit-requests-reset": "2026-09-21T14:33:01Z",
               "anthropic-ratelimit-input-tokens-limit": "30000",
               "anthropic-ratelimit-input-tokens-remaining": "29000",
               "anthropic-ratelimit-input-tokens-reset": "2026-09-21T14:33:02Z",
               "anthropic-ratelimit-output-tokens-limit": "8000", "request-id": "req_1"}
    limits = read_rate_limits(headers, wall=wall)
    assert limits == RateLimits(50, 49, pytest.approx(1.0), 30000, 29000, pytest.approx(2.0), None)
    # The combined token limit, when sent, is the one paced.
    headers.update({"anthropic-ratelimit-tokens-limit": "38000", "anthropic-ratelimit-tokens-remaining": "37000",
                    "anthropic-ratelimit-tokens-reset": "2026-09-21T14:33:03Z"})
    assert read_rate_limits(headers, wall=wall).limit_tokens == 38000


def test_no_rate_limit_headers_or_unreadable_ones_are_none():
    assert read_rate_limits({"content-type": "application/json"}) is None
    assert read_rate_limits([]) is None
    assert read_rate_limits({"x-ratelimit-limit-requests": "many", "x-ratelimit-reset-requests": "later"}) is None


def test_the_fake_server_writes_resets_as_openai_does():
    assert [openai_duration(s) for s in (0.02, 0.0061, 1, 6.5, 360, 61.25)] == [
        "20ms", "7ms", "1s", "6.5s", "6m0s", "1m1.25s"]
    for seconds in (0.02, 1, 6.5, 360, 61.25):
        assert parse_duration(openai_duration(seconds)) == pytest.approx(seconds)


# --------------------------------------------------------------------------
# The pacer, on a fake clock


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)  # let others run "meanwhile", as a real sleep does


def _pacer(margin: float = 1.0) -> tuple[Pacer, FakeClock]:
    clock = FakeClock()
    return Pacer(margin=margin, clock=clock, sleep=clock.sleep), clock


def _send_times(pacer: Pacer, clock: FakeClock, n: int, tokens: int = 0) -> list[float]:
    """n calls in a row, each waiting its turn; the times they leave."""
    async def go():
        times = []
        for _ in range(n):
            await pacer.wait(tokens)
            times.append(clock.now)
        return times
    return asyncio.run(go())


def test_the_first_call_goes_alone_and_the_rest_wait_for_its_answer():
    clock = FakeClock()
    pacer = Pacer(clock=clock, sleep=clock.sleep, probe=True, probe_timeout_s=5.0)

    async def go():
        order = []

        async def call(name, answer_after=None):
            await pacer.wait()
            order.append(name)
            if answer_after is not None:
                await asyncio.sleep(answer_after)
                pacer.observe(RateLimits(limit_requests=60), 200)  # the probe's answer states the limit
        await asyncio.gather(call("probe", 0.01), call("a"), call("b"))
        return order
    assert asyncio.run(go()) == ["probe", "a", "b"]
    assert pacer.interval is not None  # a and b left paced, after the limit was known


def test_a_probe_without_an_answer_stops_being_waited_for():
    pacer = Pacer(probe=True, probe_timeout_s=0.05)

    async def go():
        await pacer.wait()  # the probe, never answered
        started = time.perf_counter()
        await pacer.wait()
        await pacer.wait()  # no second wait: the probe is over
        return time.perf_counter() - started
    assert 0.04 <= asyncio.run(go()) < 0.5
    answered = Pacer(probe=True, probe_timeout_s=5)

    async def timed_out():
        await answered.wait()
        answered.observe(None, None)  # the probe timed out: the others go on at once
        started = time.perf_counter()
        await answered.wait()
        return time.perf_counter() - started
    assert asyncio.run(timed_out()) < 0.1


def test_with_no_limit_known_nothing_waits():
    pacer, clock = _pacer()
    assert _send_times(pacer, clock, 50) == [1000.0] * 50
    assert pacer.waited_s == 0 and not pacer.active


def test_a_stated_request_limit_spaces_calls_evenly_at_the_margin():
    pacer, clock = _pacer(margin=0.9)
    pacer.observe(RateLimits(limit_requests=600, remaining_requests=599, reset_requests_s=0.1), 200)
    times = _send_times(pacer, clock, 11)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps == pytest.approx([60 / (600 * 0.9)] * 10)
    assert times[0] == 1000.0  # the first goes at once


def test_concurrent_waiters_get_distinct_slots():
    pacer, clock = _pacer()
    pacer.observe(RateLimits(limit_requests=60), 200)  # one a second
    # Booking is synchronous: each caller's slot is its own, whoever sleeps first.
    assert pacer.reserve() == 0.0
    assert [pacer.reserve() for _ in range(3)] == pytest.approx([1.0, 2.0, 3.0])


def test_a_token_limit_books_each_calls_estimated_tokens():
    pacer, clock = _pacer()
    pacer.observe(RateLimits(limit_tokens=60_000), 200)  # 1000 tokens a second
    times = _send_times(pacer, clock, 4, tokens=500)
    assert [t - times[0] for t in times] == pytest.approx([0, 0.5, 1.0, 1.5])
    assert estimated_tokens(4000, 1500) == 2500 and estimated_tokens(10, None) == 2


def test_both_limits_the_slower_wins():
    pacer, clock = _pacer()
    pacer.observe(RateLimits(limit_requests=6000, limit_tokens=60_000), 200)  # 100 calls/s, 1000 tokens/s
    times = _send_times(pacer, clock, 3, tokens=100)  # tokens allow 10 calls/s
    assert [t - times[0] for t in times] == pytest.approx([0, 0.1, 0.2])


def test_remaining_zero_holds_until_one_request_is_back():
    pacer, clock = _pacer()
    # 60 a minute; none left; full again in 60 s (OpenAI's reset), so one is back in 1 s.
    pacer.observe(RateLimits(remaining_requests=0, reset_requests_s=60.0, limit_requests=60), 200)
    assert pacer.blocked_until == pytest.approx(1001.0)
    # Without a stated limit, the whole reset is waited.
    other, _ = _pacer()
    other.observe(RateLimits(remaining_requests=0, reset_requests_s=2.5), 200)
    assert other.blocked_until == pytest.approx(1002.5)


def test_remaining_tokens_short_of_a_call_holds_until_they_are_back():
    pacer, clock = _pacer()
    pacer.observe(RateLimits(limit_tokens=60_000, remaining_tokens=100, reset_tokens_s=59.9), 200, last_tokens=600)
    assert pacer.blocked_until == pytest.approx(1000 + 59.9 * 500 / 59_900)


def test_a_429_holds_every_call_of_the_key_for_its_retry_after():
    pacer, clock = _pacer()
    pacer.observe(RateLimits(limit_requests=6000, retry_after_s=2.0), 429)
    assert pacer.blocked_until == 1002.0 and pacer.holds == 1
    times = _send_times(pacer, clock, 3)
    assert times[0] == pytest.approx(1002.0) and times[2] - times[0] == pytest.approx(0.02)
    # A retry-after from elsewhere (Gemini's body) counts the same; a 429 saying nothing holds 1 s.
    pacer.observe(None, 429, retry_after=5.0)
    assert pacer.blocked_until == pytest.approx(clock.now + 5.0)
    quiet, qclock = _pacer()
    quiet.observe(None, 429)
    assert quiet.blocked_until == pytest.approx(qclock.now + 1.0)


def test_a_hold_is_never_longer_than_the_longest_wait_allowed():
    clock = FakeClock()
    pacer = Pacer(max_hold_s=120.0, clock=clock, sleep=clock.sleep)
    pacer.observe(RateLimits(retry_after_s=3600.0), 429)  # "come back in an hour": each call fails fast instead
    assert pacer.blocked_until <= clock.now and pacer.interval is None  # nothing waits (it held 120 s before)
    pacer.observe(RateLimits(retry_after_s=100.0), 429)
    assert pacer.blocked_until == clock.now + 100.0


def test_a_hold_that_starts_while_waiting_is_waited_out_too():
    pacer, clock = _pacer()
    pacer.observe(RateLimits(limit_requests=60), 200)
    pacer.reserve()  # the next slot is now 1 s away

    async def go():
        async def hold_soon():
            pacer.observe(None, 429, retry_after=10.0)
        waiting = asyncio.ensure_future(pacer.wait())
        await asyncio.sleep(0)  # the waiter books its slot and sleeps (the fake clock moves 1 s) ...
        await hold_soon()  # ... and a 429 arrives meanwhile
        await waiting
        return clock.now
    left = asyncio.run(go())
    assert left >= 1010.0


def test_without_headers_a_429_slows_to_80_percent_of_the_rate_answered_then_recovers():
    pacer, clock = _pacer()
    for _ in range(100):  # 100 answers a second, unpaced
        clock.now += 0.01
        pacer.observe(None, 200)
    pacer.observe(None, 429, retry_after=0.5)
    assert pacer.inferred and pacer.interval == pytest.approx(1 / (100 * 0.8), rel=0.02)
    first = pacer.interval
    for _ in range(5):  # answers to calls sent before the hold: no further slow-down
        pacer.observe(None, 429, retry_after=0.5)
    assert pacer.interval == first
    clock.now += 1.0
    for _ in range(20):
        pacer.observe(None, 200)
    before = pacer.interval
    assert before < first  # speeding up again, slowly
    pacer.observe(None, 429)
    assert pacer.interval == pytest.approx(before / 0.8)
    # A stated limit replaces what was inferred.
    pacer.observe(RateLimits(limit_requests=3000), 200)
    assert not pacer.inferred and pacer.interval == pytest.approx(60 / (3000 * pacer.margin))


def test_without_headers_a_burst_refused_at_once_is_read_over_the_retry_after():
    pacer, clock = _pacer()
    for _ in range(10):  # 10 answered at once, then refused with "retry in 1 s"
        pacer.observe(None, 200)
    pacer.observe(None, 429, retry_after=1.0)
    assert pacer.interval == pytest.approx(1 / (10 * 0.8))


def test_429s_without_a_hint_slow_the_pace_only_down_to_the_cap():
    """Each 429 without Retry-After stretched the interval by 1.25 with no end: a model with no quota soon waited
    minutes between calls. The pace learned from 429s stops at one call every MAX_LEARNED_INTERVAL_S."""
    pacer, clock = _pacer()
    for _ in range(100):  # 100 answers a second, then nothing but 429s, each after the last hold ended
        clock.now += 0.01
        pacer.observe(None, 200)
    for _ in range(45):
        pacer.observe(None, 429)
        clock.now = pacer.blocked_until + 0.01
    assert pacer.interval == 10.0  # MAX_LEARNED_INTERVAL_S (before: 0.0125 s x 1.25 ** 44, 230 s)
    # A minute with no answer at all: no rate left to learn from, one call per hold.
    for _ in range(20):
        pacer.observe(None, 429)
        clock.now = pacer.blocked_until + 0.01
    assert pacer.interval == 1.0
    never, nclock = _pacer()
    for _ in range(30):  # a model that never answered: each 429 holds 1 s, the pace stays one call per hold
        never.observe(None, 429)
        nclock.now = never.blocked_until + 0.01
    assert never.interval == 1.0
    told_to_wait = Pacer(clock=clock, sleep=clock.sleep, max_hold_s=120)
    told_to_wait.observe(None, 429, retry_after=90)  # the first 429 asks for 90 s: held 90 s, paced at the cap
    assert told_to_wait.interval == 10.0 and told_to_wait.blocked_until - clock.now == 90


def test_the_margin_must_be_a_share():
    for margin in (0, -1, 1.5):
        with pytest.raises(ValueError):
            Pacer(margin=margin)


# --------------------------------------------------------------------------
# The fake server's rate-limit mode and the router against it


@pytest.fixture(scope="module")
def server():
    fake = FakeLLMServer(log_requests=False)
    fake.start_in_thread()
    yield fake
    fake.stop_in_thread()


@pytest.fixture(autouse=True)
def clean(server):
    server.reset()


def test_the_fake_server_limits_by_model_name_with_openai_headers_and_429s(server):
    with httpx.Client(base_url=server.base_url) as client:
        answers = [client.post("/v1/chat/completions", json={
            "model": "m-rpm-120", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
            for _ in range(3)]
    # 120 a minute over 1 s windows: 2 at once, the third refused.
    assert [a.status_code for a in answers] == [200, 200, 429]
    first = answers[0].headers
    assert (first["x-ratelimit-limit-requests"], first["x-ratelimit-remaining-requests"]) == ("120", "1")
    assert parse_duration(first["x-ratelimit-reset-requests"]) == pytest.approx(0.5, abs=0.05)
    refused = answers[2]
    assert refused.headers["retry-after"] == "1" and 0 < int(refused.headers["retry-after-ms"]) <= 500
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert "Rate limit reached for m-rpm-120" in refused.json()["error"]["message"]
    assert server.rate_limit_stats() == {200: 2, 429: 1}


def test_the_fake_server_limits_by_rule_over_http_and_counts_tokens(server):
    with httpx.Client(base_url=server.base_url) as client:
        assert client.post("/_control/config", json={"rate_limits": [
            {"model": "^tok", "tpm": 6000, "window_s": 1}]}).json() == {"ok": True}
        assert client.post("/_control/config", json={"rate_limits": [{"modle": "x"}]}).status_code == 400
        client.post("/_control/config", json={"rate_limits": [{"model": "^tok", "tpm": 6000, "window_s": 1}]})
        body = {"model": "tok-a", "max_tokens": 40, "messages": [{"role": "user", "content": "one two three"}]}
        answers = [client.post("/v1/chat/completions", json=body) for _ in range(3)]
        stats = client.get("/_control/stats").json()
    # 100 tokens a second; each call counts 3 prompt words + 40 asked = 43: two fit, the third does not.
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].headers["x-ratelimit-remaining-tokens"] == "57"
    assert "x-ratelimit-limit-requests" not in answers[0].headers
    assert "TPM" in answers[2].json()["error"]["message"]
    assert stats == {"statuses": {"200": 2, "429": 1}}


def test_the_fake_server_speaks_anthropic_and_gemini_limits_their_way(server):
    server.set_rate_limits([{"model": "limited", "rpm": 60}])
    with httpx.Client(base_url=server.base_url) as client:
        claude = [client.post("/v1/messages", json={"model": "claude-limited", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"}]}) for _ in range(2)]
        gemini = [client.post("/v1beta/models/gemini-limited:generateContent", json={"contents": [
            {"role": "user", "parts": [{"text": "hi"}]}]}) for _ in range(2)]
    assert [a.status_code for a in claude] == [200, 429]
    assert claude[0].headers["anthropic-ratelimit-requests-limit"] == "60"
    reset = parse_reset(claude[0].headers["anthropic-ratelimit-requests-reset"])
    assert reset is not None and reset <= 2
    assert claude[1].json()["error"]["type"] == "rate_limit_error"
    assert [a.status_code for a in gemini] == [200, 429]
    assert not any(h.startswith("x-ratelimit") for h in gemini[0].headers)
    assert retry_delay_from_body(gemini[1].json()) == 1.0


def _settings(server, **extra):
    return settings_from_env({"OPENAI_API_KEY": "sk-pacing-test-0001", "OPENAI_BASE_URL": server.base_url + "/v1",
                              "GEMINI_API_KEY": "gm-pacing-test-0002", "GEMINI_BASE_URL": server.base_url,
                              "EVALSITE_CONCURRENCY": "20"}, backoff_base_s=0.05, backoff_max_s=0.2, **extra)


def _run(server, model_id: str, n: int, *, pacing: bool = True, probe: bool = False, **settings):
    async def main():
        async with Router(_settings(server, **settings)) as router:
            router.pacing, router.pacing_probe = pacing, probe
            started = time.perf_counter()
            results = await asyncio.gather(*(router.complete(ChatRequest(
                model_id=model_id, messages=({"role": "user", "content": f"q{i}"},), max_tokens=16,
                use_cache=False)) for i in range(n)))
            return results, time.perf_counter() - started, router
    return asyncio.run(main())


def test_the_router_paces_to_the_stated_limit_no_item_fails_and_no_429_storm(server):
    # 1200 a minute = 20 a second, 1 s windows; 60 calls, 20 at once: ~3 s paced.
    results, elapsed, router = _run(server, "openai:paced-rpm-1200", 60)
    assert all(r.error is None for r in results), [r.error for r in results if r.error][:3]
    stats = server.rate_limit_stats()
    assert stats.get(429, 0) <= 1, stats  # the opening burst (20) fits the window (20): at most its edge
    assert 1.8 <= elapsed <= 4.5, elapsed  # 20 at once, then 40 at 0.97 x 20 a second
    pacer = next(iter(router._pacers.values()))
    assert pacer.limit_requests == 1200


def test_a_limit_below_the_concurrency_costs_one_burst_of_429s_and_no_item(server):
    # 120 a minute lets 2 through at once; 8 calls leave together: 6 are refused, once, and every retry is paced.
    results, elapsed, _ = _run(server, "openai:tight-rpm-120", 8)
    assert all(r.error is None for r in results) and max(r.attempts for r in results) == 2
    assert server.rate_limit_stats() == {200: 8, 429: 6}


def test_with_the_probe_a_limit_below_the_concurrency_draws_no_429_at_all(server):
    results, elapsed, _ = _run(server, "openai:probed-rpm-120", 8, probe=True)
    assert all(r.error is None for r in results) and server.rate_limit_stats() == {200: 8}
    assert 3.0 <= elapsed <= 5.0, elapsed  # 7 calls after the probe, 0.5 s apart / 0.97


def test_anthropic_headers_pace_the_router_too(server):
    settings = settings_from_env({"ANTHROPIC_API_KEY": "sk-ant-pacing-0003", "ANTHROPIC_BASE_URL": server.base_url})

    async def main():
        async with Router(settings) as router:
            results = await asyncio.gather(*(router.complete(ChatRequest(
                model_id="anthropic:claude-rpm-600", messages=({"role": "user", "content": f"q{i}"},),
                use_cache=False)) for i in range(20)))
            return results, next(iter(router._pacers.values()))
    results, pacer = asyncio.run(main())
    assert all(r.error is None for r in results)
    stats = server.rate_limit_stats()  # 600 a minute lets 10 through at once: the opening burst's other 10, once
    assert pacer.limit_requests == 600 and stats[200] == 20 and stats.get(429, 0) <= 10, stats


def test_without_pacing_the_same_run_draws_429s(server):
    results, _, _ = _run(server, "openai:unpaced-rpm-1200", 60, pacing=False, max_attempts=10)
    assert server.rate_limit_stats().get(429, 0) > 5  # what the pacer saves


def test_gemini_without_headers_learns_from_its_429s(server):
    # Gemini states no limit: the first 429s teach the pacer the rate (its body says when to retry).
    results, elapsed, router = _run(server, "google:gem-rpm-600", 40, max_attempts=5)
    assert all(r.error is None for r in results), [r.error for r in results if r.error][:3]
    stats = server.rate_limit_stats()
    assert stats[200] == 40 and stats.get(429, 0) <= 25, stats
