# Over 500 lines: a run's whole second phase (claims, execution, recovery, cancel, resume, retry, re-run) shares its locking.
"""Doing a run's work: enqueue, claim, execute, recover, cancel, resume, retry (the second phase of a run's life).

Work is split into chunks of ``Response`` rows. A chunk claims its rows with a
conditional UPDATE (pending, or running under a claim that is dead or whose
lease ran out), so a duplicate task delivery does nothing and a restarted
worker never redoes a finished item. What an item produces is stored by
runs/records.py.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from blueprints.spec.schema import Blueprint as SpecBlueprint
from runs.engine import calls as call_log
from runs.engine.pipeline import BudgetGuard, CacheOnlyGate, ItemResult, KeyNotingCache, PipelineOptions, WorkItem, \
    router_call_key, run_items
from runs.engine.providers import Router, fixtures_from_blueprint
from runs.engine.types import GeneratedResponse, Turn, Usage

from evalsite.engine import engine_config

from .cache import response_cache
from .models import FINISHED, PointAssessment, Response, ResponseStatus, Run, RunStatus
from .records import Stored, compute_aggregates, finish_run, judge_counts, maybe_finish, plan_from_json, \
    save_results, supersede
from .spec import custom_models, parsed_blueprint

log = logging.getLogger(__name__)

HEARTBEAT_S = 10
# Claims per item: an item whose worker stopped answering this many times (its lease lapsed, or
# the process died) is failed with the reason instead of being handed out again, so one item that
# hangs every worker that takes it cannot keep a run going forever. "Retry failed" starts it afresh.
MAX_CLAIMS = 3


OPEN = (ResponseStatus.PENDING, ResponseStatus.RUNNING)
RERUN_WINDOW_S = 60.0


def claim_lease() -> timedelta:
    return timedelta(seconds=settings.EVALSITE_CLAIM_LEASE_S)


# --- re-runs of a finished run ----------------------------------------------------------
# Re-running one response of a finished (done, cancelled, failed) run starts a "re-run stretch": the run
# is running while its re-runs are in flight, and only they run; when the last is stored it finishes
# again with the status it had (``Run.options["reruns"]["returnsTo"]``). Its other unfinished items (a
# cancelled run's) are never handed out meanwhile. ``Run.options["reruns"]["at"]`` keeps the times of
# the run's re-runs in the last minute, for EVALSITE_RERUNS_PER_MINUTE.


def rerun_stretch(run: Run) -> str | None:
    """The status a run in a re-run stretch returns to once its re-runs are stored; None outside one."""
    return (run.options.get("reruns") or {}).get("returnsTo") if isinstance(run.options, dict) else None


def _reruns_open(run_id: int):
    """A run's re-run items not yet stored."""
    return Response.objects.filter(run_id=run_id, fresh_requested=True, status__in=OPEN)


def _options_without_stretch(run_id: int) -> dict:
    options = dict(Run.objects.filter(pk=run_id).values_list("options", flat=True).first() or {})
    reruns = dict(options.get("reruns") or {})
    reruns.pop("returnsTo", None)
    return {**options, "reruns": reruns} if reruns else {k: v for k, v in options.items() if k != "reruns"}


def settle(run_id: int) -> bool:
    """Finish the run if its work is over (``records.maybe_finish``); in a re-run stretch, once its
    re-runs are stored, with the status it had before them. Returns whether it is finished."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.is_finished:
            return True
        back = rerun_stretch(run)
        if back is not None:
            if _reruns_open(run_id).exists():
                return False
            Run.objects.filter(pk=run_id).update(options=_options_without_stretch(run_id))
            return finish_run(run_id, back)
    return maybe_finish(run_id)


def enqueue_pending(run_id: int) -> int:
    """Hand every unclaimed item of a run to the workers, in chunks (in a re-run stretch, only the
    re-runs). Returns the number of tasks."""
    from django_q.tasks import async_task

    pending = Response.objects.filter(run_id=run_id, status=ResponseStatus.PENDING)
    run = Run.objects.filter(pk=run_id).only("options").first()
    if run is not None and rerun_stretch(run) is not None:
        pending = pending.filter(fresh_requested=True)
    ids = list(pending.order_by("prompt_index", "variant_id", "trial").values_list("pk", flat=True))
    # Items per task (EVALSITE_CHUNK_SIZE): large enough that a chunk's slow tail is a small part of it, small
    # enough that several workers share a run and a chunk ends well inside the task timeout.
    size = settings.EVALSITE_CHUNK_SIZE
    chunks = [ids[i:i + size] for i in range(0, len(ids), size)]
    for chunk in chunks:
        async_task("runs.tasks.run_chunk", run_id, chunk, task_name=f"run {run_id}: {len(chunk)} items",
                   group=f"run-{run_id}")
    return len(chunks)


def enqueue_making(run_id: int) -> None:
    """Hand the making of a large run's items to the workers (runs.start.make_items, then ``enqueue_pending``)."""
    from django_q.tasks import async_task

    async_task("runs.tasks.make_items", run_id, task_name=f"run {run_id}: its items", group=f"run-{run_id}")


# --- executing --------------------------------------------------------------------------


def worker_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _claim_is_dead(claimed_by: str) -> bool:
    """A claim by a process of this machine that no longer exists is dead at once; others wait for the lease."""
    try:
        host, pid, _ = claimed_by.split(":", 2)
        pid = int(pid)
    except ValueError:
        return True
    if host != socket.gethostname():
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _claimable(now) -> Q:
    return Q(status=ResponseStatus.PENDING) | Q(status=ResponseStatus.RUNNING, claimed_at__lt=now - claim_lease())


