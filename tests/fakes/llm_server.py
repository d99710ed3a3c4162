# Over 500 lines: one fake server speaking every provider format the router calls, with its faults.
"""A fake LLM server on 127.0.0.1 for tests and benchmarks: deterministic answers, injected faults.

Run it as a script::

    python tests/fakes/llm_server.py --port 8765 --latency-ms 200 [--script rules.json] [--no-log]

or in-process (a background thread with its own event loop)::

    server = FakeLLMServer(latency_ms=0)
    base_url = server.start_in_thread()      # http://127.0.0.1:<free port>
    ...
    server.stop_in_thread()

It speaks four protocols, chosen by the path (any prefix before it works, so
``/v1/...`` and ``/api/v1/...`` both do):

* ``POST .../chat/completions``  OpenAI chat completions (and compatibles)
* ``POST .../completions``       OpenAI text completions
* ``POST .../messages``          Anthropic messages
* ``POST .../models/<m>:generateContent``  Gemini

Answers are deterministic: ``Echo: <last user message>`` unless a scripted
rule matches. Usage counts whitespace-separated words (prompt: every message;
completion: the answer).

**Faults by model name.** Words in the model name inject faults; each model
name has its own request counter, so use distinct names per test:

* ``fail-429-then-ok``, ``fail-500x2-then-ok``: that status for the first call
  (or first N), then normal answers; ``always-503``: that status every time.
  With ``noquota`` as well (``m-noquota-always-429``), a 429's body is OpenAI's
  ``insufficient_quota`` error ("no quota"), as a key without quota gets.
  ``always-401`` answers like a provider rejecting a key and *echoes the key
  it was sent* (to test that clients never repeat it).
* ``retry-after-0.2`` / ``retry-after-ms-150``: send ``Retry-After`` (seconds)
  or ``retry-after-ms`` with error answers.
* ``hang-then-ok`` / ``hangx2-then-ok`` / ``always-hang``: read the request and
  never answer (until the client gives up).
* ``drop-then-ok`` / ``always-drop``: close the connection without answering.
* ``malformed-then-ok`` / ``always-malformed``: 200 with broken JSON.
* ``empty``: a 200 answer whose text is empty.
* ``latency-50ms``: this model's latency instead of the server's.
* ``rpm-600`` / ``tpm-40000``: a rate limit for this model name (below).

**Rate limits** (requests and tokens per minute, per model name), as OpenAI
enforces them: a bucket per model that refills evenly (``rpm``/60 a second)
and holds ``window_s`` seconds' worth (1 s by default: OpenAI "quantizes" a
minute's limit into shorter windows, so 600 a minute allows 10 at once, not
600), the same for tokens (a call counts its prompt words plus the answer's
token limit it asked for, as OpenAI counts max_tokens before answering).
Every answer to a limited model carries the headers OpenAI sends
(``x-ratelimit-limit-requests``, ``-remaining-requests``, ``-reset-requests``
as a duration like ``6m0s``/``1s``/``20ms``, and ``-tokens``); Anthropic's
protocol gets ``anthropic-ratelimit-*`` headers (resets in RFC 3339) and Gemini
none (its 429 body carries ``google.rpc.RetryInfo``). Over the limit: 429
with ``retry-after`` (whole seconds) and ``retry-after-ms``, and the
provider's rate-limit error body. Set them by name (``rpm-600``), with
``FakeLLMServer(rate_limits=[{"model": regex, "rpm": n, "tpm": n, "window_s":
s}])``, ``server.set_rate_limits([...])`` or ``POST /_control/config
{"rate_limits": [...]}`` (first matching rule wins; a name's own ``rpm-``/
``tpm-`` words win over rules). ``server.rate_limit_stats()`` (and ``GET
/_control/stats``) counts answers by status.

**Scripted replies** (for playing LLM judges): rules tried in order, first
match wins; each is ``{"match": regex on the last user message, "model":
optional regex on the model name, "reply": text, "status": optional error
status, "times": optional number of uses}``. A simulated user's model (docs/blueprints.md
"Simulated users") is scripted the same way, by its model name: it is sent the
conversation with the roles swapped, so its last user message is the
candidate's latest answer. Set them with
``server.script(rules)``, ``POST /_control/script {"rules": [...],
"replace": true}``, or ``--script FILE`` (a JSON list or ``{"rules": [...]}``).

**Native tool calls** (a rule's ``tool_calls``: one step, a list of ``{"name",
"arguments"}``; or ``steps``: a list of such lists). When the request carries
tools (OpenAI ``tools``, Anthropic ``tools``, Gemini ``functionDeclarations``),
the answer to the rule's conversation is the step's calls in the protocol's own
shape (OpenAI ``tool_calls``, Anthropic ``tool_use`` blocks, Gemini
``functionCall`` parts), one step per model call after the last user message;
once the tool results of every step came back, the answer is ``reply``. A
request without tools gets the same calls as ``TOOL_CALL {json}`` lines followed
by ``reply`` (the trace-only equivalent of the same trajectory). The request log
keeps each tool result the client sent (``tool_results``).

**Control endpoints**: ``GET /_control/requests`` (the request log: path,
protocol, model, headers, body, status), ``POST /_control/reset`` (log,
counters and rules), ``POST /_control/script``, ``POST /_control/config``
(``{"latency_ms": n}``, ``{"rate_limits": [...]}``), ``GET /_control/stats``,
``GET /_control/health``, ``GET /_control/tally``.

**The tally** is kept even without a request log (``--no-log``): every chat or
completion request is counted by its model and conversation (a digest of
them), so a benchmark can tell that each call arrived exactly once.
``server.tally()`` and ``GET /_control/tally`` give ``{"requests": all,
"distinct": distinct conversations, "repeated": [{"model", "lastUser",
"times"}]}``, the repeated ones (at most 1,000 listed) with their last user
message.

The server is asyncio streams with a minimal HTTP/1.1 parser and keep-alive,
so its own overhead stays far below a real model's latency and a benchmark
measures the client, not the fake.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import sys
import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

_DROP = object()
_HANG = object()

_STATUS_TEXT = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 408: "Request Timeout",
    411: "Length Required", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout", 529: "Overloaded",
}

_FAIL_THEN_OK = re.compile(r"fail-(\d{3})(?:x(\d+))?-then-ok")
_ALWAYS_STATUS = re.compile(r"always-(\d{3})")
_MODE_THEN_OK = re.compile(r"(hang|drop|malformed)(?:x(\d+))?-then-ok")
_ALWAYS_MODE = re.compile(r"always-(hang|drop|malformed)")
_RETRY_AFTER = re.compile(r"retry-after-(\d+(?:\.\d+)?)(?![\d.])")
_RETRY_AFTER_MS = re.compile(r"retry-after-ms-(\d+)")
_LATENCY = re.compile(r"latency-(\d+)ms")
_RPM = re.compile(r"(?<![a-z])rpm-(\d+)")
_TPM = re.compile(r"(?<![a-z])tpm-(\d+)")


@dataclass
class _Bucket:
    """One model's requests or tokens: refills ``per_minute``/60 a second up to ``capacity``."""

    per_minute: float
    capacity: float
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.per_minute / 60.0)
        self.at = now

    def seconds_until(self, amount: float) -> float:
        return max(0.0, (amount - self.level) * 60.0 / self.per_minute)

    def seconds_until_full(self) -> float:
        return max(0.0, (self.capacity - self.level) * 60.0 / self.per_minute)


