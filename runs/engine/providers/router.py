# Over 500 lines: the one place a call leaves the process: limits, retries, breaker, cache, cancel.
"""The router: one ``complete(ChatRequest) -> ChatResult`` for every model a run uses.

For each request it resolves the model (built-in provider, the blueprint's
custom model, or ``fixtures:``), answers from the cache when it may, and
otherwise sends the call under the provider's concurrency limit, retrying
what is worth retrying:

* 429 (``Retry-After``/``retry-after-ms`` honoured), 408, 5xx, timeouts,
  dropped connections and malformed JSON are retried with exponential
  backoff and jitter, up to ``max_attempts`` in all; other 4xx are not;
* a built-in OpenAI-format model that rejects ``max_tokens`` or
  ``temperature`` with a 400 is asked again the way it accepts (and
  remembered for the rest of the run), without using up an attempt;
* after ``breaker_threshold`` failed calls in a row, or as many calls in a
  row that each ended on a 429 with no answer between (counted apart), the
  model's circuit breaker opens and its remaining calls fail at once with
  that reason (the provider's own words included);
* every send first asks the model's :class:`~.pacing.Pacer` (one per provider
  key and model) when it may leave, and every answer's rate-limit headers
  (``x-ratelimit-*``, ``anthropic-ratelimit-*``, ``retry-after``) and 429s
  teach it the provider's pace (pacing.py). That wait comes before the call
  takes a concurrency slot: a model held by its 429s never holds the slots
  the provider's other models need;
* a cancel (``should_stop``) ends every wait at once: pacing, a slot, a
  retry's back-off (one watcher reads the flag while calls wait).

Every expected failure comes back as ``ChatResult.error`` with
``retryable``; only bugs raise. Keys and the values of allowed ``${NAME}``
variables, and their base64, percent and hex encodings, are removed from every
answer, message and call-log entry (``redaction.Redactor``), so an endpoint
that echoes one (as some 401s do) cannot put it on a page, in an export, in
the cache or in a judge's prompt.

While an item waits to retry, ``on_wait(model_id, reason, attempt,
max_attempts, delay_s)`` is called (sync or async), e.g.
``("openai:gpt-4o", "429 from openai", 2, 3, 12.0)``; :func:`describe_wait`
turns that into "429 from openai, attempt 2 of 3 in 12 s".
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Iterable, Mapping

import httpx

from blueprints.spec.model_ids import parse_for_api_call, provider_of
from blueprints.spec.schema import CustomModel
from runs.engine import calls as call_log
from runs.engine import jsonfast
from runs.engine.types import NOT_SENT_CANCELLED, NOT_STARTED_CANCELLED, ChatRequest, ChatResult, Usage

from .cache import ResponseCache, cache_key
from .endpoints import FIXTURES_PREFIX, Endpoint, Problem, Quirks, build_request, resolve_endpoint
from .fixtures import Fixtures
from .formats import BadAnswer, error_message, error_param, parse_answer
from .pacing import DEFAULT_MARGIN, Pacer, estimated_tokens, parse_retry_after, read_rate_limits, retry_delay_from_body
from .prices import cost_usd
from .redaction import NO_SECRETS, REDACTED, Redactor, redactor_for  # noqa: F401 (REDACTED: kept importable here)
from .settings import ProviderSettings, key_variable_names
from .embeddings import embeddings_request, read_embeddings
from .transport import Answer, PooledTransport

logger = logging.getLogger(__name__)

OnWait = Callable[[str, str, int, int, float], Any]


def describe_wait(reason: str, attempt: int, max_attempts: int, delay_s: float) -> str:
    """``"429 from openai, attempt 2 of 3 in 12 s"``."""
    shown = f"{delay_s:.0f}" if delay_s >= 10 else f"{delay_s:.1f}".rstrip("0").rstrip(".")
    return f"{reason}, attempt {attempt} of {max_attempts} in {shown or '0'} s"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret, each of its encodings, and any word sharing 8+ characters with one, replaced
    (``Redactor.message``; redaction.py says what counts)."""
    return redactor_for(secrets).message(text)


@dataclass(slots=True)
class _Outcome:
    """One HTTP attempt: an answer, or why not and what to do about it."""

    text: str | None = None
    usage: Usage = Usage()
    finish_reason: str | None = None
    reason: str | None = None  # full reason for the item
    short: str | None = None  # for wait messages: "429 from openai"
    retryable: bool = False
    retry_after: float | None = None
    rate_limited: bool = False
    adapt: Quirks | None = None
    latency_ms: float | None = None
    status: int | None = None  # HTTP status; None: no answer (timeout, connection)
    body: str | None = None  # the answer's raw body, for the call log
    url: str = ""
    sent: dict | None = None  # the JSON body as sent
    tool_calls: tuple = ()  # the answer's native tool calls (tools were sent)
    sent_bytes: bytes | None = None  # the same, encoded, as it left
    attempts: list | None = None  # every attempt, for the call log (set on the last outcome)

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass(slots=True)
class _Breaker:
    open_reason: str | None = None
    open_retryable: bool = False
    failures: int = 0  # failed calls in a row (rate limits apart)
    rate_limited: int = 0  # calls in a row that ended on a 429, with no answer between
    refusals: int = 0  # rounds of 429s in a row with no answer between (a burst at one moment is one round)
    round_until: float = 0.0  # a 429 before this belongs to the round under way
    opened: asyncio.Event | None = None  # set when it opens: the model's waiting calls stop waiting

    def open(self, reason: str, retryable: bool) -> None:
        if self.open_reason:
            return
        self.open_reason, self.open_retryable = reason, retryable
        if self.opened is not None:
            self.opened.set()

    def event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self.opened is None or getattr(self.opened, "_evalsite_loop", None) is not loop:
            self.opened = asyncio.Event()
            self.opened._evalsite_loop = loop  # type: ignore[attr-defined]
            if self.open_reason:
                self.opened.set()
        return self.opened