def claims_exhausted_reason() -> str:
    lease = claim_lease().total_seconds()
    return (f"its worker stopped answering {MAX_CLAIMS} times (claimed {MAX_CLAIMS} times, each claim lapsed after "
            f"{lease:g} s without a result, or its worker process died); not handed out again, because an item "
            f"that hangs every worker would keep the run going forever. Look for a check that never ends (a "
            f"catastrophic regex) or a model that never answers; \"retry failed\" runs it again.")


def _fail_exhausted(run_id: int, available: Q, now) -> int:
    """Fail the items among ``available`` that were claimed MAX_CLAIMS times already; returns how many."""
    reason = claims_exhausted_reason()
    with transaction.atomic():
        failed = Response.objects.filter(available & Q(attempts__gte=MAX_CLAIMS)).update(
            status=ResponseStatus.FAILED, error=reason, not_evaluated_reason=reason, score=None, judged_score=None,
            finished_at=now, claimed_by="", claimed_at=None)
        if failed:
            Run.objects.filter(pk=run_id).update(items_done=F("items_done") + failed,
                                                 items_failed=F("items_failed") + failed)
    if failed:
        log.warning("run %s: %s item(s) failed after %s claims", run_id, failed, MAX_CLAIMS)
    return failed


def claim(run_id: int, response_ids: list[int], token: str) -> list[int]:
    """Claim the given items that nobody holds; returns the ids now ours.

    An item already claimed MAX_CLAIMS times without a result is failed with the reason instead.
    """
    now = timezone.now()
    available = Q(pk__in=response_ids, run_id=run_id) & (
        _claimable(now) | _held_by_dead(Response.objects.filter(pk__in=response_ids, status=ResponseStatus.RUNNING)))
    _fail_exhausted(run_id, available, now)
    Response.objects.filter(available).update(
        status=ResponseStatus.RUNNING, claimed_by=token, claimed_at=now, attempts=F("attempts") + 1)
    return list(Response.objects.filter(pk__in=response_ids, claimed_by=token, status=ResponseStatus.RUNNING)
                .values_list("pk", flat=True))


def _held_by_dead(running) -> Q:
    """The rows among ``running`` (items running) whose claim is dead: its process of this machine is gone. The
    condition names the dead claims themselves, so an UPDATE on it never takes a row that another worker has
    claimed since it was read (a pk list would: two workers taking over the same items both took them)."""
    dead = [by for by in running.order_by().values_list("claimed_by", flat=True).distinct() if _claim_is_dead(by)]
    return Q(status=ResponseStatus.RUNNING, claimed_by__in=dead)


def _held_by_gone(running) -> Q:
    """The rows among ``running`` whose worker is gone: its claim is dead or its lease lapsed (what ``claim`` takes)."""
    return Q(status=ResponseStatus.RUNNING, claimed_at__lt=timezone.now() - claim_lease()) | _held_by_dead(running)


def _stale(running) -> Q:
    """The rows among ``running`` to hand back: never stamped, or held by a worker that is gone (resume and the
    minute's recovery; a condition, not a list of rows read before, so a row taken over meanwhile stays taken)."""
    return Q(claimed_at__isnull=True) | _held_by_gone(running)


def _abandoned(run_id: int, count: int) -> list[int]:
    """Up to ``count`` of the run's items held by a worker that is gone, in the run's order."""
    running = Response.objects.filter(run_id=run_id, status=ResponseStatus.RUNNING)
    return list(running.filter(_held_by_gone(running)).order_by("prompt_index", "variant_id", "trial")
                .values_list("pk", flat=True)[:max(0, count)])


def claim_next(run_id: int, token: str, count: int) -> list[int]:
    """Claim up to ``count`` more of the run's pending items nobody holds, in the run's order (a worker topping
    up its pipeline; the task those items were queued in finds them taken and does nothing). Once none is
    pending, the items of a worker that is gone (killed, or its lease lapsed) are taken over the same way, so
    they finish on the workers still running instead of waiting for the minute's recovery."""
    for _ in range(3):  # another worker may take the same items first: look again
        ids = list(Response.objects.filter(run_id=run_id, status=ResponseStatus.PENDING, claimed_by="")
                   .order_by("prompt_index", "variant_id", "trial").values_list("pk", flat=True)[:max(0, count)])
        if not ids:
            ids = _abandoned(run_id, count)
        if not ids:
            return []
        taken = claim(run_id, ids, token)
        if taken:
            return taken
    return []


def refill_window_s() -> float:
    """How long into a task a worker still takes more of the run's items: every item it takes must end (within
    its item budget) before the task's timeout hands the task out again."""
    return max(0.0, settings.Q_CLUSTER["timeout"] - settings.EVALSITE_LIMITS.item_budget_s - 60)


@dataclass
class Progress:
    """Hooks for a caller that shows progress (the CLI's bar)."""

    on_item: Callable[[Stored], None] | None = None  # each item stored: its pk and status
    on_wait: Callable[[str, str], None] | None = None


