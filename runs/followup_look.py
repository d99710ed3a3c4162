"""A follow-up run's look at its own results while it works, and its verdict (runs/followup.py says what a
follow-up is). Here, below the pages, so that a worker (runs/work.py) can call ``after_batch`` after each batch
it stores: once the anytime-valid interval (runs/engine/sequential.py) excludes 0, the run is stopped, as a
budget stops one (``stopped_reason`` "decided").

The verdict is from the follow-up's **own stored results alone**, not pooled with the original run's: the
prompts were chosen by looking at the original answers (the most disagreement), so counting those answers again
would count the selection as evidence, and the sequence's guarantee is for answers that come after the decision
to look. The paired differences are taken in the order the items are worked (prompt by prompt, trial by trial),
and at each look only the longest complete stretch of that order counts: each look sees the start of one fixed
sequence, which is what "anytime-valid" is about.
"""

from __future__ import annotations

import logging

from django.db import OperationalError

from runs.engine import sequential

from .models import Response, ResponseStatus, Run

STOP_REASON = "decided"
log = logging.getLogger(__name__)


def is_followup(run: Run) -> bool:
    return isinstance(run.options, dict) and bool(run.options.get("followupOf"))


def paired_differences(run: Run) -> list[float]:
    """The follow-up's paired differences (a minus b, per prompt and trial) in the order its items are worked,
    up to the first pair not yet complete."""
    pair = (run.options or {}).get("followupPair") or {}
    a, b = pair.get("a"), pair.get("b")
    rows = Response.objects.filter(run_id=run.pk, variant_id__in=[a, b]).values_list(
        "prompt_index", "trial", "variant_id", "status", "score")
    cells: dict[tuple[int, int], dict[str, tuple[str, float | None]]] = {}
    for index, trial, variant, status, score in rows:
        cells.setdefault((index, trial), {})[variant] = (status, score)
    out = []
    for key in sorted(cells):
        got = cells[key]
        if a not in got or b not in got:
            continue
        (status_a, score_a), (status_b, score_b) = got[a], got[b]
        if status_a in (ResponseStatus.PENDING, ResponseStatus.RUNNING) or \
                status_b in (ResponseStatus.PENDING, ResponseStatus.RUNNING):
            break  # the stretch so far: a later look sees it and more, never a different start
        if score_a is not None and score_b is not None:  # an answer that failed or was not scored says nothing
            out.append(float(score_a) - float(score_b))
    return out


def verdict(run: Run) -> sequential.Sequential:
    """The follow-up's verdict from its own stored results (see the module's note)."""
    return sequential.decide(paired_differences(run))


def after_batch(run_id: int) -> None:
    """A follow-up's look at its own results (after each batch a worker stores, on the thread that stored it):
    stop the run once the sequence has decided. A look the database could not serve at once (SQLite busy) is
    skipped: the next one looks again, and skipping a look never makes a false decision likelier."""
    try:
        _look(run_id)
    except OperationalError:
        log.info("run %s: a follow-up's look was skipped (the database was busy)", run_id)


def _look(run_id: int) -> None:
    run = Run.objects.filter(pk=run_id).only("pk", "options", "status", "cancel_requested").first()
    if run is None or run.is_finished or run.cancel_requested or not is_followup(run):
        return
    found = verdict(run)
    if found.verdict == "cant_tell":
        return
    words = {"better": "better", "worse": "worse"}[found.verdict]
    pair = run.options.get("followupPair") or {}
    Run.objects.filter(pk=run_id, cancel_requested=False).exclude(status__in=("done", "failed", "cancelled")).update(
        cancel_requested=True, stopped_reason=STOP_REASON,
        stopped_detail=f"decided after {found.n} paired answers: {pair.get('a')} {words} than {pair.get('b')} "
                       f"({found.low:+.3f} to {found.high:+.3f})")