def openai_duration(seconds: float) -> str:
    """A reset as OpenAI writes it: ``6m0s``, ``1s``, ``20ms``, ``1.5s``."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    rest = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{rest}s" if minutes else f"{rest}s"


@dataclass
class Rule:
    match: str = ""
    reply: str = ""
    model: str | None = None
    status: int | None = None
    times: int | None = None
    tool_calls: list | None = None  # one step of native calls: [{"name", "arguments"}]
    steps: list | None = None  # several steps: [[calls], [calls]]
    _match_re: re.Pattern | None = field(default=None, repr=False)
    _model_re: re.Pattern | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.tool_calls is not None and self.steps is None:
            self.steps = [self.tool_calls]
        self._match_re = re.compile(self.match, re.S)
        self._model_re = re.compile(self.model) if self.model else None

    def matches(self, model: str, last_user: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self._model_re is not None and not self._model_re.search(model):
            return False
        return self._match_re.search(last_user) is not None


class FakeLLMServer:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, latency_ms: float = 0.0,
                 rules: list[dict] | None = None, log_requests: bool = True, hang_s: float = 600.0,
                 ssl_context=None, rate_limits: list[dict] | None = None) -> None:
        self.host = host
        self.ssl_context = ssl_context  # serve HTTPS with this server-side context
        self.port = port
        self.latency_s = latency_ms / 1000
        self.log_requests = log_requests
        self.hang_s = hang_s
        self._lock = threading.Lock()
        self._rules: list[Rule] = [Rule(**r) for r in (rules or [])]
        self._log: list[dict] = []
        self._counters: dict[str, int] = {}
        self._rate_rules: list[tuple[re.Pattern, dict]] = []
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._statuses: Counter = Counter()  # answers by status, kept even without a request log
        self._tally: Counter = Counter()  # requests by a digest of their model and conversation (``tally``)
        self._tally_seen: dict[bytes, tuple[str, str]] = {}  # the repeated ones' model and last user message
        if rate_limits:
            self.set_rate_limits(rate_limits)
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    def script(self, rules: list[dict], *, replace: bool = True) -> None:
        new = [Rule(**r) for r in rules]
        with self._lock:
            self._rules = new if replace else self._rules + new

    def reset(self) -> None:
        with self._lock:
            self._rules, self._log, self._counters = [], [], {}
            self._rate_rules, self._buckets, self._statuses = [], {}, Counter()
            self._tally, self._tally_seen = Counter(), {}

    def set_rate_limits(self, rules: list[dict]) -> None:
        """``[{"model": regex, "rpm": n, "tpm": n, "window_s": s}]``; the first rule matching a model name wins."""
        compiled = []
        for rule in rules:
            unknown = set(rule) - {"model", "rpm", "tpm", "window_s"}
            if unknown:
                raise TypeError(f"unknown rate-limit keys: {sorted(unknown)}")
            compiled.append((re.compile(rule.get("model") or ""), {
                "rpm": float(rule["rpm"]) if rule.get("rpm") else None,
                "tpm": float(rule["tpm"]) if rule.get("tpm") else None,
                "window_s": float(rule.get("window_s") or 1.0)}))
        with self._lock:
            self._rate_rules, self._buckets = compiled, {}

    def rate_limit_stats(self) -> dict[int, int]:
        with self._lock:
            return dict(self._statuses)

    def tally(self) -> dict:
        """How many chat and completion requests arrived, how many distinct (model, conversation), and which
        arrived more than once (model, last user message, times; at most 1,000 listed)."""
        with self._lock:
            repeated = [{"model": self._tally_seen[key][0], "lastUser": self._tally_seen[key][1], "times": times}
                        for key, times in self._tally.items() if times > 1 and key in self._tally_seen]
            return {"requests": sum(self._tally.values()), "distinct": len(self._tally),
                    "repeated": repeated[:1000]}

    def requests(self, model: str | None = None) -> list[dict]:
        with self._lock:
            return [r for r in self._log if model is None or r["model"] == model]

    def set_latency(self, latency_ms: float) -> None:
        self.latency_s = latency_ms / 1000

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port, backlog=1024,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def start_in_thread(self) -> str:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # reported to the starting thread below
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-llm-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self.base_url

    def stop_in_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    # -- HTTP ----------------------------------------------------------------------

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # the client closed the connection between requests
            except asyncio.LimitOverrunError:
                writer.write(_http(431, {}, b'{"error":{"message":"headers too large"}}', keep_alive=False))
                return
            request_line, *lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, version = request_line.split(" ", 2)
            except ValueError:
                writer.write(_http(400, {}, b'{"error":{"message":"bad request line"}}', keep_alive=False))
                return
            headers: dict[str, str] = {}
            for line in lines:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                writer.write(_http(411, {}, b'{"error":{"message":"send a Content-Length"}}', keep_alive=False))
                return
            length = int(headers.get("content-length") or 0)
            body = await reader.readexactly(length) if length else b""
            connection = headers.get("connection", "").lower()
            keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"

            result = await self._dispatch(method, target, headers, body)
            if result is _DROP:
                writer.transport.abort()  # reset, no answer at all
                return
            if result is _HANG:
                # Hold the request until the client gives up (it closes) or hang_s passes.
                try:
                    await asyncio.wait_for(reader.read(1), self.hang_s)
                except asyncio.TimeoutError:
                    pass
                return
            status, extra_headers, payload = result
            writer.write(_http(status, extra_headers, payload, keep_alive=keep_alive))
            await writer.drain()
            if not keep_alive:
                return

    async def _dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes):
        path = target.split("?", 1)[0]
        if path.startswith("/_control/"):
            return self._control(method, path, body)
        if method != "POST":
            return 404, {}, _json({"error": {"message": f"no {method} {path} here"}})
        if path.endswith("/embeddings") or path.endswith(":batchEmbedContents"):
            return self._embeddings(path, body)
        if path.endswith("/chat/completions"):
            protocol = "openai_chat"
        elif path.endswith("/completions"):
            protocol = "openai_completions"
        elif path.endswith("/messages"):
            protocol = "anthropic"
        elif path.endswith(":generateContent"):
            protocol = "gemini"
        else:
            return 404, {}, _json({"error": {"message": f"unknown path {path}"}})
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            return 400, {}, _json({"error": {"message": "the request body is not valid JSON"}})
        if not isinstance(data, dict):
            return 400, {}, _json({"error": {"message": "the request body must be a JSON object"}})

        model, messages = _read_request(protocol, path, data)
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"
                          and not m.get("tool_result")), "")
        digest = hashlib.blake2b(json.dumps([model, messages], sort_keys=True).encode(), digest_size=16).digest()
        with self._lock:
            count = self._counters[model] = self._counters.get(model, 0) + 1
            self._tally[digest] += 1
            if self._tally[digest] == 2 and len(self._tally_seen) < 1000:
                self._tally_seen[digest] = (model, last_user)
            rule = next((r for r in self._rules if r.matches(model, last_user)), None)
            if rule is not None and rule.times is not None:
                rule.times -= 1
            entry = {"path": path, "protocol": protocol, "model": model, "n": count, "time": time.monotonic()}
            if self.log_requests:
                entry.update(headers=headers, body=data, messages=messages,
                             tool_results=[m["content"] for m in messages if m.get("tool_result")])
                self._log.append(entry)
            limited = self._rate_limit(protocol, model, messages, data, entry["time"])
            if limited is not None and limited[0] == 429:
                self._statuses[429] += 1
        if limited is not None and limited[0] == 429:
            entry["status"] = 429
            return limited
        limit_headers = limited[1] if limited is not None else {}

        latency = self.latency_s
        if m := _LATENCY.search(model):
            latency = int(m.group(1)) / 1000
        fault = _fault(model, count)
        if latency:
            await asyncio.sleep(latency)
        with self._lock:
            self._statuses[fault if fault is not None else
                           (rule.status if rule is not None and rule.status else 200)] += 1
        if fault == "hang":
            entry["status"] = None
            return _HANG
        if fault == "drop":
            entry["status"] = None
            return _DROP
        if fault == "malformed":
            entry["status"] = 200
            return 200, {}, b'{"choices": [{"message": {"content": "cut off'
        status = fault if isinstance(fault, int) else (rule.status if rule is not None and rule.status else None)
        if status is not None:
            entry["status"] = status
            return status, {**limit_headers, **_retry_headers(model)}, _json(_error_body(protocol, status, model,
                                                                                         headers))

        reply = rule.reply if rule is not None else f"Echo: {last_user}"
        if "empty" in model.split("-"):
            reply = ""
        prompt_tokens = sum(len((m["content"] or "").split()) for m in messages)
        entry["status"] = 200
        steps = (rule.steps or []) if rule is not None else []
        if steps and _sends_tools(protocol, data):
            done = _tool_rounds(messages)
            if done < len(steps):
                calls = [c for c in steps[done] if isinstance(c, dict)]
                words = sum(len(json.dumps(c.get("arguments") or {}).split()) + 1 for c in calls)
                return 200, limit_headers, _json(_tool_answer(protocol, model, calls, prompt_tokens, words, count))
        elif steps:
            lines = [f"TOOL_CALL {json.dumps({'name': c.get('name'), 'arguments': c.get('arguments')})}"
                     for step in steps for c in step if isinstance(c, dict)]
            reply = "\n".join([*lines, reply] if reply else lines)
        return 200, limit_headers, _json(_answer(protocol, model, reply, prompt_tokens, len(reply.split()), count))

    def _rate_limit(self, protocol: str, model: str, messages: list[dict], data: dict, now: float):
        """None (no limit for this model), ``(200, headers)`` within it, or a whole 429 answer. Under the lock."""
        limits = next((limits for pattern, limits in self._rate_rules if pattern.search(model)), None)
        rpm, tpm = (limits or {}).get("rpm"), (limits or {}).get("tpm")
        window = (limits or {}).get("window_s", 1.0)
        if m := _RPM.search(model):
            rpm = float(m.group(1))
        if m := _TPM.search(model):
            tpm = float(m.group(1))
        if not rpm and not tpm:
            return None
        cost = sum(len((m["content"] or "").split()) for m in messages) + _asked_tokens(data)
        buckets = {}
        for kind, per_minute in (("requests", rpm), ("tokens", tpm)):
            if not per_minute:
                continue
            bucket = self._buckets.get((model, kind))
            if bucket is None:
                capacity = max(1.0 if kind == "requests" else float(cost), per_minute * window / 60.0)
                bucket = self._buckets[(model, kind)] = _Bucket(per_minute, capacity, capacity, now)
            bucket.refill(now)
            buckets[kind] = bucket
        needs = {"requests": 1.0, "tokens": float(cost)}
        short = [kind for kind, bucket in buckets.items() if bucket.level < needs[kind]]
        if not short:
            for kind, bucket in buckets.items():
                bucket.level -= needs[kind]
        headers = _limit_headers(protocol, buckets, time.time())
        if not short:
            return 200, headers
        wait = max(buckets[kind].seconds_until(needs[kind]) for kind in short)
        headers["retry-after"] = str(max(1, math.ceil(wait)))
        headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        kind = short[0]
        limit = int(buckets[kind].per_minute)
        message = (f"Rate limit reached for {model} in organization org-fake on {kind} per min "
                   f"({'RPM' if kind == 'requests' else 'TPM'}): Limit {limit}, Requested "
                   f"{int(needs[kind])}. Please try again in {openai_duration(wait)}.")
        if protocol == "anthropic":
            body = {"type": "error", "error": {"type": "rate_limit_error", "message": message}}
        elif protocol == "gemini":
            headers = {}  # Gemini sends no rate-limit headers; the wait is in the body
            body = {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{math.ceil(wait)}s"}]}}
        else:
            body = {"error": {"message": message, "type": kind, "param": None, "code": "rate_limit_exceeded"}}
        return 429, headers, _json(body)

    def _embeddings(self, path: str, body: bytes):
        """Deterministic embeddings: letter counts a-z, so equal texts have similarity 1."""
        data = json.loads(body or b"{}")
        gemini = path.endswith(":batchEmbedContents")
        if gemini:
            texts = ["".join(p.get("text", "") for p in r["content"]["parts"]) for r in data.get("requests", [])]
            model = path.rsplit("/", 1)[-1].removesuffix(":batchEmbedContents")
        else:
            texts = data.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            model = str(data.get("model", ""))
        with self._lock:
            self._counters[model] = count = self._counters.get(model, 0) + 1
            if self.log_requests:
                self._log.append({"path": path, "protocol": "embeddings", "model": model, "n": count,
                                  "time": time.monotonic(), "body": data, "messages": [], "status": 200})
        fault = _fault(model, count)
        if isinstance(fault, int):
            return fault, _retry_headers(model), _json({"error": {"message": f"fake {fault} for {model}"}})
        vectors = [[float(t.lower().count(c)) + 0.001 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]
        if gemini:
            return 200, {}, _json({"embeddings": [{"values": v} for v in vectors]})
        return 200, {}, _json({"object": "list", "model": model, "usage": {"prompt_tokens": 1, "total_tokens": 1},
                               "data": [{"object": "embedding", "index": i, "embedding": v}
                                        for i, v in enumerate(vectors)]})

    def _control(self, method: str, path: str, body: bytes):
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            return 400, {}, _json({"error": {"message": "the control body is not valid JSON"}})
        if path == "/_control/health":
            return 200, {}, _json({"ok": True})
        if path == "/_control/requests":
            return 200, {}, _json({"requests": self.requests()})
        if path == "/_control/tally":
            return 200, {}, _json(self.tally())
        if path == "/_control/reset" and method == "POST":
            self.reset()
            return 200, {}, _json({"ok": True})
        if path == "/_control/script" and method == "POST":
            rules = data.get("rules", data) if isinstance(data, dict) else data
            try:
                self.script(rules, replace=bool(data.get("replace", True)) if isinstance(data, dict) else True)
            except (TypeError, re.error) as exc:
                return 400, {}, _json({"error": {"message": f"bad rules: {exc}"}})
            return 200, {}, _json({"ok": True, "rules": len(self._rules)})
        if path == "/_control/stats":
            return 200, {}, _json({"statuses": {str(k): v for k, v in self.rate_limit_stats().items()}})
        if path == "/_control/config" and method == "POST":
            if "latency_ms" in data:
                self.set_latency(float(data["latency_ms"]))
            if "rate_limits" in data:
                try:
                    self.set_rate_limits(data["rate_limits"] or [])
                except (TypeError, KeyError, ValueError, re.error) as exc:
                    return 400, {}, _json({"error": {"message": f"bad rate limits: {exc}"}})
            return 200, {}, _json({"ok": True})
        return 404, {}, _json({"error": {"message": f"no control endpoint {method} {path}"}})


def _fault(model: str, count: int):
    """What the model name asks for on its ``count``-th call: a status, a mode, or None."""
    if m := _ALWAYS_STATUS.search(model):
        return int(m.group(1))
    if m := _FAIL_THEN_OK.search(model):
        if count <= int(m.group(2) or 1):
            return int(m.group(1))
    if m := _ALWAYS_MODE.search(model):
        return m.group(1)
    if m := _MODE_THEN_OK.search(model):
        if count <= int(m.group(2) or 1):
            return m.group(1)
    return None


def _asked_tokens(data: dict) -> int:
    """The answer's token limit the request asked for, in any protocol's spelling (0: none)."""
    config = data.get("generationConfig") if isinstance(data.get("generationConfig"), dict) else {}
    for value in (data.get("max_tokens"), data.get("max_completion_tokens"), config.get("maxOutputTokens")):
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _limit_headers(protocol: str, buckets: dict[str, _Bucket], wall: float) -> dict[str, str]:
    """The rate-limit headers each provider sends (Gemini sends none)."""
    headers: dict[str, str] = {}
    for kind, bucket in buckets.items():
        if protocol == "anthropic":
            reset = datetime.fromtimestamp(wall + bucket.seconds_until_full(), timezone.utc)
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(int(bucket.per_minute))
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(int(bucket.level))
            headers[f"anthropic-ratelimit-{kind}-reset"] = reset.isoformat(timespec="seconds").replace("+00:00", "Z")
        elif protocol != "gemini":
            headers[f"x-ratelimit-limit-{kind}"] = str(int(bucket.per_minute))
            headers[f"x-ratelimit-remaining-{kind}"] = str(int(bucket.level))
            headers[f"x-ratelimit-reset-{kind}"] = openai_duration(bucket.seconds_until_full())
    return headers


def _retry_headers(model: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    if m := _RETRY_AFTER_MS.search(model):
        headers["retry-after-ms"] = m.group(1)
    elif m := _RETRY_AFTER.search(model):
        headers["Retry-After"] = m.group(1)
    return headers


def _read_request(protocol: str, path: str, data: dict) -> tuple[str, list[dict]]:
    """The model name and the conversation as ``{"role", "content"}`` dicts, system first."""
    if protocol == "gemini":
        model = path.rsplit("/", 1)[-1].removesuffix(":generateContent")
        messages = []
        system = data.get("systemInstruction")
        if isinstance(system, dict):
            messages.append({"role": "system", "content": "".join(p.get("text", "") for p in system.get("parts", []))})
        for content in data.get("contents") or []:
            role = "assistant" if content.get("role") == "model" else "user"
            parts = content.get("parts", [])
            results = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
            if results:
                for result in results:
                    messages.append({"role": "user", "content": json.dumps(result.get("response")),
                                     "tool_result": True})
                continue
            messages.append({"role": role, "content": "".join(p.get("text", "") for p in parts)})
        return model, messages
    model = str(data.get("model", ""))
    if protocol == "openai_completions":
        return model, [{"role": "user", "content": str(data.get("prompt", ""))}]
    messages = []
    if protocol == "anthropic" and data.get("system"):
        messages.append({"role": "system", "content": str(data["system"])})
    for message in data.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "tool":
            messages.append({"role": "user", "content": content, "tool_result": True})
            continue
        if isinstance(content, list):
            results = [p for p in content if isinstance(p, dict) and p.get("type") == "tool_result"]
            if results:
                for result in results:
                    text = result.get("content")
                    messages.append({"role": "user", "content": ("Error: " if result.get("is_error") else "")
                                     + (text if isinstance(text, str) else json.dumps(text)), "tool_result": True})
                continue
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        messages.append({"role": message.get("role"), "content": content})
    return model, messages


def _sends_tools(protocol: str, data: dict) -> bool:
    """Whether the request offers native tools (the completions protocol has none)."""
    return protocol in ("openai_chat", "anthropic", "gemini") and bool(data.get("tools"))


def _tool_rounds(messages: list[dict]) -> int:
    """Tool steps already taken: the model's answers after the last user message (tool results aside)."""
    rounds = 0
    for message in reversed(messages):
        if message["role"] == "user" and not message.get("tool_result"):
            break
        if message["role"] == "assistant":
            rounds += 1
    return rounds