def execute_chunk(run_id: int, response_ids: list[int], *, progress: Progress | None = None,
                  top_up: bool = False, inline: bool = False) -> None:
    """Claim and process these items of a run, then finish the run if nothing is left.

    ``top_up`` (a worker's task): as these items finish, take more of the run's pending items, so the calls
    do not drain to nothing before the next task starts (``claim_next``; docs/architecture.md). ``inline``
    (``run_inline``): no task timeout bounds this process, so it tops up until the run has nothing pending."""
    run = Run.objects.select_related("revision", "blueprint").filter(pk=run_id).first()
    if run is None or run.is_finished:  # deleted, or finished, since the task was queued
        return
    rerunning = rerun_stretch(run) is not None
    if run.cancel_requested and not rerunning:
        settle(run_id)
        return
    if rerunning:  # only the re-runs run: a task for the run's other items (from before a cancel) does nothing
        response_ids = list(_reruns_open(run_id).filter(pk__in=response_ids).values_list("pk", flat=True))
        if not response_ids:
            settle(run_id)
            return
    Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(status=RunStatus.RUNNING,
                                                                  started_at=timezone.now())
    token = worker_token()
    claimed = claim(run_id, response_ids, token)
    if claimed:
        try:
            asyncio.run(_execute(run, claimed, token, progress or Progress(), rerunning=rerunning, top_up=top_up,
                                 inline=inline))
        finally:
            close_old_connections()
    worked_until = timezone.now()
    settle(run_id)
    # Cancelled while this worker was busy: the run ended at once, without waiting for it, so
    # what it stored since then is counted in the run's aggregates now.
    if claimed and Run.objects.filter(pk=run_id, status=RunStatus.CANCELLED, finished_at__lt=worked_until).exists():
        Run.objects.filter(pk=run_id).update(aggregates=compute_aggregates(run_id))


# What an item needs to be worked (a kept generation needs the rest: ``_stored_generation`` loads it).
_ITEM_FIELDS = ("pk", "prompt_index", "prompt_id", "variant_id", "variant_index", "trial", "text", "error",
                "fresh_requested")


def _item_rows(ids) -> list[Response]:
    """The rows of these items, with only what working them needs (a tenth of the time of whole rows), and
    whole rows for those with a kept generation to judge again."""
    chosen = Response.objects.filter(pk__in=ids)
    kept = Q(error="") & ~Q(text="") & Q(text__isnull=False)  # ``_work_items``: a generation to judge again
    return [*chosen.exclude(kept).only(*_ITEM_FIELDS), *chosen.filter(kept)]


def _work_items(run: Run, bp: SpecBlueprint, rows: list[Response]) -> list[WorkItem]:
    variants = run.variants(bp)
    items = []
    for row in rows:
        prompt = run.prompt(row.prompt_index, bp)
        variant = row.variant_in(variants, prompt) if prompt is not None and prompt.id == row.prompt_id else None
        if variant is None:
            raise RuntimeError(f"run {run.pk}: item {row.prompt_id} x {row.variant_id} no longer matches its revision")
        existing = _stored_generation(row) if row.text and not row.error else None
        items.append(WorkItem(key=row.pk, prompt=prompt, variant=variant, trial=row.trial, existing=existing,
                              fresh=row.fresh_requested))
    return items


def _stored_generation(row: Response) -> GeneratedResponse:
    """A generation kept from an earlier attempt (retry-failed re-judges it without generating again)."""
    return GeneratedResponse(
        prompt_id=row.prompt_id, model_variant_id=row.variant_id,
        conversation=tuple(Turn.from_dict(t) for t in row.conversation),
        tool_mode=_tool_mode(row.conversation),
        text=row.text, final_text=row.final_text, tool_calls=tuple(row.tool_calls), trial=row.trial,
        # What generation recorded stays: metric checks judged again read the same numbers.
        cached=row.cached, latency_ms=row.latency_ms, cost_usd=row.cost_usd,
        usage=Usage(row.input_tokens, row.output_tokens),
    )


def _tool_mode(conversation: list[dict]) -> str | None:
    """The tool mode a stored generation used (its generated turns say it), so a re-judge reads the same calls."""
    modes = [t.get("tools") for t in conversation if isinstance(t, dict) and t.get("tools")]
    if not modes:
        return None
    return "native" if modes[-1] == "native" else "trace-only"


def build_router(run: Run, bp: SpecBlueprint, *, on_wait=None, should_stop=None, budget=None) -> Router:
    fixtures, _ = fixtures_from_blueprint(bp.fixtures, run.revision.files)
    # A replay's chat calls never reach the router (the original's call log answers them, pipeline._replayed);
    # what else it needs (embeddings) comes from the cache, whatever the original asked.
    replay = is_replay(run)
    return Router(engine_config().providers, custom_models=custom_models(bp), fixtures=fixtures,
                  cache=KeyNotingCache(response_cache()),
                  blueprint_concurrency=bp.concurrency, on_wait=on_wait, should_stop=should_stop,
                  fresh=bool(run.options.get("fresh")) and not replay, budget=budget)


def is_replay(run: Run) -> bool:
    return bool((run.manifest or {}).get("replayOf")) if isinstance(run.manifest, dict) else False


def _gate_for(run: Run, rerunning: bool):
    """What every call of this worker passes before it leaves: a replay's (nothing leaves), the run's budget
    (a re-run of one response is not capped), or nothing."""
    if is_replay(run) and not rerunning:
        return CacheOnlyGate()
    if run.budget_usd is not None and not rerunning:
        spent = Run.objects.filter(pk=run.pk).values_list("spent_usd", flat=True).first() or 0.0
        return BudgetGuard(run.budget_usd, external_usd=spent)
    return None


def _recorded_calls(run: Run, rows: list[Response]) -> dict[tuple, list[dict]]:
    """A replay's claimed items: the calls the original run recorded for each (its call logs, answers
    included), by item, so trial i is answered by the original's trial i."""
    original = (run.manifest or {}).get("replayOf")
    wanted = {(r.prompt_index, r.variant_id, r.trial) for r in rows}
    out: dict[tuple, list[dict]] = {}
    for index, variant_id, trial, prompt_id, made, judged in Response.objects.filter(
            run_id=original, prompt_index__in={w[0] for w in wanted}).values_list(
            "prompt_index", "variant_id", "trial", "prompt_id", "candidate_calls", "judge_calls"):
        if (index, variant_id, trial) in wanted:
            out[(prompt_id, variant_id, trial)] = [c for c in (*call_log.unpack(made), *call_log.unpack(judged))
                                                   if c.get("cacheKey")]
    return out


