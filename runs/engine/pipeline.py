# Over 500 lines: the pipeline and what it needs alongside (the checks' lane, call keys, the spending cap), read together.
"""The run pipeline: every work item generated and then judged at once, concurrently.

Pure Python: it takes work items (prompt x model variant x trial), the
function that reaches models, the judge plan and a callback that stores each
finished item. Limits per provider live in the router; here only the number
of items in flight is bounded, so memory stays flat however large the run.

An item whose code hits a bug is recorded as failed with the error (and the
traceback goes to the log) rather than stopping its neighbours: one broken
item must not cost a reviewer the rest of the run. So is an item that takes
longer than its wall-clock budget (``PipelineOptions.item_budget_s``): it is
stopped and failed with the reason, never left to hold its worker.

The budget is an asyncio timeout, which can only stop an item at an ``await``.
Synchronous point checks (regexes, `$js`, structured checks, `$call`) would hold
the event loop past it, so they run off the loop (:class:`_SyncLane`: one at a
time, on a worker thread) where the timeout can leave them; and an item whose
clock passed its budget anyway (sync code elsewhere) is failed when it returns,
never stored as done.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Iterable

from blueprints.spec.schema import Prompt

from . import calls as call_log
from .assess import ResponseAssessment, assess_response
from .config import DEFAULT_CONFIG, EngineConfig
from .generate import ModelVariant, generate
from .judge import JudgePlan
from .points import evaluate_point as real_evaluate_point
from .providers.cache import cache_key
from .providers.prices import DEFAULT_MAX_TOKENS, estimate_usd
from .types import NOT_SENT_CANCELLED, NOT_STARTED_CANCELLED, ChatRequest, ChatResult, CompleteFn, \
    GeneratedResponse

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkItem:
    key: Any  # the caller's handle (a database id)
    prompt: Prompt
    variant: ModelVariant
    trial: int = 0
    existing: GeneratedResponse | None = None  # a kept generation to judge again (retry of failed judge calls)
    fresh: bool = False  # asked for afresh: no answer of the model or of a judge comes from the cache


@dataclass(frozen=True, slots=True)
class ItemResult:
    item: WorkItem
    response: GeneratedResponse
    assessment: ResponseAssessment | None
    internal_error: str | None = None  # a bug in our code, recorded instead of a score
    # The run was cancelled while the item was under way: it was not scored and goes back to
    # pending; ``response`` is kept when its generation was complete (a resume judges it).
    stopped: bool = False
    calls: tuple[dict, ...] = ()  # every chat call the item made, as sent and answered (calls.py)


@dataclass
class PipelineOptions:
    max_in_flight: int = 64
    max_tokens: int | None = None
    use_cache: bool = True
    embed: Any = None
    external_services: Any = None
    evaluate_point: Callable[..., Any] = field(default=real_evaluate_point)
    files: dict | None = None  # the suite's companion files, for script graders
    config: EngineConfig | None = None  # what the operator configured, for evaluate_point; None: its defaults
    item_budget_s: float | None = None  # wall-clock seconds per item (generation and judging); None: no limit
    # The cache key of a request (``router_call_key``): each call's entry in the item's call log gets it
    # (``cacheKey``, with its ``trial`` and ``turn``), which is what a replay reads. None: not kept.
    call_key: Callable[[ChatRequest], str | None] | None = None
    # A replay: the calls the original run recorded for an item (its call-log entries), so each call is
    # answered by the original's own answer, tokens, cost, latency and cache flag (``_replayed``), never by the
    # router or the shared cache; ``missing_answer`` is told of a call it cannot answer so (the run stops).
    recorded_calls: Callable[[WorkItem], list[dict]] | None = None
    missing_answer: Callable[[str], None] | None = None
    # More work while this runs: once fewer than half of ``keep_in_flight`` items are unfinished, called with
    # how many would make ``keep_in_flight`` again; returns them (none: nothing more, and no further calls).
    # So a worker's calls never drain to nothing at the end of one batch before the next begins.
    more_items: Callable[[int], Awaitable[list[WorkItem]]] | None = None
    keep_in_flight: int = 0


def budget_exceeded_reason(budget_s: float) -> str:
    return (f"took longer than {budget_s:g} s (the per-item budget, EVALSITE_ITEM_BUDGET_S); stopped and not "
            f"evaluated. A model or judge that never answers, or a very slow check, is the usual cause; "
            f"raise the budget or use \"retry failed\" to try again.")


def failed_result(item: WorkItem, error: str) -> ItemResult:
    response = GeneratedResponse(prompt_id=item.prompt.id, model_variant_id=item.variant.id_for(item.prompt),
                                 conversation=(), text=None, final_text=None, error=error, trial=item.trial)
    return ItemResult(item, response, None, internal_error=error)


def _scoring_sends_requests(prompt: Prompt, options: PipelineOptions) -> bool:
    """Judges, `$call` and similarity to the ideal send requests; other point functions score here and now."""
    return (any(p.fn is None or p.fn == "call" for p in prompt.all_points())
            or bool(prompt.ideal_response and options.embed is not None))


def _refreshing(complete: CompleteFn) -> CompleteFn:
    async def fresh(request):
        return await complete(replace(request, refresh=True))

    return fresh


class _SyncLane:
    """Synchronous point checks, one at a time as on the event loop, but on a worker thread.

    The loop stays free for other items' calls, and an item's budget (an asyncio timeout) can leave a
    check that is still running: the item is failed on time, and the next check starts on another
    thread at once rather than queue behind the abandoned one (which ends on its own: every check has
    its own limit, a regex's match time, a script's timeout). ``ABANDONED_THREADS`` such checks may
    still be running before the next waits for one of them to end.
    """

    ABANDONED_THREADS = 8

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1 + self.ABANDONED_THREADS, thread_name_prefix="evalsite-points")
        self._turn = asyncio.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        context = contextvars.copy_context()  # the item's call log (calls.recording) follows the check
        async with self._turn:
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, functools.partial(context.run, fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)  # never wait for an abandoned check


def _off_the_loop(evaluate: Callable[..., Any], lane: _SyncLane) -> Callable[..., Any]:
    """``evaluate`` (a sync point evaluator) made to run on ``lane`` when called from the event loop.

    An async evaluator is left as it is. Called from a worker thread already (assess runs script
    graders with ``asyncio.to_thread``), it runs there.
    """
    if inspect.iscoroutinefunction(evaluate):
        return evaluate
    builtin = evaluate is real_evaluate_point  # our own checks, whose substring functions are known quick

    def evaluate_point(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # on a worker thread already
            return evaluate(*args, **kwargs)
        if builtin and _quick(args):  # a substring check on a bounded text: less than the trip to the lane
            return evaluate(*args, **kwargs)
        return lane.run(evaluate, *args, **kwargs)

    return evaluate_point


# Point functions that only look for plain substrings: time linear in the text and their few arguments, no
# regex, no parsing, no call out. On a text of at most QUICK_TEXT_CHARS they run on the loop itself (a few
# microseconds; the trip to the lane's thread cost 25 us a point in bench_cli_run). Anything else, or a longer
# text, goes to the lane.
QUICK_FUNCTIONS = frozenset({"contains", "icontains", "contains_any_of", "icontains_any_of", "contains_all_of",
                             "icontains_all_of", "contains_at_least_n_of", "icontains_at_least_n_of"})
QUICK_TEXT_CHARS = 32_000
QUICK_ARG_CHARS = 4_000


def _quick(args: tuple) -> bool:
    if len(args) < 3 or args[0] not in QUICK_FUNCTIONS or not isinstance(args[2], str):
        return False
    if len(args[2]) > QUICK_TEXT_CHARS:
        return False
    given = args[1]
    words = given[-1] if isinstance(given, list) and given and isinstance(given[-1], list) else given
    words = words if isinstance(words, list) else [words]
    return sum(len(w) if isinstance(w, str) else 16 for w in words) <= QUICK_ARG_CHARS


def _cancelled(error: str | None) -> bool:
    return bool(error) and (NOT_SENT_CANCELLED in error or NOT_STARTED_CANCELLED in error)


async def process_item(item: WorkItem, *, complete: CompleteFn, judges: JudgePlan,
                       options: PipelineOptions, should_stop: Callable[[], Awaitable[bool]] | None = None
                       ) -> ItemResult:
    if item.fresh:
        complete = _refreshing(complete)
    response = item.existing or await generate(item.prompt, item.variant, complete, max_tokens=options.max_tokens,
                                               use_cache=options.use_cache, trial=item.trial,
                                               limits=(options.config or DEFAULT_CONFIG).limits)
    if _cancelled(response.error):  # a later turn was refused: the generation is incomplete
        return ItemResult(item, response, None, stopped=True)
    if (should_stop is not None and not response.error and _scoring_sends_requests(item.prompt, options)
            and await should_stop()):
        return ItemResult(item, response, None, stopped=True)  # generated, not judged: a resume judges it
    assessment = await assess_response(
        item.prompt, response, judges=judges, complete=complete, evaluate_point=options.evaluate_point,
        embed=options.embed, external_services=options.external_services, files=options.files,
        config=options.config,
    )
    if any(_cancelled(v.error) for pa in assessment.point_assessments for v in pa.verdicts):
        return ItemResult(item, response, None, stopped=True)  # judges refused by the cancel: not a judge failure
    return ItemResult(item, response, assessment)


async def run_items(
    items: Iterable[WorkItem],
    *,
    complete: CompleteFn,
    judges: JudgePlan,
    on_result: Callable[[ItemResult], Awaitable[None]],
    should_stop: Callable[[], Awaitable[bool]] | None = None,
    options: PipelineOptions | None = None,
) -> tuple[int, int]:
    """Process items; returns (finished, skipped because of a stop request)."""
    options = options or PipelineOptions()
    gate = asyncio.Semaphore(max(1, options.max_in_flight))
    finished = skipped = 0
    redactor = (options.config or DEFAULT_CONFIG).redactor
    budget_s = options.item_budget_s
    lane = _SyncLane()
    options = replace(options, evaluate_point=_off_the_loop(options.evaluate_point, lane))

    def over_budget(item: WorkItem) -> ItemResult:
        log.warning("%s x %s: over its budget of %s s", item.prompt.id, item.variant.variant_id, budget_s)
        return failed_result(item, budget_exceeded_reason(budget_s))

    async def one(item: WorkItem) -> None:
        nonlocal finished, skipped
        async with gate:
            if should_stop is not None and await should_stop():
                skipped += 1
                return
            budget = asyncio.timeout(budget_s)
            started = time.monotonic()
            with call_log.recording() as made:
                keyed = _keyed(complete, made, options, item)
                try:
                    async with budget:
                        result = await process_item(item, complete=keyed, judges=judges, options=options,
                                                    should_stop=should_stop)
                    # The timeout fires only at an await: time spent in sync code that held the loop
                    # (an evaluator that does not hand it back) is caught here, and the item is failed.
                    if budget_s is not None and not result.stopped and time.monotonic() - started > budget_s:
                        result = over_budget(item)
                except TimeoutError as exc:
                    if budget.expired():
                        result = over_budget(item)
                    else:  # a TimeoutError of our own code: a bug like any other
                        log.exception("internal error on %s x %s", item.prompt.id, item.variant.variant_id)
                        result = failed_result(item, f"internal error: TimeoutError: {exc}")
                except Exception as exc:  # a bug: keep it visible on the item, keep the run going
                    log.exception("internal error on %s x %s", item.prompt.id, item.variant.variant_id)
                    result = failed_result(item, f"internal error: {type(exc).__name__}: {exc}")
            # Text that came from outside the router (a `$call` service's answer, an error's words)
            # may echo a secret: nothing leaves the pipeline unscrubbed. The call log is added after:
            # the router redacts each call as it records it (walking it again cost ~4 ms an item).
            result = _scrubbed(result, redactor)
            if made:  # the calls made so far are kept, an item stopped by its budget included
                result = replace(result, calls=tuple(made))
            if NOT_STARTED_CANCELLED in (result.response.error or ""):
                skipped += 1  # cancelled while it waited for its first call: it never started
                return
            if result.stopped:  # cancelled under way: stored as pending, with what it generated
                skipped += 1
                await on_result(result)
                return
            await on_result(result)
            finished += 1

    try:
        if options.more_items is None:
            await asyncio.gather(*(one(item) for item in items))
        else:
            await _topped_up(list(items), one, options.more_items, min(options.keep_in_flight, options.max_in_flight))
    finally:
        lane.close()
    return finished, skipped


def _scrubbed(result: ItemResult, redactor) -> ItemResult:
    """``result`` with every text of its response, assessment and error redacted. Its ``item`` is the run's own
    input (the blueprint's prompt, a kept generation scrubbed when it was stored), stored from elsewhere: not walked
    (half the nodes of a result)."""
    changes = {}
    for name in ("response", "assessment", "internal_error"):
        before = getattr(result, name)
        after = redactor.scrub(before)
        if after is not before:
            changes[name] = after
    return replace(result, **changes) if changes else result


async def _topped_up(items: list[WorkItem], one: Callable[[WorkItem], Awaitable[None]],
                     more_items: Callable[[int], Awaitable[list[WorkItem]]], keep: int) -> None:
    """Work ``items``, asking ``more_items`` for more whenever fewer than half of ``keep`` are unfinished, until
    it has none. Each finished item is noted by a callback (no wait over every running item per finish)."""
    target = max(1, keep)
    running: set[asyncio.Future] = set()
    wake = asyncio.Event()
    failures: list[BaseException] = []

    def finished(task: asyncio.Future) -> None:
        running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())  # ``one`` keeps an item's error on the item: this is ours
        if failures or len(running) < target / 2:
            wake.set()

    def start(batch: Iterable[WorkItem]) -> None:
        for item in batch:
            task = asyncio.ensure_future(one(item))
            running.add(task)
            task.add_done_callback(finished)

    start(items)
    try:
        while True:
            if failures:
                raise failures[0]
            if more_items is not None and len(running) < target / 2:
                extra = await more_items(target - len(running))
                if not extra:
                    more_items = None
                start(extra)
                continue
            if not running:
                return
            wake.clear()
            await wake.wait()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


# --- each call's cache key, and a replay's recorded calls --------------------------------------------


_noted_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("evalsite_noted_key", default=None)


class KeyNotingCache:
    """A response cache (any, sync or async) that notes the key of each ``get`` and ``set`` for the call in
    progress, so the pipeline reads the key the router just used instead of working it out again (20 us a
    call). A call that never reached the cache (no cache, ``noCache``, a failure in a fresh run) gets its key
    from :func:`router_call_key`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def get(self, key: str):
        _noted_key.set(key)
        return self.inner.get(key)

    def set(self, key: str, value: dict):
        _noted_key.set(key)
        return self.inner.set(key, value)

    def __getattr__(self, name: str) -> Any:  # flush, close, len: the inner cache's
        return getattr(self.inner, name)


def router_call_key(router: Any, request: ChatRequest) -> str | None:
    """The key the router's cache keeps ``request``'s answer under (``Router.complete``'s recipe); a
    ``fixtures:`` model's canned answer gets a key of its own (``fixture:...``: it is never cached); None
    for a model the router cannot reach."""
    from blueprints.spec.model_ids import parse_for_api_call, provider_of

    from .providers.endpoints import FIXTURES_PREFIX, Problem

    model_id = parse_for_api_call(request.model_id).original_model_id
    if model_id not in router.custom_models and provider_of(model_id) == FIXTURES_PREFIX:
        return "fixture:" + cache_key({"fixtures": model_id, "prompt": request.prompt_id, "turn": request.turn},
                                      request.messages, temperature=request.temperature,
                                      max_tokens=request.max_tokens, trial=request.trial)
    endpoint = router.endpoint(model_id)
    if isinstance(endpoint, Problem):
        return None
    return endpoint.answer_key(request.messages, temperature=request.temperature, max_tokens=request.max_tokens,
                               trial=request.trial, repeat=request.repeat)


def _keyed(complete: CompleteFn, made: list[dict], options: PipelineOptions, item: WorkItem) -> CompleteFn:
    """``complete`` that writes each call's cache key (and trial, turn) into its call-log entry with the answer
    the run used (``calls.keep_answer``); in a replay, :func:`_replayed` instead."""
    if options.recorded_calls is not None:
        return _replayed(options, item)
    if options.call_key is None:
        return complete

    async def keyed(request: ChatRequest) -> ChatResult:
        _noted_key.set(None)
        result = await complete(request)
        # The router logs a call just before it returns, with no await between: the last entry is this call's
        # unless the call was never logged (a model it cannot reach), when the last one is already marked.
        entry = made[-1] if made and "purpose" in made[-1] and "cacheKey" not in made[-1] else None
        if entry is not None:
            key = _noted_key.get() if request.use_cache else None  # the key the router's cache was asked with
            entry.update(cacheKey=key if key is not None else options.call_key(request), trial=request.trial,
                         turn=request.turn, **({"tools": True} if request.tools else {}))
            call_log.keep_answer(entry, result)
        return result

    return keyed


def _replayed(options: PipelineOptions, item: WorkItem) -> CompleteFn:
    """A replay's ``complete``: each call is answered by the call the original run made for it (its call log:
    same item, so the same trial; same cache key, purpose and turn), with that call's text, tokens, cost,
    latency and cache flag, and logged as it was. Nothing reaches the router or the shared cache. A request
    the original did not make, or whose answer it did not keep, is not sent: ``options.missing_answer`` is
    told (the run stops, "replay") and the call is refused as after a cancel."""
    recorded: list[dict] | None = None

    async def replayed(request: ChatRequest) -> ChatResult:
        nonlocal recorded
        if recorded is None:
            recorded = list(options.recorded_calls(item))
        key = options.call_key(request) if options.call_key is not None else None
        original = call_log.take_recorded(recorded, key, request)
        if original is None and call_log.traced_instead(recorded, key, request):
            # The original's router refused the tools (nothing sent): the loop falls back to trace-only again.
            return ChatResult(error="the original run sent this model no tools", no_native_tools=True, attempts=0)
        result = call_log.replayed_result(original) if original is not None else None
        if result is None:
            if options.missing_answer is not None:
                why = call_log.answer_problem(original) if original is not None else \
                    "the original run made no such call (were the provider settings or the code changed?)"
                options.missing_answer(f"{request.purpose} call to '{request.model_id}' for prompt "
                                       f"'{request.prompt_id}', trial {request.trial + 1}, turn {request.turn + 1}"
                                       + (f" ({request.label})" if request.label else "") + f": {why}")
            first = request.purpose == "candidate" and request.turn == 0
            return ChatResult(error=NOT_STARTED_CANCELLED if first else NOT_SENT_CANCELLED, attempts=0)
        call_log.record({**original, "replayed": True})
        return result

    return replayed


# --- a spending cap ------------------------------------------------------------------------------------


def estimate_call_usd(model_id: str, messages, max_tokens: int | None) -> float | None:
    """What one call may cost at most, for the budget: the request's tokens (4 characters a token, rounded up)
    and a whole answer of ``max_tokens`` (1500 when none is sent) at the model's price; None: no price."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return estimate_usd(model_id, -(-chars // 4), max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS)


@dataclass
class Ticket:
    """One admitted call's reservation."""

    model_id: str
    estimate_usd: float


class BudgetGuard:
    """A run's spending cap in one worker: a call is admitted only while spent + in flight + its estimate
    stays within the cap (the router asks before each attempt leaves, retries included).

    A call that does not fit waits while other calls of this worker are in flight (their answers usually cost
    far less than their estimates); when nothing is in flight and it still does not fit, the guard is
    exhausted: it and every later call are refused, and the run stops. ``external_usd`` is what the run
    spent before, and what other workers spent meanwhile (the caller refreshes it); ``spent_here_usd`` what
    this worker's calls cost. A call of unknown price is refused (a budgeted run needs a price for every
    model it calls; start refuses one without). An attempt that got no answer (a timeout, a dropped
    connection), or an answer without usage, may have been billed: it counts its estimate.
    """

    def __init__(self, budget_usd: float, external_usd: float = 0.0, *,
                 estimate: Callable[[str, Any, int | None], float | None] = estimate_call_usd):
        self.budget_usd = float(budget_usd)
        self.external_usd = float(external_usd)
        self.spent_here_usd = 0.0
        self.in_flight_usd = 0.0
        self.calls_in_flight = 0
        self.most_in_flight_usd = 0.0  # the highest reservation seen: the overshoot can be at most this
        self.exhausted = False
        self.reason = ""
        self._estimate = estimate
        self._changed: asyncio.Condition | None = None

    @property
    def spent_usd(self) -> float:
        return self.external_usd + self.spent_here_usd

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def stop(self, reason: str) -> None:
        if not self.exhausted:
            self.exhausted, self.reason = True, reason

    async def admit(self, model_id: str, messages, max_tokens: int | None, *, purpose: str = "candidate",
                    about: str = "") -> Ticket | None:
        estimate = self._estimate(model_id, messages, max_tokens)
        if estimate is None:
            self.stop(f"no price for '{model_id}' in prices.json, so its calls cannot be counted against the "
                      f"budget of ${self.budget_usd:g}; add its price, or run without a budget")
            return None
        changed = self._condition()
        async with changed:
            while True:
                if self.exhausted:
                    return None
                if self.spent_usd + self.in_flight_usd + estimate <= self.budget_usd:
                    self.in_flight_usd += estimate
                    self.calls_in_flight += 1
                    self.most_in_flight_usd = max(self.most_in_flight_usd, self.in_flight_usd)
                    return Ticket(model_id, estimate)
                if self.calls_in_flight == 0:
                    self.stop(f"stopped at its budget of ${self.budget_usd:g}: ${self.spent_usd:.4f} spent, and the "
                              f"next call ({purpose}, '{model_id}', up to ${estimate:.4f}) would pass it")
                    return None
                await changed.wait()  # calls in flight may cost less than they were counted for

    async def settle(self, ticket: Ticket, cost_usd: float | None, *, billed: bool = True) -> None:
        """The attempt is over: its reservation goes and what it cost is spent; a cost not known (no answer, an
        answer without usage) counts its estimate when it may have been ``billed``, nothing otherwise (an
        error answer)."""
        changed = self._condition()
        async with changed:
            self.in_flight_usd = max(0.0, self.in_flight_usd - ticket.estimate_usd)
            self.calls_in_flight -= 1
            self.spent_here_usd += cost_usd if cost_usd is not None else (ticket.estimate_usd if billed else 0.0)
            changed.notify_all()


class CacheOnlyGate:
    """A replay's gate: nothing leaves. Its chat calls are answered from the original's call log
    (``_replayed``), which reports here a call it cannot answer (:meth:`refuse`); anything else that would reach
    a provider (an embedding not in the cache) is refused at the router. Either way the call is named in
    ``missing`` and the run stops."""

    def __init__(self) -> None:
        self.exhausted = False
        self.reason = ""
        self.missing: list[str] = []

    def refuse(self, what: str) -> None:
        self.missing.append(what)
        self.exhausted = True
        self.reason = ("replay stopped: an answer of the original run is missing, and a replay sends nothing "
                       "to a provider: " + "; ".join(self.missing[:5]))

    async def admit(self, model_id: str, messages, max_tokens: int | None, *, purpose: str = "candidate",
                    about: str = "") -> Ticket | None:
        self.refuse(f"{purpose} call to '{model_id}'" + (f" for {about}" if about else "")
                    + ": not in the response cache")
        return None

    async def settle(self, ticket: Ticket, cost_usd: float | None, *, billed: bool = True) -> None:
        return None