def _tool_answer(protocol: str, model: str, calls: list[dict], prompt_tokens: int, completion_tokens: int,
                 n: int) -> dict:
    """An answer that is only native tool calls, in the protocol's own shape."""
    if protocol == "anthropic":
        return {"id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "tool_use", "id": f"toolu_fake_{n}_{i}", "name": c.get("name"),
                             "input": c.get("arguments") or {}} for i, c in enumerate(calls)],
                "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}}
    if protocol == "gemini":
        return {"candidates": [{"content": {"role": "model", "parts": [
                    {"functionCall": {"name": c.get("name"), "args": c.get("arguments") or {}}} for c in calls]},
                    "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": completion_tokens,
                                  "totalTokenCount": prompt_tokens + completion_tokens},
                "modelVersion": model}
    return {"id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "refusal": None,
                "tool_calls": [{"id": f"call_fake_{n}_{i}", "type": "function", "function": {
                    "name": c.get("name"), "arguments": json.dumps(c.get("arguments") or {})}}
                    for i, c in enumerate(calls)]}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def _error_body(protocol: str, status: int, model: str, headers: dict[str, str]) -> dict:
    if status == 401:
        # Like real providers, say which key was refused -- in full, which they do not:
        # it proves that the client never repeats what it hears.
        sent = headers.get("authorization", "").removeprefix("Bearer ") or headers.get("x-api-key") \
            or headers.get("x-goog-api-key", "")
        message = f"Incorrect API key provided: {sent}. You can find your API key in your account settings."
    elif status == 429 and "noquota" in model.split("-"):
        # A key with no quota left: OpenAI answers 429 with code insufficient_quota, and says so in every answer.
        return {"error": {"message": "no quota", "type": "insufficient_quota", "param": None,
                          "code": "insufficient_quota"}}
    else:
        message = f"fake {status} for model {model}"
    if protocol == "anthropic":
        kinds = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}
        return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
    if protocol == "gemini":
        return {"error": {"code": status, "message": message, "status": "UNAVAILABLE" if status >= 500 else "ERROR"}}
    return {"error": {"message": message, "type": "fake_error", "code": status}}