def tops_up(run: Run, *, rerunning: bool, gate=None) -> bool:
    """Whether a worker of this run takes more of its pending items as its own finish: not in a re-run stretch
    (only the re-runs run) nor in a replay (only the items it was handed, answered from the original's calls)."""
    return not rerunning and not isinstance(gate, CacheOnlyGate) and not is_replay(run)


async def _execute(run: Run, claimed: list[int], token: str, progress: Progress, *, rerunning: bool = False,
                   top_up: bool = False, inline: bool = False) -> None:
    bp = await sync_to_async(parsed_blueprint)(run.revision)
    rows = await sync_to_async(_item_rows)(claimed)
    items = await sync_to_async(_work_items)(run, bp, rows)
    plan = plan_from_json(run.judges, bp)
    gate = await sync_to_async(_gate_for)(run, rerunning)
    stop = _StopCheck(run.pk, rerunning=rerunning, gate=gate)
    waits = _WaitBoard(run.pk, progress.on_wait)
    heartbeat = asyncio.create_task(_heartbeat(token))
    config = engine_config()
    options = PipelineOptions(max_in_flight=config.items_in_flight, external_services=bp.external_services,
                              files=dict(run.revision.files or {}), config=config,
                              item_budget_s=config.limits.item_budget_s)
    if isinstance(gate, CacheOnlyGate):
        recorded = await sync_to_async(_recorded_calls)(run, rows)
        options.recorded_calls = lambda item: recorded.get((item.prompt.id, item.variant.id_for(item.prompt),
                                                            item.trial), [])
        options.missing_answer = gate.refuse
    if top_up and tops_up(run, rerunning=rerunning, gate=gate):  # a re-run, a replay: only its items
        options.more_items = _more_items(run, bp, token, stop,
                                         deadline=math.inf if inline else time.monotonic() + refill_window_s())
        options.keep_in_flight = settings.EVALSITE_CHUNK_SIZE
    followup = isinstance(run.options, dict) and bool(run.options.get("followupOf")) and not rerunning
    saver = _Saver(run.pk, token, progress.on_item, after=_followup_look() if followup else None)
    saver.start(every_s=0.5)
    try:
        async with build_router(run, bp, on_wait=waits.on_wait, should_stop=stop.should_stop,
                                budget=gate) as router:
            options.call_key = lambda request: router_call_key(router, request)
            embedding_model = run.options.get("embeddingModel")
            if embedding_model:
                options.embed = lambda texts: router.embed(embedding_model, list(texts))
            await run_items(items, complete=router.complete, judges=plan, on_result=saver.add,
                            should_stop=stop.should_stop, options=options)
    finally:
        await saver.close()
        heartbeat.cancel()
        await sync_to_async(_release)(token)
        await waits.clear()
        await stop.settle_gate()
        await stop.close()
        await sync_to_async(connections.close_all)()


def _followup_look():
    from .followup_look import after_batch

    return after_batch


def _more_items(run: Run, bp: SpecBlueprint, token: str, stop: "_StopCheck", *, deadline: float):
    async def more(count: int) -> list[WorkItem]:
        if time.monotonic() > deadline or await stop.should_stop():
            return []
        claimed = await sync_to_async(claim_next)(run.pk, token, count)
        if not claimed:
            return []
        rows = await sync_to_async(_item_rows)(claimed)
        return await sync_to_async(_work_items)(run, bp, rows)

    return more


class _Saver:
    """Stores finished items in small batches: one transaction (and one counter update) for many items.

    A batch is written when it has ``size`` items or every half second, so progress
    still moves as work finishes while the database sees a fraction of the writes.
    """

    def __init__(self, run_id: int, token: str, on_item=None, size: int = 25, after=None):
        self.run_id, self.token, self.on_item, self.size = run_id, token, on_item, size
        # Called after each stored batch, on the thread that stored it: a follow-up run's look at its own results
        # (runs/followup.py), which stops the run once its anytime-valid interval decides.
        self.after = after
        self.pending: list[ItemResult] = []
        self._closing = asyncio.Event()
        self._timer: asyncio.Task | None = None

    def start(self, every_s: float) -> None:
        self._timer = asyncio.create_task(self._every(every_s))

    async def add(self, result: ItemResult) -> None:
        self.pending.append(result)
        if len(self.pending) >= self.size:
            await self.flush()

    async def flush(self) -> None:
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        rows = await sync_to_async(save_results)(self.run_id, self.token, batch)
        if self.on_item:
            for row in rows:
                self.on_item(row)
        if self.after is not None and rows:
            await sync_to_async(self.after)(self.run_id)

    async def close(self) -> None:
        """Store what is left. The timer is asked to stop, never cancelled: a cancel landing while its
        flush waited for the database thread dropped that batch, and the items went back to pending."""
        self._closing.set()
        if self._timer is not None:
            await asyncio.gather(self._timer, return_exceptions=True)
        await self.flush()

    async def _every(self, seconds: float) -> None:
        while not self._closing.is_set():
            try:
                await asyncio.wait_for(self._closing.wait(), seconds)
            except TimeoutError:
                pass
            await self.flush()


