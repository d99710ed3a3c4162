"""Pacing calls to a provider's rate limits: read the limits it states, send no faster than they allow.

Providers say how much room is left in headers on every answer:

* OpenAI (and compatibles that copy it: Together, xAI, OpenRouter, vLLM's
  proxies): ``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests``,
  ``x-ratelimit-reset-requests`` and the same for ``-tokens``; a reset is a
  Go-style duration (``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``): the time until
  the limit is whole again;
* Anthropic: ``anthropic-ratelimit-requests-limit``/``-remaining``/``-reset``
  and ``anthropic-ratelimit-tokens-*`` (or ``-input-tokens-*``), the reset an
  RFC 3339 time (``2026-11-26T15:40:12Z``);
* anyone, with a 429: ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP
  date); Gemini sends neither header but puts ``google.rpc.RetryInfo``
  (``"retryDelay": "13s"``) in its 429 body.

A :class:`Pacer` per provider key and model (rate limits are per model) turns
that into when the next call may leave. The router asks it before every send
(``await pacer.wait(tokens)``) and tells it every answer (``pacer.observe``):

* with ``probe`` on (``Router.pacing_probe``; off by default), the first call
  of a key and model goes alone and the others wait for its answer (at most
  ``probe_timeout_s``, 5 s), whose headers say the limit, so a run's opening
  burst never draws 429s; off, the opening burst (up to the concurrency
  limit) goes at once, and if the limit is below it the 429s it draws hold
  the key and teach the pacer before anything else is sent;
* with a stated limit of N requests a minute, calls leave evenly spaced at
  ``margin`` x N a minute (0.97 by default): a provider that enforces its
  minute limit over shorter windows (OpenAI "quantizes" 600 a minute as 10 a
  second) is never sent a burst it refuses, and a run of M calls takes about
  M / N minutes;
* with a stated token limit, each call books its estimated tokens (its body's
  bytes / 4 plus the answer's token limit, as OpenAI counts) at the same rate;
* ``remaining`` at 0 holds every call until one unit is back; a 429 holds
  every call of that key until its ``retry-after`` (else the reset, else 1 s):
  one item's 429 slows all of them, so a limit costs one 429, not a storm; a
  ``retry-after`` longer than ``max_hold_s`` (the router's retry_after_max_s)
  holds nothing: each call fails at once with that reason;
* without any limit header (Gemini, local servers), nothing is paced until a
  429: then the pacer sends at 80% of the rate the provider was answering
  (its answers in the last minute, over that span or the retry-after,
  whichever is longer), and speeds up by 0.5% per answer; another 429 after
  that hold slows it by 20% again (additive increase, multiplicative
  decrease), never below one call every ``MAX_LEARNED_INTERVAL_S`` (10 s);
  with no answer at all in the last minute there is no rate to learn, and
  calls go one per hold (a model answering only 429 is asked about once a
  second until its circuit breaker opens).
  429s to calls that left before the hold change nothing.

The router waits here before a call takes one of the provider's concurrency
slots, never while holding one: a model being paced (or held by its 429s)
never keeps another model of the same provider from sending.

Everything takes a ``clock`` (monotonic seconds), ``wall`` (Unix time, for
RFC 3339 resets) and ``sleep``, so tests drive it with a fake clock.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Awaitable, Callable, Iterable, Mapping

DEFAULT_MARGIN = 0.97  # pace at this share of a stated limit
_HOLD_WITHOUT_HINT_S = 1.0  # a 429 that says nothing about when: hold the key this long
# The slowest pace 429s can teach: one call every this many seconds. Without it every 429 without a Retry-After
# stretched the interval by 1.25, so a model that only ever answers 429 ("insufficient_quota") soon waited minutes
# between calls; its calls now fail at this pace and open its circuit breaker (router.py) instead.
MAX_LEARNED_INTERVAL_S = 10.0
_AIMD_DECREASE = 0.8
_AIMD_INCREASE = 1.005
_RATE_WINDOW_S = 60.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str | None) -> float | None:
    """Seconds in an OpenAI reset (a Go duration: ``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``) or a bare number of
    seconds (``"0.5"``); None when it is neither."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) and value >= 0 else None
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return total if position == len(text) and position else None