class _Interrupt:
    """Ends one call's wait (``Router._wait_or_stop``): the first end to ring cancels the waiting task, once."""

    __slots__ = ("task", "rang")

    def __init__(self, task: asyncio.Task) -> None:
        self.task, self.rang = task, False

    def __call__(self) -> None:
        if not self.rang:
            self.rang = True
            self.task.cancel()


def _cacheable(request: ChatRequest, text: str | None) -> bool:
    """An answer the cache may keep or give back: never an empty one, and only what the caller can use."""
    if not isinstance(text, str) or not text.strip():
        return False
    try:
        return request.cacheable is None or bool(request.cacheable(text))
    except Exception:  # a check that breaks costs a call, never an item
        logger.warning("cacheable check failed; the answer is not cached", exc_info=True)
        return False


def _failed_cost(endpoint: Endpoint, outcome: "_Outcome", attempts: int) -> float | None:
    """What a failed call cost, as the budget counts it: a call never sent (a cancel, the budget, an open
    breaker) and an error answer (4xx, 5xx) cost nothing; an answer that came with its usage (an empty one)
    costs that usage; no answer (a timeout, a dropped connection) or a model without a price: unknown (None)."""
    if not attempts:
        return 0.0
    if endpoint.custom is not None or outcome.status is None:
        return None
    if not 200 <= outcome.status < 300:
        return 0.0
    usage = outcome.usage
    return cost_usd(endpoint.model_id, usage) if usage is not None and usage.input_tokens is not None else None