class _StopCheck:
    """Reads the run's cancel flag at most five times a second; every call waiting for a provider slot asks.

    Callers that ask while a read is under way wait for that read when the last answer is stale (read more
    than ``FRESH_S`` ago, as after the worker waited on slow calls without asking): when several slots free
    at once, none of them may send on a stale "go on". While calls keep asking, the last answer is at most
    one period old and they go on without waiting (waiting there, every call queued behind each read's
    thread hop: 2-3% of a run's wall time, tests/bench/bench_run.py).
    The re-runs of a finished run (``rerunning``) do not read the flag, which a cancelled run keeps
    set for its other items: they stop when the run is finished again (a cancel ends it at once).
    """

    FRESH_S = 0.25  # an answer read at most this long ago (one period and the read's own time) is used as is

    def __init__(self, run_id: int, *, rerunning: bool = False, gate=None):
        self.run_id = run_id
        self.rerunning = rerunning
        self.checked = 0.0
        self.stopped = False
        self._reading: asyncio.Future | None = None
        self._reading_began = 0.0
        self._answer_read_at = float("-inf")  # when the read behind ``stopped`` began
        # The run's budget (``BudgetGuard``) or a replay's ``CacheOnlyGate``: once it refuses a call the worker
        # stops, and the run is marked to stop (``stopped_reason``) as a cancel would. A budget's spending is
        # written to ``Run.spent_usd`` with each read, and what other workers spent is read back.
        self.gate = gate
        self._flushed = 0.0
        self._marked = False
        # Its own thread and connection: behind the database thread's saves, every call waiting
        # for a slot would wait for a batch to be written too.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stop-check")

    def _read(self) -> bool:
        # A run that was cancelled, or deleted, stops.
        if self.rerunning:
            return not Run.objects.filter(pk=self.run_id).exclude(status__in=FINISHED).exists()
        return not Run.objects.filter(pk=self.run_id, cancel_requested=False).exists()

    def _ledger(self, delta: float) -> float | None:
        """Add this worker's new spending to the run's; the run's total (every worker's) comes back."""
        with transaction.atomic():
            if delta:
                Run.objects.filter(pk=self.run_id).update(spent_usd=F("spent_usd") + delta)
            return Run.objects.filter(pk=self.run_id).values_list("spent_usd", flat=True).first()

    def _read_with_ledger(self, delta: float, flushed: float) -> tuple[bool, float | None, float]:
        total = self._ledger(delta)
        return self._read(), total, flushed

    def _mark(self, reason: str, detail: str) -> None:
        Run.objects.filter(pk=self.run_id).exclude(status__in=FINISHED).update(
            cancel_requested=True, stopped_reason=reason, stopped_detail=detail)

    def _take_delta(self) -> tuple[float, float]:
        spent = self.gate.spent_here_usd
        delta, self._flushed = spent - self._flushed, spent
        return delta, self._flushed

    async def _gate_stopped(self) -> bool:
        gate = self.gate
        if gate is None or not gate.exhausted:
            return False
        if not self._marked:
            self._marked = True
            await asyncio.get_running_loop().run_in_executor(
                self._thread, self._mark, "replay" if isinstance(gate, CacheOnlyGate) else "budget", gate.reason)
        return True

    async def settle_gate(self) -> None:
        """At the end of the worker's work: its last spending is written, and a refused call stops the run."""
        if isinstance(self.gate, BudgetGuard):
            delta, _ = self._take_delta()
            if delta:
                await asyncio.get_running_loop().run_in_executor(self._thread, self._ledger, delta)
        await self._gate_stopped()

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, connections.close_all)
        self._thread.shutdown(wait=False)

    async def should_stop(self) -> bool:
        if self.stopped:
            return True
        if await self._gate_stopped():
            self.stopped = True
            return True
        budget = self.gate if isinstance(self.gate, BudgetGuard) else None
        if self._reading is None and time.monotonic() - self.checked > 0.2:
            self.checked = self._reading_began = time.monotonic()
            if budget is None:
                self._reading = asyncio.get_running_loop().run_in_executor(self._thread, self._read)
            else:
                self._reading = asyncio.get_running_loop().run_in_executor(
                    self._thread, self._read_with_ledger, *self._take_delta())
        if self._reading is not None and (self._reading.done()
                                          or time.monotonic() - self._answer_read_at > self.FRESH_S):
            reading, began = self._reading, self._reading_began
            try:
                answer = await asyncio.shield(reading)
                if budget is not None:
                    answer, total, flushed = answer
                    if total is not None:  # what the run spent, less what this worker wrote of it
                        budget.external_usd = max(0.0, total - flushed)
                self.stopped = answer
                self._answer_read_at = max(self._answer_read_at, began)
            finally:
                if reading.done() and self._reading is reading:
                    self._reading = None
        return self.stopped


class _WaitBoard:
    """Keeps ``Run.waiting`` saying what is waiting and why, for the run page."""

    def __init__(self, run_id: int, echo=None):
        self.run_id = run_id
        self.echo = echo
        self.entries: dict[str, str] = {}

    async def on_wait(self, model_id: str, reason: str, attempt: int, max_attempts: int, delay_s: float) -> None:
        from runs.engine.providers import describe_wait

        message = describe_wait(reason, attempt, max_attempts, delay_s)
        self.entries[model_id] = message
        if self.echo:
            self.echo(model_id, message)
        entries = dict(self.entries)
        await sync_to_async(lambda: Run.objects.filter(pk=self.run_id).update(waiting=entries))()

    async def clear(self) -> None:
        if self.entries:
            await sync_to_async(lambda: Run.objects.filter(pk=self.run_id).update(waiting={}))()


async def _heartbeat(token: str) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        await sync_to_async(lambda: Response.objects.filter(claimed_by=token, status=ResponseStatus.RUNNING)
                            .update(claimed_at=timezone.now()))()