def parse_reset(text: str | None, *, wall: float | None = None) -> float | None:
    """Seconds from now until a reset given as a duration (OpenAI), a number of seconds, or an RFC 3339 time
    (Anthropic: ``2026-11-26T15:40:12Z``); never negative; None when unreadable."""
    seconds = parse_duration(text)
    if seconds is not None or text is None:
        return seconds
    text = text.strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None  # RFC 3339 always has an offset; a local time is not one
    return max(0.0, when.timestamp() - (time.time() if wall is None else wall))


def parse_retry_after(retry_after: str | None, retry_after_ms: str | None = None, *,
                      wall: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if retry_after_ms:
        try:
            value = float(retry_after_ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    if not retry_after:
        return None
    try:
        value = float(retry_after)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(retry_after)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if wall is None else wall))


def retry_delay_from_body(data: Any) -> float | None:
    """Gemini's 429 says when in its body: ``error.details[]`` of ``@type`` ``google.rpc.RetryInfo``, with a
    ``retryDelay`` such as ``"13s"`` (or ``{"seconds": 13, "nanos": 0}``)."""
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if not isinstance(detail, dict) or not str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            continue
        delay = detail.get("retryDelay")
        if isinstance(delay, str):
            return parse_duration(delay)
        if isinstance(delay, dict):
            seconds, nanos = delay.get("seconds", 0), delay.get("nanos", 0)
            try:
                return max(0.0, float(seconds) + float(nanos) / 1e9)
            except (TypeError, ValueError):
                return None
    return None


@dataclass(frozen=True, slots=True)
class RateLimits:
    """What one answer's headers said; None where a header was absent or unreadable."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_s: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_s: float | None = None
    retry_after_s: float | None = None


_OPENAI = {
    "x-ratelimit-limit-requests": "limit_requests", "x-ratelimit-remaining-requests": "remaining_requests",
    "x-ratelimit-reset-requests": "reset_requests_s", "x-ratelimit-limit-tokens": "limit_tokens",
    "x-ratelimit-remaining-tokens": "remaining_tokens", "x-ratelimit-reset-tokens": "reset_tokens_s",
}
_ANTHROPIC = {
    "anthropic-ratelimit-requests-limit": "limit_requests",
    "anthropic-ratelimit-requests-remaining": "remaining_requests",
    "anthropic-ratelimit-requests-reset": "reset_requests_s",
    "anthropic-ratelimit-tokens-limit": "limit_tokens", "anthropic-ratelimit-tokens-remaining": "remaining_tokens",
    "anthropic-ratelimit-tokens-reset": "reset_tokens_s",
}
# Anthropic states input and output token limits apart; without the combined ones, the input limit is paced.
_ANTHROPIC_INPUT = {
    "anthropic-ratelimit-input-tokens-limit": "limit_tokens",
    "anthropic-ratelimit-input-tokens-remaining": "remaining_tokens",
    "anthropic-ratelimit-input-tokens-reset": "reset_tokens_s",
}
_RETRY = ("retry-after", "retry-after-ms")


def read_rate_limits(headers: Mapping[str, str] | Iterable[tuple[Any, Any]], *,
                     wall: float | None = None) -> RateLimits | None:
    """The rate-limit headers of one answer (a mapping, or raw ``(name, value)`` pairs of bytes or text), or None
    when it has none (most answers of most providers: the common case costs one scan of the names)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    found: dict[str, str] = {}
    for name, value in pairs:
        if isinstance(name, bytes):
            if not (name[:1] in (b"x", b"X", b"a", b"A", b"r", b"R")):
                continue
            name = name.decode("latin-1")
            value = value.decode("latin-1") if isinstance(value, bytes) else value
        lowered = name.lower()
        if lowered.startswith(("x-ratelimit-", "anthropic-ratelimit-")) or lowered in _RETRY:
            found[lowered] = value
    if not found:
        return None
    fields: dict[str, Any] = {}
    for table in (_ANTHROPIC_INPUT, _ANTHROPIC, _OPENAI):  # later tables win
        for header, field in table.items():
            raw = found.get(header)
            if raw is None:
                continue
            if field.endswith("_s"):
                value = parse_reset(raw, wall=wall)
            else:
                value = _count(raw)
            if value is not None:
                fields[field] = value
    retry = parse_retry_after(found.get("retry-after"), found.get("retry-after-ms"), wall=wall)
    if retry is not None:
        fields["retry_after_s"] = retry
    return RateLimits(**fields) if fields else None