def _answer(protocol: str, model: str, reply: str, prompt_tokens: int, completion_tokens: int, n: int) -> dict:
    if protocol == "anthropic":
        return {"id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}}
    if protocol == "gemini":
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": completion_tokens,
                                  "totalTokenCount": prompt_tokens + completion_tokens},
                "modelVersion": model}
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    if protocol == "openai_completions":
        return {"id": f"cmpl-fake-{n}", "object": "text_completion", "created": 0, "model": model,
                "choices": [{"text": reply, "index": 0, "logprobs": None, "finish_reason": "stop"}], "usage": usage}
    return {"id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": usage}


def _json(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


def _http(status: int, headers: dict[str, str], payload: bytes, *, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Status')}",
             "Content-Type: application/json", f"Content-Length: {len(payload)}",
             f"Connection: {'keep-alive' if keep_alive else 'close'}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake LLM server (OpenAI, Anthropic, Gemini protocols) on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on start)")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--script", help="JSON file of scripted reply rules")
    parser.add_argument("--no-log", action="store_true", help="keep no request log (benchmarks)")
    args = parser.parse_args(argv)
    rules = None
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            loaded = json.load(handle)
        rules = loaded["rules"] if isinstance(loaded, dict) else loaded

    async def serve() -> None:
        server = FakeLLMServer(port=args.port, latency_ms=args.latency_ms, rules=rules,
                               log_requests=not args.no_log)
        await server.start()
        print(f"listening on {server.base_url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