def _release(token: str) -> None:
    """Items this worker claimed but did not start (a cancel) go back to pending; that claim does not count."""
    Response.objects.filter(claimed_by=token, status=ResponseStatus.RUNNING).update(
        status=ResponseStatus.PENDING, claimed_by="", claimed_at=None, attempts=F("attempts") - 1)


# --- controls ---------------------------------------------------------------------------


def delete_run(run: Run) -> dict:
    """Delete a run with its responses, assessments and overrides, and its tasks still queued; returns what went.

    A run still going is cancelled first: its workers see it gone at their next
    stop check (within a second) and send nothing more; what they finish is dropped.
    Its queued tasks go with it (``purge_queued_tasks``), so later runs do not wait behind them. On SQLite, a
    delete of more than EVALSITE_VACUUM_AFTER_ROWS responses gives the space back to the disk afterwards
    (``reclaim_space``, a task); PostgreSQL's autovacuum does that itself.
    """
    run_id = run.pk
    with transaction.atomic():
        gone = {"responses": Response.objects.filter(run=run).count(),
                "overrides": PointAssessment.objects.filter(response__run=run, override__isnull=False).count(),
                "was_running": not run.is_finished}
        Run.objects.filter(pk=run.pk).exclude(status__in=FINISHED).update(cancel_requested=True)
        _delete_rows_of(run_id)
        run.delete()
    purge_queued_tasks(run_id)
    if connections["default"].vendor == "sqlite" and gone["responses"] > settings.EVALSITE_VACUUM_AFTER_ROWS:
        from django_q.tasks import async_task

        transaction.on_commit(lambda: async_task("runs.tasks.reclaim_space", task_name="reclaim space",
                                                 group="reclaim-space"))
    return gone


def _delete_rows_of(run_id: int) -> None:
    """A run's responses and what hangs on them, one DELETE a table, leaves first. Django's cascade would load
    every row as an object first (33 s for 200,000 responses, in the request, holding the write lock)."""
    from .models import Annotation, EarlierAttempt, PairJudgement, PointConfirmation, PointOverride

    using = "default"
    for queryset in (PointOverride.objects.filter(assessment__response__run_id=run_id),
                     PointConfirmation.objects.filter(assessment__response__run_id=run_id),
                     PointAssessment.objects.filter(response__run_id=run_id),
                     Annotation.objects.filter(response__run_id=run_id),
                     EarlierAttempt.objects.filter(run_id=run_id),
                     PairJudgement.objects.filter(left__run_id=run_id),  # a pair is of one run's responses
                     PairJudgement.objects.filter(right__run_id=run_id),
                     Response.objects.filter(run_id=run_id)):
        queryset._raw_delete(using)  # nothing else hangs on these rows and no signal listens (tests/runs)


def purge_queued_tasks(run_id: int, broker=None) -> int:
    """Delete the tasks of a run still waiting in the broker (its chunks, the making of its items, its re-runs:
    every task enqueued with ``group=f"run-{run_id}"``); returns how many. The ORM broker's rows (django-q's
    OrmQ) or Redis's list; a task a worker holds already finds its run gone and does nothing."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    group = f"run-{run_id}"

    def ours(payload) -> bool:
        try:
            task = SignedPackage.loads(payload)
        except Exception:  # signed by another key, or not a task: not ours to judge
            return False
        return isinstance(task, dict) and task.get("group") == group

    broker = broker or get_broker()
    try:
        from django_q.brokers.orm import ORM
        from django_q.models import OrmQ

        if isinstance(broker, ORM):
            queued = OrmQ.objects.using(settings.Q_CLUSTER.get("orm", "default")).filter(key=broker.list_key)
            ids = [pk for pk, payload in queued.values_list("pk", "payload").iterator(chunk_size=2000)
                   if ours(payload)]
            for start in range(0, len(ids), 900):  # SQLite's limit on a statement's parameters
                queued.filter(pk__in=ids[start:start + 900]).delete()
            return len(ids)
        connection = getattr(broker, "connection", None)
        if connection is not None and hasattr(connection, "lrange"):  # Redis
            removed = 0
            for payload in connection.lrange(broker.list_key, 0, -1):
                if ours(payload.decode() if isinstance(payload, bytes) else payload):
                    removed += connection.lrem(broker.list_key, 1, payload)
            return removed
    except Exception:  # a broker that cannot be read: the tasks find the run gone and do nothing
        log.warning("run %s: its queued tasks could not be removed", run_id, exc_info=True)
    return 0


def reclaim_space() -> None:
    """Give space freed by large deletes back to the disk: SQLite keeps freed pages in its file until VACUUM,
    which must run outside a transaction (and rewrites the file: a task, not a request). Other databases: nothing
    (PostgreSQL's autovacuum reuses the space)."""
    connection = connections["default"]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute("VACUUM")
        # In WAL mode the rewritten pages wait in the log; a checkpoint puts them in the file and truncates it.
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def cancel_run(run: Run) -> None:
    """No new item starts after this; finished items are kept and the run ends as cancelled.

    Re-runs in flight are cancelled too: the run ends at once, not with the status it had before them."""
    Run.objects.filter(pk=run.pk).exclude(status__in=FINISHED).update(cancel_requested=True)
    if (Run.objects.filter(pk=run.pk).values_list("options", flat=True).first() or {}).get("makingItems"):
        finish_run(run.pk, RunStatus.CANCELLED)  # its items were still being made: it stops making them
    maybe_finish(run.pk)
    if Run.objects.filter(pk=run.pk, status__in=FINISHED, options__reruns__has_key="returnsTo").exists():
        Run.objects.filter(pk=run.pk).update(options=_options_without_stretch(run.pk))


def resume_run(run: Run, budget_usd: float | None = None) -> int:
    """Hand back to the workers every item that is not finished (stale claims included).

    ``budget_usd``: the run's new cap (a run stopped at its budget resumes with a higher one); what it spent so
    far counts against it. A run that had no cap starts its ledger from its stored costs."""
    if budget_usd is not None:
        run.refresh_from_db(fields=["budget_usd", "spent_usd", "candidate_cost_usd", "judge_cost_usd"])
        spent = run.spent_usd if run.budget_usd is not None else max(
            run.spent_usd, (run.candidate_cost_usd or 0) + (run.judge_cost_usd or 0))
        Run.objects.filter(pk=run.pk).update(budget_usd=budget_usd, spent_usd=spent)
    Run.objects.filter(pk=run.pk).exclude(stopped_reason="").update(stopped_reason="", stopped_detail="")
    run.refresh_from_db(fields=["status", "cancel_requested", "options"])
    if run.status == RunStatus.CANCELLED:
        Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, cancel_requested=False, **_new_stretch(run),
                                             options=_options_without_stretch(run.pk))
    elif run.cancel_requested and rerun_stretch(run) is not None:
        # A cancelled run re-running a response: everything unfinished runs now, and it ends as any run.
        Run.objects.filter(pk=run.pk).update(cancel_requested=False, options=_options_without_stretch(run.pk))
    running = Response.objects.filter(run=run, status=ResponseStatus.RUNNING)
    running.filter(_stale(running)).update(
        status=ResponseStatus.PENDING, claimed_by="", claimed_at=None)
    if not Response.objects.filter(run=run, status=ResponseStatus.PENDING).exists():
        settle(run.pk)
        return 0
    count = Response.objects.filter(run=run, status=ResponseStatus.PENDING).count()  # before inline tasks run them
    transaction.on_commit(lambda: enqueue_pending(run.pk))
    return count