class Router:
    """Answers ``ChatRequest``s for one run. Use one per run (or per process) and ``aclose`` it.

    ``custom_models``: the blueprint's custom models by id (a list is accepted).
    ``fixtures``: the blueprint's fixtures, for ``fixtures:<label>`` models.
    ``cache``: any object with ``get``/``set`` (see cache.py); None: no cache.
    ``fresh``: do not read the cache, but store new answers (a "fresh" run).
    ``blueprint_concurrency``: the blueprint's ``concurrency``; it can lower limits, never raise them.
    ``transport``: an httpx transport, for tests (``httpx.MockTransport``).
    """

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        custom_models: Mapping[str, CustomModel] | Iterable[CustomModel] | None = None,
        fixtures: Fixtures | None = None,
        cache: ResponseCache | None = None,
        blueprint_concurrency: int | None = None,
        on_wait: OnWait | None = None,
        should_stop: Callable[[], Awaitable[bool]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        fresh: bool = False,
        budget: Any = None,
    ) -> None:
        self.settings = settings
        if custom_models is None:
            custom_models = {}
        elif not isinstance(custom_models, Mapping):
            custom_models = {m.id: m for m in custom_models}
        self.custom_models: dict[str, CustomModel] = dict(custom_models)
        self.fixtures = fixtures
        self.cache = cache
        self.fresh = fresh
        self.blueprint_concurrency = blueprint_concurrency
        self.on_wait = on_wait
        # Asked when an item's first call gets a slot: after a cancel, items queued behind
        # the provider's limit do not start (their first call is refused, never sent).
        self.should_stop = should_stop
        # A gate every attempt passes before it leaves (``pipeline.BudgetGuard``, a replay's
        # ``CacheOnlyGate``): ``await admit(model_id, messages, max_tokens, purpose=, about=)`` gives a ticket
        # or None (refused: the call is not sent, as after a cancel); ``await settle(ticket, cost_usd,
        # answered=)`` when the attempt is over. None: no gate.
        self.budget = budget
        self.calls_sent = 0  # HTTP requests made, retries included (benchmarks, tests)
        self._secrets = settings.secrets()
        # Every text that leaves the router (answers, errors, wait reasons, the call log) goes through it.
        self._redactor = redactor_for(self._secrets)
        self._endpoint_redactors: dict[int, tuple[Endpoint, Redactor]] = {}  # by the endpoint's identity
        self._endpoints: dict[str, Endpoint | Problem] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}
        # Rate limits are per key and per model: one pacer each (pacing.py). Off: sends as fast as the limits allow.
        self.pacing = True
        self.pacing_margin = DEFAULT_MARGIN
        # Send each model's first call alone and the rest after its answer (pacing.Pacer's probe): no opening
        # burst of 429s, at the cost of one answer's wait per model; off by default (a slow model's run would
        # start one answer late).
        self.pacing_probe = False
        self._pacers: dict[tuple[str, str], Pacer] = {}
        # A cancel ends every wait (``_wait_or_stop``): set when ``should_stop`` says yes; read by one watcher.
        self._stopped: asyncio.Event | None = None
        self._stopped_loop: asyncio.AbstractEventLoop | None = None
        self._watcher: asyncio.Future | None = None
        self._waiting = 0
        # One task waits for each end (the cancel, a model's breaker) on behalf of every call waiting on it
        # (``_end_group``).
        self._end_waits: dict[asyncio.Event, tuple[set, asyncio.Future]] = {}
        self._breakers: dict[str, _Breaker] = {}
        self._quirks: dict[str, Quirks] = {}
        self._shown_urls: dict[str, str] = {}  # a URL as the call log shows it
        self._secret_parameters: dict[str, bool] = {}  # whether a custom model's parameters hold a secret
        if transport is None and not settings.proxy:
            transport = PooledTransport()
        # Chat calls go straight to our own transport; httpx's client serves the rest (and a proxy).
        self._direct = transport if isinstance(transport, PooledTransport) else None
        # With a proxy in the environment, httpx's own transport (which honours it) is used.
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(settings.timeout_s, connect=min(settings.connect_timeout_s, settings.timeout_s)),
            # Every concurrent call may hold a connection; keep them all alive between calls.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
            follow_redirects=False,  # a redirect must not carry a key to another host
        )

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for _, ringer in self._end_waits.values():
            if ringer.get_loop() is loop:
                ringer.cancel()
        self._end_waits.clear()
        await self._client.aclose()
        flush = getattr(self.cache, "flush", None)
        if flush is not None:  # a cache that keeps writes together stores the last of them now
            try:
                stored = flush()
                if inspect.isawaitable(stored):
                    await stored
            except Exception:
                logger.warning("response cache flush failed; those answers will be asked for again", exc_info=True)

    # ----------------------------------------------------------------------

    def limit_for(self, endpoint: Endpoint) -> int:
        limit = self.settings.concurrency_for(endpoint.model_id)
        if self.blueprint_concurrency is not None:
            limit = min(limit, self.blueprint_concurrency)
        return max(1, limit)

    def pacer(self, endpoint: Endpoint) -> Pacer:
        """The pacer for an endpoint's key and model (created on first use)."""
        key = (endpoint.limit_key, endpoint.model_name)
        pacer = self._pacers.get(key)
        if pacer is None:
            pacer = self._pacers[key] = Pacer(margin=self.pacing_margin, max_hold_s=self.settings.retry_after_max_s,
                                              probe=self.pacing_probe)
        return pacer

    def redactor(self, endpoint: Endpoint | None = None) -> Redactor:
        """The redactor for the settings' secrets (and an endpoint's own, which are among them when it was
        resolved from these settings)."""
        extra = endpoint.secrets if endpoint is not None else ()
        if not extra:
            return self._redactor
        held = self._endpoint_redactors.get(id(endpoint))
        if held is not None and held[0] is endpoint:  # asked several times a call: worked out once per endpoint
            return held[1]
        redactor = self._redactor if all(s in self._redactor.secrets or len(s) < 4 for s in extra) \
            else redactor_for((*self._secrets, *extra))
        self._endpoint_redactors[id(endpoint)] = (endpoint, redactor)
        return redactor

    async def _own_refusal(self, url: str, what: str) -> str | None:
        """Why a request to ``url`` may not leave (it would reach evalsite itself: own.py), or None."""
        own = self.settings.own_addresses
        return None if own is None else await own.refusal_async(url, what)

    def endpoint(self, model_id: str) -> Endpoint | Problem:
        if model_id not in self._endpoints:
            self._endpoints[model_id] = resolve_endpoint(model_id, self.settings, self.custom_models)
        return self._endpoints[model_id]

    async def complete(self, request: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        model_id = parse_for_api_call(request.model_id).original_model_id
        if model_id not in self.custom_models and provider_of(model_id) == FIXTURES_PREFIX:
            if request.tools:
                return _no_native_tools("fixtures", started)
            return self._from_fixtures(request, model_id, started)
        endpoint = self.endpoint(model_id)
        if isinstance(endpoint, Problem):
            return ChatResult(error=endpoint.message, retryable=False, attempts=0, latency_ms=_ms(started))
        if request.tools and not endpoint.native_tools:
            return _no_native_tools(endpoint.label, started)

        key = None
        # A tool loop's calls are not cached: the cache key holds each message's role and text only.
        if self.cache is not None and request.use_cache and not request.tools:
            key = endpoint.answer_key(request.messages, temperature=request.temperature,
                                      max_tokens=request.max_tokens, trial=request.trial, repeat=request.repeat)
            if not self.fresh and not request.refresh:
                hit = await self._cache_get(key)
                # An answer stored before a secret was configured (or by an older version) is redacted too.
                text = self.redactor(endpoint).text(hit["text"]) if hit is not None else None
                if hit is not None and _cacheable(request, text):
                    usage = Usage(hit.get("input_tokens"), hit.get("output_tokens"))
                    # A cache hit spent nothing now; its usage says what the answer took.
                    result = ChatResult(text=text, usage=usage, latency_ms=_ms(started), attempts=0,
                                        cached=True, cost_usd=0.0, finish_reason=hit.get("finish_reason"))
                    self._log_call(request, endpoint, result, None)
                    return result

        refusal = await self._own_refusal(endpoint.url, endpoint.label)
        if refusal is not None:  # evalsite's own address: never sent (own.py)
            return ChatResult(error=refusal, retryable=False, attempts=0, latency_ms=_ms(started))
        outcome, attempts = await self._send_with_retries(endpoint, request)
        redactor = self.redactor(endpoint)
        if not outcome.ok:
            result = ChatResult(error=redactor.message(outcome.reason),
                                retryable=outcome.retryable, attempts=attempts, latency_ms=_ms(started),
                                # A call never sent used nothing: its usage is none, not unknown.
                                usage=outcome.usage if attempts else Usage(0, 0),
                                cost_usd=_failed_cost(endpoint, outcome, attempts))
            self._log_call(request, endpoint, result, outcome)
            return result
        cost = None if endpoint.custom is not None else cost_usd(endpoint.model_id, outcome.usage)
        # An endpoint that echoes a secret (a custom model repeating its header, a proxy quoting the key)
        # never gets it into an answer: not into the result, the cache, a judge's prompt or the call log.
        outcome.text = redactor.text(outcome.text)
        if key is not None and _cacheable(request, outcome.text):
            await self._cache_set(key, {
                "text": outcome.text, "input_tokens": outcome.usage.input_tokens,
                "output_tokens": outcome.usage.output_tokens, "finish_reason": outcome.finish_reason,
                "model_id": endpoint.model_id,
            })
        result = ChatResult(text=outcome.text, usage=outcome.usage, latency_ms=outcome.latency_ms,
                            attempts=attempts, cost_usd=cost, finish_reason=outcome.finish_reason,
                            tool_calls=outcome.tool_calls)
        self._log_call(request, endpoint, result, outcome)
        return result

    def _shown_url(self, url: str, redactor: Redactor) -> str:
        shown = self._shown_urls.get(url)
        if shown is None:
            shown = self._shown_urls[url] = redactor.message(call_log.bare_url(url))
        return shown

    def _parameters_hold_secret(self, endpoint: Endpoint | None, redactor: Redactor) -> bool:
        if endpoint is None or endpoint.custom is None or not endpoint.custom.parameters:
            return False
        held = self._secret_parameters.get(endpoint.model_id)
        if held is None:
            held = self._secret_parameters[endpoint.model_id] = redactor.found(
                json.dumps(endpoint.custom.parameters, ensure_ascii=False, default=str))
        return held

    def _log_call(self, request: ChatRequest, endpoint: Endpoint | None, result: ChatResult,
                  outcome: _Outcome | None, *, source: str = "") -> None:
        """Describe this call for the item's call log (when one is being kept): no headers, no keys."""
        if not call_log.recording_now():
            return
        redactor = self.redactor(endpoint)
        sent = outcome.sent if outcome is not None and outcome.sent is not None else {
            "messages": list(request.messages), "temperature": request.temperature, "max_tokens": request.max_tokens}
        # What was sent, as the bytes that left (no second encoding) or, from the cache, as it would have been.
        raw = outcome.sent_bytes if outcome is not None and outcome.sent_bytes is not None else None
        # The messages are authored text and answers already redacted, so a quick look for a value as is
        # suffices there; a custom model's parameters (blueprint text sent as is) are read for encodings too.
        if raw is None or len(raw) > call_log.MAX_BODY_CHARS or (redactor.active and (
                redactor.in_bytes(raw) or self._parameters_hold_secret(endpoint, redactor))):
            sent = redactor.scrub(sent)
            text = json.dumps(sent, ensure_ascii=False, default=str)
            if len(text) > call_log.MAX_BODY_CHARS:  # kept as shortened text, not as JSON
                sent = call_log.clip(text)
            raw = None
        call_log.record({
            **({call_log.REQUEST_JSON: raw.decode("utf-8")} if raw is not None else {}),
            "purpose": request.purpose, "label": request.label,
            "model": endpoint.model_id if endpoint is not None else request.model_id,
            "url": self._shown_url(outcome.url, redactor) if outcome is not None and outcome.url else "",
            "source": source or ("cache" if result.cached else "provider"),
            "request": sent,
            "attempts": (outcome.attempts or []) if outcome is not None else [],
            "status": outcome.status if outcome is not None else None,
            "answer": (_kept_body(outcome.body, redactor, outcome.status)
                       if outcome is not None and outcome.body is not None else call_log.clip(result.text)),
            "error": result.error, "latency_ms": result.latency_ms, "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens, "cost_usd": result.cost_usd, "cached": result.cached,
            "finish_reason": result.finish_reason,
        })

    async def embed(self, model_id: str, texts: list[str]) -> list[list[float]] | str:
        """Embeddings of ``texts`` (for similarity to an ideal), or the reason there are none.

        Shares the model's concurrency limit and the response cache (one entry per
        text, so an ideal is embedded once however many responses it is compared with);
        retries 429s, 5xx and timeouts like a chat call. Never raises for expected failures.
        """
        endpoint = self.endpoint(parse_for_api_call(model_id).original_model_id)
        if isinstance(endpoint, Problem):
            return endpoint.message
        prepared = embeddings_request(endpoint, texts)
        if isinstance(prepared, str):
            return prepared
        keys = [cache_key({"embedding": endpoint.cache_identity()}, [{"role": "text", "content": t}],
                          temperature=None, max_tokens=None) for t in texts] if self.cache is not None else []
        found: dict[int, list[float]] = {}
        if keys and not self.fresh:
            for index, key in enumerate(keys):
                hit = await self._cache_get(key)
                if hit is not None:
                    found[index] = json.loads(hit["text"])
        missing = [i for i in range(len(texts)) if i not in found]
        if missing:
            url, body = embeddings_request(endpoint, [texts[i] for i in missing])
            refusal = await self._own_refusal(url, f"{endpoint.label}'s embeddings request")
            if refusal is not None:
                return refusal
            vectors = await self._post_json_with_retries(endpoint, url, body)
            if isinstance(vectors, str):
                return self.redactor(endpoint).message(vectors)
            vectors = read_embeddings(endpoint, vectors, len(missing))
            if isinstance(vectors, str):
                return self.redactor(endpoint).message(vectors)
            for index, vector in zip(missing, vectors):
                found[index] = vector
                if keys:
                    await self._cache_set(keys[index], {"text": json.dumps(vector), "model_id": endpoint.model_id})
        return [found[i] for i in range(len(texts))]

    async def _post_json_with_retries(self, endpoint: Endpoint, url: str, body: dict) -> Any:
        """POST a JSON body and return the decoded answer, or the reason it failed."""
        semaphore = self._limits.get(endpoint.limit_key)
        if semaphore is None:
            semaphore = self._limits[endpoint.limit_key] = asyncio.Semaphore(self.limit_for(endpoint))
        headers = {"content-type": "application/json", **endpoint.headers}
        for attempt in range(1, self.settings.max_attempts + 1):
            ticket = None
            try:
                async with semaphore:
                    if self.budget is not None:
                        ticket = await self.budget.admit(endpoint.model_id, [{"content": json.dumps(body)}], 0,
                                                         purpose="embedding")
                        if ticket is None:
                            return f"{endpoint.label}: embeddings not sent: {NOT_SENT_CANCELLED}"
                    try:
                        answer = await self._client.post(url, json=body, headers=headers)
                    finally:
                        if ticket is not None:
                            await self.budget.settle(ticket, None, billed=True)
            except httpx.HTTPError as exc:
                reason, retryable = f"{endpoint.label}: {type(exc).__name__} calling the embeddings API", True
            else:
                if answer.status_code == 200:
                    try:
                        return answer.json()
                    except ValueError:
                        reason, retryable = f"{endpoint.label}: the embeddings answer was not JSON", True
                else:
                    reason = f"{endpoint.label} answered {answer.status_code} to the embeddings request: " \
                             f"{_excerpt(answer.text, 200)}"
                    retryable = answer.status_code in (408, 429) or answer.status_code >= 500
            if not retryable or attempt == self.settings.max_attempts:
                return reason
            ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2 ** (attempt - 1))
            if await self._wait_or_stop(asyncio.sleep(ceiling / 2 + random.uniform(0, ceiling / 2))):
                return f"{endpoint.label}: embeddings not sent: {NOT_SENT_CANCELLED}"
        return "no attempt was made"  # max_attempts is at least 1; kept for the type checker

    # ----------------------------------------------------------------------

    def _from_fixtures(self, request: ChatRequest, model_id: str, started: float) -> ChatResult:
        if self.fixtures is None:
            return ChatResult(
                error=f"model '{model_id}' answers from the blueprint's fixtures, and none were given: add a "
                      f"`fixtures` mapping to the blueprint's header or import a <name>.fixtures.yml beside it",
                attempts=0, latency_ms=_ms(started))
        text, problem = self.fixtures.answer(request.prompt_id, model_id, turn=request.turn, trial=request.trial)
        if problem is None and not text.strip():
            problem = f"the fixture for prompt '{request.prompt_id}' and model '{model_id}' is empty"
        result = (ChatResult(error=problem, attempts=0, latency_ms=_ms(started)) if problem is not None
                  else ChatResult(text=self._redactor.text(text.strip()), latency_ms=_ms(started), cost_usd=0.0))
        self._log_call(request, None, result, None, source="fixture")
        return result

    async def _send_with_retries(self, endpoint: Endpoint, request: ChatRequest) -> tuple[_Outcome, int]:
        settings = self.settings
        breaker = self._breakers.setdefault(endpoint.model_id, _Breaker())
        semaphore = self._limits.get(endpoint.limit_key)
        if semaphore is None:
            semaphore = self._limits[endpoint.limit_key] = asyncio.Semaphore(self.limit_for(endpoint))
        attempts = adaptations = 0
        tried: list[dict] = []  # each attempt, for the call log
        redactor = self.redactor(endpoint)

        def opened() -> tuple[_Outcome, int]:
            return _Outcome(reason=breaker.open_reason, retryable=breaker.open_retryable), attempts

        def cancelled() -> tuple[_Outcome, int]:
            first = attempts == 0 and request.purpose == "candidate" and request.turn == 0
            return _Outcome(reason=NOT_STARTED_CANCELLED if first else NOT_SENT_CANCELLED, retryable=False), attempts

        while True:
            if breaker.open_reason:
                return opened()
            tokens = 0
            pacer = self.pacer(endpoint) if self.pacing else None
            unpaced = pacer is not None and pacer.idle()  # nothing known of the model's pace yet
            if pacer is not None:
                # The model's pace (pacing.py), waited out before taking a slot: a model held by its 429s never
                # keeps the provider's other models waiting. A cancel ends the wait at once.
                tokens = _estimated_tokens(endpoint, request) if pacer.token_rate is not None else 0
                if pacer.idle():
                    await pacer.wait(tokens)  # nothing to wait for: no task, no watcher
                elif await self._wait_or_stop(pacer.wait(tokens), breaker=breaker):
                    return opened() if breaker.open_reason else cancelled()
                if breaker.open_reason:
                    return opened()
            if not semaphore.locked():
                await semaphore.acquire()  # a free slot is taken at once
            elif await self._wait_or_stop(semaphore.acquire(), breaker=breaker):
                return opened() if breaker.open_reason else cancelled()
            try:
                # The breaker may have opened while this call waited for a slot.
                if breaker.open_reason:
                    return opened()
                if pacer is not None and (pacer.held() > 0 or (unpaced and not pacer.idle())):
                    # While this call waited for the slot, a 429 held the model, or the first answers stated its
                    # limit: it is paced (without the slot) like the calls after it, not sent in the opening burst.
                    continue
                # After a cancel no request leaves: not a first call, not another turn, not a judge, not a retry.
                if self.should_stop is not None and await self._stop_now():
                    return cancelled()
                ticket = None
                if self.budget is not None:
                    ticket = await self.budget.admit(
                        endpoint.model_id, request.messages,
                        request.max_tokens if request.max_tokens is not None else endpoint.default_max_tokens,
                        purpose=request.purpose,
                        about=f"prompt '{request.prompt_id}', trial {request.trial + 1}, turn {request.turn + 1}")
                    if ticket is None:  # over the budget (or a replay's missing answer): not sent, as after a cancel
                        return cancelled()
                attempts += 1
                outcome = None
                try:
                    outcome = await self._send_once(endpoint, request, tokens)
                finally:
                    if ticket is not None:
                        # An error answer (4xx, 5xx) is not billed; no answer, or one without usage, may be.
                        refused = outcome is not None and outcome.status is not None \
                            and not 200 <= outcome.status < 300
                        await self.budget.settle(ticket, None if outcome is None or endpoint.custom is not None
                                                 else cost_usd(endpoint.model_id, outcome.usage),
                                                 billed=not refused)
            finally:
                waited_for = semaphore.locked()  # full: calls may be waiting for this slot
                semaphore.release()
            outcome.attempts = tried
            if outcome.ok:
                breaker.failures = breaker.rate_limited = breaker.refusals = 0
                tried.append(_attempt(outcome, None, NO_SECRETS))  # an answer: no reason or body to redact
                if waited_for:
                    await _let_waiting_calls_go()
                return outcome, attempts
            # A refusal or a failure is counted (it may open the model's breaker) before a waiting call is sent.
            if outcome.rate_limited:
                self._count_refusal(endpoint, breaker, outcome)
            if outcome.adapt is not None and adaptations < 2:
                self._quirks[endpoint.model_id] = outcome.adapt
                adaptations += 1
                attempts -= 1  # the model told us how to ask; that is not a failed attempt
                tried.append(_attempt(outcome, None, redactor, keep_body=True,
                                      note="asked again the way the model accepts"))
                continue
            if outcome.retryable and attempts < settings.max_attempts and not breaker.open_reason:
                delay = self._delay(outcome, attempts)
                if delay is not None:
                    tried.append(_attempt(outcome, delay, redactor, keep_body=True))
                    await self._notify_wait(endpoint, outcome.short or outcome.reason, attempts + 1,
                                            settings.max_attempts, delay)
                    if await self._wait_or_stop(asyncio.sleep(delay), breaker=breaker):
                        if breaker.open_reason:  # opened by the model's other calls meanwhile: this one ends now
                            tried.append(_attempt(outcome, None, redactor))
                            shut, _ = opened()
                            shut.attempts, shut.status = tried, outcome.status
                            return shut, attempts
                        return cancelled()
                    continue
                outcome.reason = (f"{outcome.reason} (the provider asked to wait {outcome.retry_after:.0f} s, "
                                  f"longer than the {settings.retry_after_max_s:.0f} s we wait; try again later)")
            elif outcome.retryable and settings.max_attempts > 1 and attempts >= settings.max_attempts:
                outcome.reason = f"{outcome.reason} (gave up after {attempts} attempts)"
            self._count_failure(endpoint, breaker, outcome)
            tried.append(_attempt(outcome, None, redactor))
            return outcome, attempts

    def _count_refusal(self, endpoint: Endpoint, breaker: _Breaker, outcome: _Outcome) -> None:
        """A 429 answer. The 429s that arrive together (a burst over the limit, answered at one moment) are one
        round; a round starts with a 429 after the wait the last one asked for (its retry-after, else 1 s). After
        ``breaker_threshold`` rounds with no answer between, the model is one that only answers 429 (no quota:
        OpenAI's ``insufficient_quota`` is a 429): its breaker opens with the provider's words."""
        now = time.monotonic()
        if now < breaker.round_until:
            return
        asked = outcome.retry_after
        breaker.round_until = now + (asked if asked is not None and asked <= self.settings.retry_after_max_s
                                     else 1.0)
        breaker.refusals += 1
        if breaker.refusals >= self.settings.breaker_threshold:
            self._open_for_429(endpoint, breaker, breaker.refusals, outcome)

    @staticmethod
    def _open_for_429(endpoint: Endpoint, breaker: _Breaker, count: int, outcome: _Outcome) -> None:
        if breaker.open_reason:
            return
        breaker.open(
            f"Circuit breaker for model '{endpoint.model_id}' is open: it answered only 429 (rate-limited) "
            f"{count} times in a row with no answer between, so its remaining calls were not sent (check the "
            f"account's quota and limits); last error: {outcome.reason}", True)

    def _count_failure(self, endpoint: Endpoint, breaker: _Breaker, outcome: _Outcome) -> None:
        """A call failed: after ``breaker_threshold`` failed calls in a row the model's breaker opens.

        Calls refused as rate-limited (429) are counted apart: a 429 storm that calls get through (with waits)
        is not a broken model, but ``breaker_threshold`` calls in a row that each ended on a 429, with no answer
        between, are a model that only answers 429 (as are that many rounds of 429s: ``_count_refusal``). Its
        breaker opens with the provider's own words, and its remaining calls fail at once instead of holding
        their items until the item budget."""
        threshold = self.settings.breaker_threshold
        if outcome.rate_limited:
            breaker.rate_limited += 1
            if breaker.rate_limited >= threshold:
                self._open_for_429(endpoint, breaker, breaker.rate_limited, outcome)
            return
        breaker.failures += 1
        if breaker.failures >= threshold and not breaker.open_reason:
            breaker.open(
                f"Circuit breaker for model '{endpoint.model_id}' is open: {breaker.failures} calls in a "
                f"row failed, so its remaining calls were not sent; last error: {outcome.reason}", outcome.retryable)

    # -- waiting, and a cancel ending any wait --------------------------------------------------------------

    STOP_POLL_S = 0.25  # while calls wait, the run's cancel flag is read this often (should_stop)

    async def _stop_now(self) -> bool:
        """Ask ``should_stop``; a yes ends every wait under way (``_wait_or_stop``)."""
        if await self.should_stop():
            self._stop_event().set()
            return True
        return False

    def _stop_event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._stopped is None or self._stopped_loop is not loop:  # a router reused on another event loop
            self._stopped, self._stopped_loop, self._watcher = asyncio.Event(), loop, None
        return self._stopped

    async def _wait_or_stop(self, awaitable: Awaitable[Any], *, breaker: _Breaker | None = None) -> bool:
        """Await ``awaitable`` unless the run is cancelled, or ``breaker`` opens, first: True when one of them
        came first (``awaitable`` is then cancelled where it waits: a semaphore's ``acquire`` gives back a slot
        it was handed just then, a sleep ends).

        Every wait of a call goes through here: its pace, a provider slot, a retry's back-off. While any call
        waits, one watcher reads ``should_stop`` every ``STOP_POLL_S``, so a cancel ends them all within that,
        however long they were told to wait; a model's breaker opening ends its calls' waits at once. The wait
        runs in the call's own task: an end cancels that task (and takes the cancel back), where a task of its
        own per wait, and a future to wake on, were a tenth of a judged run's worker CPU."""
        ends: list[asyncio.Event] = []
        if self.should_stop is not None:
            ends.append(self._stop_event())
        if breaker is not None:
            ends.append(breaker.event())
        if not ends:
            await awaitable
            return False
        if any(end.is_set() for end in ends):
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never started: nothing to undo
            return True
        watching = self.should_stop is not None
        if watching:
            self._waiting += 1
            if self._watcher is None or self._watcher.done():
                self._watcher = asyncio.ensure_future(self._watch(ends[0]))
        stop = _Interrupt(asyncio.current_task())
        groups = [self._end_group(end) for end in ends]
        for group in groups:
            group.add(stop)
        try:
            await awaitable
        except asyncio.CancelledError:
            # Ours (an end rang) unless the task was also cancelled from elsewhere (its item's budget, a shutdown):
            # then the cancel goes on up.
            if not stop.rang or stop.task.uncancel() > 0:
                raise
            return True
        finally:
            if watching:
                self._waiting -= 1
            for group in groups:
                group.discard(stop)
        return False

    def _end_group(self, end: asyncio.Event) -> set:
        """The calls waiting on ``end`` (their interrupts), rung by one task per end and loop when it is set: a task
        per waiting call and end, and ``asyncio.wait`` over them, were 5-10% of a judged run's worker CPU."""
        loop = asyncio.get_running_loop()
        held = self._end_waits.get(end)
        if held is None or held[1].get_loop() is not loop or (held[1].done() and not end.is_set()):
            if len(self._end_waits) > 256:  # ends of earlier loops (a router reused): let them go
                for old in [e for e, (_, r) in self._end_waits.items() if r.get_loop() is not loop or r.done()]:
                    self._end_waits.pop(old)
            group: set = set()

            async def ring() -> None:
                await end.wait()
                for stop in list(group):
                    stop()

            held = self._end_waits[end] = (group, loop.create_task(ring()))
        return held[0]

    async def _watch(self, stopped: asyncio.Event) -> None:
        """Read the cancel flag while calls wait; set ``stopped`` when the run was cancelled."""
        try:
            while self._waiting > 0 and not stopped.is_set():
                if await self.should_stop():
                    stopped.set()
                    return
                await asyncio.sleep(self.STOP_POLL_S)
        except Exception:  # a flag that cannot be read ends no wait; the calls ask again before they send
            logger.warning("reading the cancel flag failed while calls waited", exc_info=True)

    def _delay(self, outcome: _Outcome, attempts: int) -> float | None:
        """Seconds before the next attempt; None when the provider asks for longer than we wait."""
        settings = self.settings
        if outcome.retry_after is not None:
            if outcome.retry_after > settings.retry_after_max_s:
                return None
            # A little jitter on top, so calls told the same time do not return together.
            return outcome.retry_after + random.uniform(0, min(1.0, 0.1 * outcome.retry_after))
        ceiling = min(settings.backoff_max_s, settings.backoff_base_s * 2 ** (attempts - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _notify_wait(self, endpoint: Endpoint, reason: str, attempt: int, max_attempts: int,
                           delay: float) -> None:
        if self.on_wait is None:
            return
        reason = self.redactor(endpoint).message(reason)
        result = self.on_wait(endpoint.model_id, reason, attempt, max_attempts, delay)
        if inspect.isawaitable(result):
            await result

    async def _send_once(self, endpoint: Endpoint, request: ChatRequest, tokens: int = 0) -> _Outcome:
        label = endpoint.label
        quirks = self._quirks.get(endpoint.model_id, Quirks())
        url, headers, body = build_request(endpoint, request.messages, temperature=request.temperature,
                                           max_tokens=request.max_tokens, quirks=quirks, tools=request.tools)
        headers["content-type"] = "application/json"
        content = jsonfast.dumps(body)
        timeout = self.settings.timeout_s
        started = time.perf_counter()
        self.calls_sent += 1
        try:
            async with asyncio.timeout(timeout):
                if self._direct is not None:
                    # The timeout around this bounds the reading (a second timer per call would only repeat it).
                    response = await self._direct.post(
                        url, headers, content, timeout_s=None,
                        connect_timeout_s=min(self.settings.connect_timeout_s, timeout))
                else:
                    response = await self._client.post(url, content=content, headers=headers)
        except (TimeoutError, httpx.TimeoutException):
            if self.pacing:
                self.pacer(endpoint).observe(None, None)  # no answer: the calls waiting for the first go on
            return _Outcome(reason=f"no answer from {label} within {_seconds(timeout)} s (timeout)",
                            short=f"timeout from {label}", retryable=True, latency_ms=_ms(started), url=url,
                            sent=body)
        except httpx.TransportError as exc:
            if self.pacing:
                self.pacer(endpoint).observe(None, None)
            detail = str(exc) or type(exc).__name__
            return _Outcome(reason=f"connection to {label} failed: {detail}", short=f"connection error to {label}",
                            retryable=True, latency_ms=_ms(started), url=url, sent=body)
        outcome = self._read_answer(endpoint, response, quirks, _ms(started), tools_sent=bool(request.tools))
        outcome.status, outcome.url, outcome.sent, outcome.sent_bytes = response.status_code, url, body, content
        if self.pacing:
            raw = response._raw_headers if isinstance(response, Answer) else response.headers.raw
            self.pacer(endpoint).observe(read_rate_limits(raw), response.status_code, last_tokens=tokens,
                                         retry_after=outcome.retry_after if outcome.rate_limited else None)
        if call_log.recording_now():
            outcome.body = response.content.decode("utf-8", "replace")
        return outcome

    def _read_answer(self, endpoint: Endpoint, response: httpx.Response | Answer, quirks: Quirks,
                     latency: float, tools_sent: bool = False) -> _Outcome:
        label = endpoint.label
        status = response.status_code
        try:
            data = jsonfast.loads(response.content) if response.content else None
            json_ok = True
        except ValueError:
            data, json_ok = None, False
        if 200 <= status < 300:
            if not json_ok or data is None:
                return _Outcome(reason=f"{label} answered with malformed JSON (HTTP {status})",
                                short=f"malformed answer from {label}", retryable=True, latency_ms=latency)
            try:
                parsed = parse_answer(endpoint.api_format, data, tools_sent=tools_sent)
            except BadAnswer as exc:
                return _Outcome(reason=f"unexpected answer from {label}: {exc.reason}",
                                short=f"unexpected answer from {label}", retryable=exc.retryable, latency_ms=latency)
            if not parsed.text and not parsed.tool_calls:
                why = f" (finish reason: {parsed.finish_reason})" if parsed.finish_reason else ""
                return _Outcome(reason=f"{label} returned an empty answer{why}", usage=parsed.usage,
                                latency_ms=latency)
            return _Outcome(text=parsed.text, usage=parsed.usage, finish_reason=parsed.finish_reason,
                            latency_ms=latency, tool_calls=parsed.tool_calls)
        return self._http_error(endpoint, response, data, quirks, latency)

    def _http_error(self, endpoint: Endpoint, response: httpx.Response | Answer, data: Any, quirks: Quirks,
                    latency: float) -> _Outcome:
        label = endpoint.label
        status = response.status_code
        message = error_message(data) or _excerpt(self.redactor(endpoint).message(response.text))
        reason = f"{status} from {label}" + (f": {message}" if message else "")
        short = f"{status} from {label}"
        if status == 429:
            # Which 429 it is, in the provider's words: "insufficient_quota: ..." is no quota, not a pace.
            code = _error_code(data)
            if code and message and code not in message:
                reason = f"{status} from {label}: {code}: {message}"
            # Gemini says when in its body (google.rpc.RetryInfo), not in a header.
            retry_after = _retry_after(response.headers)
            if retry_after is None:
                retry_after = retry_delay_from_body(data)
            return _Outcome(reason=reason, short=short, retryable=True, rate_limited=True,
                            retry_after=retry_after, latency_ms=latency)
        if status == 408 or status >= 500:
            return _Outcome(reason=reason, short=short, retryable=True, retry_after=_retry_after(response.headers),
                            latency_ms=latency)
        if status == 400 and endpoint.custom is None and endpoint.api_format in ("openai_chat", "anthropic"):
            adapt = _adaptation(quirks, error_param(data), message or "", endpoint.api_format)
            if adapt is not None:
                return _Outcome(reason=reason, short=short, adapt=adapt, latency_ms=latency)
        if status in (401, 403):
            if endpoint.custom is not None:
                reason += " (check the custom model's headers)"
            else:
                reason += f" (check {key_variable_names(endpoint.provider)})"
        elif status == 404 and endpoint.custom is None:
            reason += f" (is '{endpoint.model_name}' a model {endpoint.provider} still serves?)"
        return _Outcome(reason=reason, short=short, retryable=False, latency_ms=latency)

    async def _cache_get(self, key: str) -> dict | None:
        try:
            value = self.cache.get(key)
            if inspect.isawaitable(value):
                value = await value
        except Exception:  # a broken cache costs a call, never an item
            logger.warning("response cache read failed; calling the model instead", exc_info=True)
            return None
        if not isinstance(value, dict) or not isinstance(value.get("text"), str) or not value["text"].strip():
            return None
        return value

    async def _cache_set(self, key: str, value: dict) -> None:
        try:
            result = self.cache.set(key, value)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.warning("response cache write failed; the answer is kept but not cached", exc_info=True)


def _no_native_tools(label: str, started: float) -> ChatResult:
    """A request with tools for a model evalsite sends none to: nothing is sent (toolUse.mode auto traces)."""
    return ChatResult(error=f"{label} takes no native tool definitions from evalsite (only the built-in OpenAI-, "
                            "Anthropic- and Gemini-format providers do); use `toolUse.mode: auto` to fall back to "
                            "trace-only TOOL_CALL lines", retryable=False, attempts=0, latency_ms=_ms(started),
                      no_native_tools=True)


def _attempt(outcome: _Outcome, waited_s: float | None, secrets: Redactor | Iterable[str], *,
             keep_body: bool = False, note: str = "") -> dict:
    """One attempt for the call log; the body of an answer that was not the last one is kept (shortened)."""
    redactor = secrets if isinstance(secrets, Redactor) else redactor_for(secrets)
    entry = {"status": outcome.status, "latency_ms": outcome.latency_ms,
             "reason": redactor.message(outcome.reason) if outcome.reason else None}
    if waited_s is not None:
        entry["wait_s"] = round(waited_s, 2)
    if note:
        entry["note"] = note
    if keep_body and outcome.body is not None:  # redacted, then cut: a cut could halve a secret past finding
        entry["body"] = call_log.clip(redactor.message(outcome.body), 4_000)
    return entry


def _kept_body(body: str, secrets: Redactor | Iterable[str], status: int | None) -> str:
    """An answer's raw body as kept: shortened past the limit, any secret's value (or encoding) replaced; an
    error's body (a 401 may echo part of the key) also loses every word that shares 8 characters with one."""
    redactor = secrets if isinstance(secrets, Redactor) else redactor_for(secrets)
    # Redacted before it is cut: a secret cut in two at the limit (24 of its 25 characters) is no longer found.
    if status is None or not 200 <= status < 300:
        return call_log.clip(redactor.message(body), 4_000)
    return call_log.clip(redactor.text(body))


def _adaptation(quirks: Quirks, param: str | None, message: str, api_format: str = "openai_chat"
                ) -> Quirks | None:
    """What a 400 says to change before asking again: OpenAI's reasoning models want
    ``max_completion_tokens`` and only the default temperature; Anthropic's newest models answer that
    ``temperature`` is deprecated for them."""
    lowered = message.lower()
    if api_format == "openai_chat" and quirks.max_tokens_key == "max_tokens" and (
        param == "max_tokens" or ("max_tokens" in lowered and "max_completion_tokens" in lowered)
    ):
        return replace(quirks, max_tokens_key="max_completion_tokens")
    if not quirks.omit_temperature and (param == "temperature" or (
        "temperature" in lowered and any(w in lowered for w in ("unsupported", "not support", "only the default",
                                                                 "deprecated"))
    )):
        return replace(quirks, omit_temperature=True)
    return None


def _error_code(data: Any) -> str | None:
    """A 429's kind, as OpenAI (``error.code``: ``insufficient_quota``, ``rate_limit_exceeded``) or Anthropic
    (``error.type``: ``rate_limit_error``) name it; a short word only."""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and 0 < len(value) <= 60 and value.replace("_", "").isalnum():
            return value
    return None


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    return parse_retry_after(headers.get("retry-after"), headers.get("retry-after-ms"))


def _estimated_tokens(endpoint: Endpoint, request: ChatRequest) -> int:
    """What a call counts against a token limit (pacing.estimated_tokens), from the messages, before the body
    is built: their text plus a little for the JSON around each, and the answer's token limit."""
    size = sum(len(m.get("content") or "") + 16 for m in request.messages)
    limit = request.max_tokens if request.max_tokens is not None else endpoint.default_max_tokens
    return estimated_tokens(size, limit)


def _excerpt(text: str, limit: int = 300) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit] + "..."


async def _let_waiting_calls_go() -> None:
    """Two turns of the event loop, taken by a call that has read its answer and given back a slot other calls
    wait for. Answers arrive together (the calls went out together); each one's slot wakes a waiting call, but
    that call runs only after everything ahead of it in the loop's queue: the rest of this answer's work (its
    checks, its judges' prompts, its scrub, its storing) and that of every answer read with it. The first turn
    queues this call behind the woken one; the second, behind the calls woken by the answers read with it. So
    the waiting calls leave before any of those answers is worked on, and no slot stands empty meanwhile
    (tests/bench/bench_cli_run.py: its calls 8.54 -> 8.33 s at the median, against 8.2 s over raw HTTP; the
    worker, busy with its CPU, is unchanged: docs/architecture.md)."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _seconds(value: float) -> str:
    return f"{value:g}"