def _count(raw: str) -> int | None:
    try:
        value = int(float(raw.strip()))
    except (ValueError, OverflowError):
        return None
    return value if value >= 0 else None


class Pacer:
    """When the next call to one provider key and model may leave (see the module's docstring).

    ``wait(tokens)`` books the next slot and sleeps until it; ``observe(limits, status)`` learns from an
    answer. Single event loop, no locks: booking is synchronous, so concurrent waiters get distinct slots.
    """

    def __init__(self, *, margin: float = DEFAULT_MARGIN, max_hold_s: float = 120.0, probe: bool = False,
                 probe_timeout_s: float = 5.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        if not 0 < margin <= 1:
            raise ValueError(f"the pacing margin must be in (0, 1], got {margin}")
        self.margin = margin
        # The longest the key is held at once (the router's retry_after_max_s): a provider asking for longer
        # holds nothing; each call fails quickly with that reason instead of the whole run waiting.
        self.max_hold_s = max_hold_s
        # The first call goes alone; the rest wait (up to probe_timeout_s) for its answer and the limits it states.
        self.probe_timeout_s = probe_timeout_s
        self._probed = not probe
        self._probe: asyncio.Future | None = None
        self.clock = clock
        self.sleep = sleep
        self.limit_requests: int | None = None
        self.limit_tokens: int | None = None
        self.interval: float | None = None  # seconds between calls; None: not paced by requests
        self.token_rate: float | None = None  # tokens a second; None: not paced by tokens
        self.inferred = False  # the interval was learned from 429s, not stated by the provider
        self.blocked_until = 0.0
        self.next_request_at = 0.0
        self.next_tokens_at = 0.0
        self.waited_s = 0.0  # total pacing wait, for benchmarks and tests
        self.holds = 0  # how often the key was held (remaining at 0, or a 429)
        self._answered: deque[float] = deque()  # 2xx times in the last minute, to infer a rate from a 429
        self._decreased_until = 0.0  # 429s before this were to calls sent before the last slow-down

    @property
    def active(self) -> bool:
        return self.interval is not None or self.token_rate is not None or self.blocked_until > self.clock()

    def idle(self) -> bool:
        """Nothing to wait for now: no pace, no hold, no probe under way (``wait`` returns at once)."""
        return (self._probed and self.interval is None and self.token_rate is None
                and self.blocked_until <= self.clock())

    def held(self) -> float:
        """Seconds left of a hold (remaining at 0, or a 429); 0 when calls may go."""
        return max(0.0, self.blocked_until - self.clock())

    def reserve(self, tokens: int = 0) -> float:
        """Book the next slot for a call of ``tokens`` estimated tokens; the seconds to wait for it."""
        now = self.clock()
        if self.interval is None and self.token_rate is None and self.blocked_until <= now:
            return 0.0
        start = max(now, self.blocked_until)
        slot = start
        if self.interval is not None:
            slot = max(slot, self.next_request_at)
            self.next_request_at = slot + self.interval
        if self.token_rate is not None and tokens > 0:
            slot = max(slot, self.next_tokens_at)
            self.next_tokens_at = slot + tokens / self.token_rate
        return slot - now

    async def wait(self, tokens: int = 0) -> float:
        """Sleep until this call may leave; the seconds waited. A hold that starts while waiting is waited out."""
        waited = 0.0
        if not self._probed:
            loop = asyncio.get_running_loop()
            if self._probe is not None and self._probe.get_loop() is not loop:
                self._probed = True  # the probe belonged to an earlier event loop: nothing to wait for
            elif self._probe is None:  # this call is the probe: it goes now
                self._probe = loop.create_future()
            else:
                started = self.clock()
                try:
                    await asyncio.wait_for(asyncio.shield(self._probe), self.probe_timeout_s)
                except TimeoutError:
                    self._probed = True  # no answer in time (a slow model): stop waiting for it
                waited += self.clock() - started
        for _ in range(100):  # a hold renewed forever is a provider problem, not ours to loop on
            delay = self.reserve(tokens)
            if delay <= 0:
                break
            await self.sleep(delay)
            waited += delay
            if self.blocked_until <= self.clock():
                break
        self.waited_s += waited
        return waited

    def observe(self, limits: RateLimits | None, status: int | None = None, *, retry_after: float | None = None,
                last_tokens: int = 0) -> None:
        """Learn from one answer: its stated limits, its status, a retry-after read elsewhere (a Gemini body).
        ``observe(None, None)``: a call got no answer (timeout, connection); it ends the probe all the same."""
        if not self._probed:
            self._probed = True
            if self._probe is not None and not self._probe.done():
                self._probe.set_result(None)
        now = self.clock()
        if limits is not None:
            if limits.limit_requests:
                if limits.limit_requests != self.limit_requests:
                    self.limit_requests = limits.limit_requests
                    self.interval = 60.0 / (limits.limit_requests * self.margin)
                self.inferred = False
            if limits.limit_tokens:
                if limits.limit_tokens != self.limit_tokens:
                    self.limit_tokens = limits.limit_tokens
                    self.token_rate = limits.limit_tokens * self.margin / 60.0
            if limits.remaining_requests is not None and limits.remaining_requests < 1:
                self._hold(now, self._unit_back(limits.reset_requests_s, limits.limit_requests, 1, 0))
            if (limits.remaining_tokens is not None and last_tokens
                    and limits.remaining_tokens < last_tokens):
                self._hold(now, self._unit_back(limits.reset_tokens_s, limits.limit_tokens,
                                                last_tokens - limits.remaining_tokens, limits.remaining_tokens))
            if retry_after is None:
                retry_after = limits.retry_after_s
        stated = self.limit_requests is not None or self.limit_tokens is not None
        if status == 429:
            if retry_after is None and limits is not None:
                resets = [r for r in (limits.reset_requests_s, limits.reset_tokens_s) if r is not None]
                retry_after = min(resets) if resets else None
            hold = _HOLD_WITHOUT_HINT_S if retry_after is None else retry_after
            if hold > self.max_hold_s:
                return  # "come back in an hour": each call fails fast with that reason (router.py), nothing waits
            held_before = self.blocked_until
            self._hold(now, hold)
            if not stated and now >= self._decreased_until:
                self._slow_down(now, hold)
                self._decreased_until = self.blocked_until
            if not stated and self.blocked_until > held_before:
                # Without a stated limit, the slots booked before this hold are void: the calls waiting for them
                # book again after it (Pacer.wait), from its end. Kept, each hold pushed every waiter to the back
                # of a queue that kept growing, and a model answering only 429 was asked once every many seconds.
                self.next_request_at = self.blocked_until
        elif status is not None and 200 <= status < 300 and not stated:
            self._answered.append(now)
            while self._answered[0] < now - _RATE_WINDOW_S:
                self._answered.popleft()
            if self.inferred and self.interval is not None:
                self.interval /= _AIMD_INCREASE

    def _unit_back(self, reset_s: float | None, limit: int | None, needed: int, remaining: int) -> float:
        """Seconds until ``needed`` units are back: a limit refills evenly, ``reset_s`` being the time until full."""
        if reset_s is None:
            return _HOLD_WITHOUT_HINT_S
        if limit:
            missing = max(1, limit - remaining)
            return min(reset_s, reset_s * needed / missing)
        return reset_s

    def _hold(self, now: float, seconds: float) -> None:
        until = now + min(max(0.0, seconds), self.max_hold_s)
        if until > self.blocked_until:
            self.blocked_until = until
            self.holds += 1

    def _slow_down(self, now: float, hold: float) -> None:
        """No stated limit and a 429: 80% of the current pace, or of the rate the provider was answering."""
        answered = self._answered
        while answered and answered[0] < now - _RATE_WINDOW_S:
            answered.popleft()
        if not answered:  # nothing answered in the last minute: no rate to infer, one call per hold
            self.interval = max(hold, _HOLD_WITHOUT_HINT_S)
        elif self.interval is not None and self.inferred:
            self.interval /= _AIMD_DECREASE
        else:
            rate = len(answered) / max(now - answered[0], hold, 1e-3)
            self.interval = 1.0 / (rate * _AIMD_DECREASE)
        self.interval = min(self.interval, MAX_LEARNED_INTERVAL_S)
        self.inferred = True
        self.next_request_at = max(self.next_request_at, self.blocked_until)


def estimated_tokens(body_bytes: int, max_tokens: int | None) -> int:
    """What a call counts against a token limit, as OpenAI counts it before answering: the prompt (about 4 bytes
    a token; an over-estimate for most text, which errs toward waiting) plus the answer's token limit."""
    return body_bytes // 4 + (max_tokens or 0)