def retry_failed(run: Run) -> int:
    """Re-run only what ended in error: failed generations, and judging where a judge failed."""
    failed = Response.objects.filter(run=run).filter(Q(status=ResponseStatus.FAILED) | Q(judge_errors__gt=0))
    count = failed.count()
    if not count:
        return 0
    with transaction.atomic():
        ids = list(failed.values_list("pk", flat=True))
        undo = failed.aggregate(done=Count("pk"), failed=Count("pk", filter=Q(status=ResponseStatus.FAILED)))
        # Each retried item counts once: what it added to the judge counters goes too, and comes back
        # when it is judged again.
        judged = judge_counts(PointAssessment.objects.filter(response_id__in=ids).values_list("verdicts", flat=True))
        # What the failed attempts spent stays in the run's totals, as earlier attempts of their responses.
        regenerated = list(Response.objects.filter(pk__in=ids).exclude(error="").values_list("pk", flat=True))
        supersede(run.pk, regenerated, "retry", generation=True)
        supersede(run.pk, set(ids) - set(regenerated), "retry", generation=False)
        Response.objects.filter(pk__in=ids).update(status=ResponseStatus.PENDING, claimed_by="", claimed_at=None,
                                                   attempts=0)
        # Generation failures start from scratch; judge failures keep their generated text.
        Response.objects.filter(pk__in=ids).exclude(error="").update(text=None, final_text=None, conversation=[])
        Run.objects.filter(pk=run.pk).update(
            status=RunStatus.RUNNING, cancel_requested=False, **_new_stretch(run),
            options=_options_without_stretch(run.pk), stopped_reason="", stopped_detail="",
            items_done=F("items_done") - undo["done"], items_failed=F("items_failed") - undo["failed"],
            judge_calls_done=F("judge_calls_done") - judged["ok"],
            judge_calls_failed=F("judge_calls_failed") - judged["failed"])
        transaction.on_commit(lambda: enqueue_pending(run.pk))
    return count


class RerunRefused(Exception):
    """The response cannot be re-run now; the message says why (``retry_after_s``: when it may be, if known)."""

    def __init__(self, message: str, retry_after_s: int | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _rerun_times(run: Run, now: float) -> list[float]:
    """When the run's re-runs of the last minute were asked for, oldest first."""
    times = (run.options.get("reruns") or {}).get("at") or []
    return sorted(t for t in times if isinstance(t, (int, float)) and now - RERUN_WINDOW_S < t <= now + 1)


def rerun_response(run: Run, response_id: int) -> int:
    """Generate and judge one response again, afresh (no answer from the cache, the model's or a judge's).

    Its points and any overrides on them give way to the new ones (the count is returned); its annotation
    stays. Only that item runs: a finished run is running until it is stored, then finishes again with
    the status it had (a cancelled run's other items stay as they were); its counters count the item once.
    Refused while the item, or another trial of its cell, is still to be stored, and past
    EVALSITE_RERUNS_PER_MINUTE re-runs of the run in the last minute.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        row = Response.objects.select_for_update().filter(run=run, pk=response_id).first()
        if row is None:
            raise RerunRefused("this response is not part of the run")
        if row.status not in (ResponseStatus.DONE, ResponseStatus.FAILED):
            raise RerunRefused(f"it is {row.status}: it runs already; re-run it once it is finished")
        if not run.is_finished:
            sibling = (_reruns_open(run.pk).filter(prompt_index=row.prompt_index, variant_id=row.variant_id)
                       .exclude(pk=row.pk).values_list("trial", flat=True).first())
            if sibling is not None:
                raise RerunRefused(f"trial {sibling + 1} of the same cell is being re-run; one re-run per cell "
                                   f"at a time: re-run this one once that one is stored")
        now = time.time()
        recent = _rerun_times(run, now)
        limit = settings.EVALSITE_RERUNS_PER_MINUTE
        if len(recent) >= limit:
            wait = max(1, math.ceil(recent[len(recent) - limit] + RERUN_WINDOW_S - now))
            raise RerunRefused(
                f"{run.display_name} was re-run {len(recent)} times in the last minute, the most allowed "
                f"(EVALSITE_RERUNS_PER_MINUTE={limit}); the next re-run is allowed in {wait} s", retry_after_s=wait)
        reruns = {**(run.options.get("reruns") or {}), "at": [*recent, now]}
        changes = {}
        if run.is_finished:  # a re-run stretch: the run works on this item only, then finishes as it was
            reruns["returnsTo"] = run.status
            # Re-runs a cancel stopped earlier are not in flight: they wait, like the run's other items.
            _reruns_open(run.pk).update(fresh_requested=False)
            changes = dict(status=RunStatus.RUNNING, **_new_stretch(run))
        points = PointAssessment.objects.filter(response=row)
        judged = judge_counts(points.values_list("verdicts", flat=True))
        overrides = points.filter(override__isnull=False).count()
        points.delete()
        supersede(run.pk, [row.pk], "re-run", generation=True)  # what it spent stays in the run's totals
        Response.objects.filter(pk=row.pk).update(
            status=ResponseStatus.PENDING, claimed_by="", claimed_at=None, attempts=0, fresh_requested=True,
            text=None, final_text=None, conversation=[], error="", score=None, judged_score=None, finished_at=None)
        Run.objects.filter(pk=run.pk).update(
            **changes, options={**run.options, "reruns": reruns},
            items_done=F("items_done") - 1,
            items_failed=F("items_failed") - (1 if row.status == ResponseStatus.FAILED else 0),
            judge_calls_done=F("judge_calls_done") - judged["ok"],
            judge_calls_failed=F("judge_calls_failed") - judged["failed"])
        transaction.on_commit(lambda: _enqueue_rerun(run.pk, row.pk))
    return overrides


def _enqueue_rerun(run_id: int, response_id: int) -> None:
    """Hand one re-run item, and nothing else of its run, to the workers."""
    from django_q.tasks import async_task

    async_task("runs.tasks.run_chunk", run_id, [response_id], task_name=f"run {run_id}: re-run of {response_id}",
               group=f"run-{run_id}")


def _new_stretch(run: Run) -> dict:
    """A resume or a retry starts a new stretch of work; the one before is added to ``worked_s``."""
    run.refresh_from_db(fields=["worked_s", "resumed_at", "started_at", "finished_at", "status"])
    return {"worked_s": run.elapsed_s() or 0.0, "resumed_at": timezone.now(), "finished_at": None}


def recover_stale_items() -> int:
    """Give back items held by dead workers and hand them out again (worker start, and every minute)."""
    runs = 0
    # Items of a cancelled run whose worker stopped answering go back to pending: they did not run.
    for run_id in Run.objects.filter(status=RunStatus.CANCELLED, responses__status=ResponseStatus.RUNNING) \
            .values_list("pk", flat=True).distinct():
        running = Response.objects.filter(run_id=run_id, status=ResponseStatus.RUNNING)
        running.filter(_stale(running)).update(
            status=ResponseStatus.PENDING, claimed_by="", claimed_at=None)
    for run in Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]):
        if (run.options or {}).get("makingItems"):  # its items are still being made (runs.start.make_items)
            if not _has_queued_tasks(run.pk):  # the task that made them died: it goes on from the rows made
                enqueue_making(run.pk)
                runs += 1
            continue
        open_rows = Response.objects.filter(run=run, status__in=[ResponseStatus.PENDING, ResponseStatus.RUNNING])
        if rerun_stretch(run) is not None:  # only its re-runs are to run
            open_rows = open_rows.filter(fresh_requested=True)
        running = open_rows.filter(status=ResponseStatus.RUNNING)
        stale = running.filter(_stale(running)).update(
            status=ResponseStatus.PENDING, claimed_by="", claimed_at=None)
        if stale or (open_rows.exists() and not open_rows.filter(status=ResponseStatus.RUNNING).exists()
                     and not _has_queued_tasks(run.pk)):
            enqueue_pending(run.pk)
            runs += 1
        elif not open_rows.exists():
            settle(run.pk)
    return runs


def _has_queued_tasks(run_id: int) -> bool:
    """Whether the broker still holds tasks for this run (then nothing needs handing out again)."""
    try:
        from django_q.brokers import get_broker

        return get_broker().queue_size() > 0
    except Exception:  # a broker that cannot tell: hand out again; claims make duplicates harmless
        return False


def run_inline(run: Run, *, progress: Progress | None = None) -> Run:
    """Execute every pending item in this process (the CLI); no worker needed.

    The first calls leave once the first ``EVALSITE_CHUNK_SIZE`` items are claimed and loaded; the rest are
    claimed and loaded, in the run's order, while those calls wait (``execute_chunk``'s top-up), not all before
    the first call (claiming and loading 2,000 items was 0.3 s of ``run_blueprint`` before its first call)."""
    ids = list(Response.objects.filter(run=run, status=ResponseStatus.PENDING)
               .order_by("prompt_index", "variant_id", "trial").values_list("pk", flat=True))
    if ids:
        fresh = Run.objects.filter(pk=run.pk).only("manifest", "options").first()
        overlap = fresh is not None and tops_up(fresh, rerunning=rerun_stretch(fresh) is not None)
        first = ids[:settings.EVALSITE_CHUNK_SIZE] if overlap else ids
        execute_chunk(run.pk, first, progress=progress, top_up=overlap, inline=overlap)
    settle(run.pk)
    run.refresh_from_db()
    return run
