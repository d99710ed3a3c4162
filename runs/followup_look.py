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


def sides(run: Run) -> tuple[int, int]:
    """The follow-up runs whose answers are the pair's ``a`` and ``b`` sides: ``run`` itself twice, or, for a
    model across two runs, the side asked under the run's conditions and the one under the base's."""
    options = run.options or {}
    partner = options.get("followupPartner")
    if not partner:
        return run.pk, run.pk
    return (run.pk, partner) if options.get("followupSide", "a") == "a" else (partner, run.pk)


def paired_differences(run: Run) -> list[float]:
    """The follow-up's paired differences (a minus b, per prompt and trial) in the order its items are worked,
    up to the first pair not yet complete. Across two runs the sides are two runs' answers of one variant,
    paired by prompt id and trial, in the order of the ``a`` side's prompts."""
    pair = (run.options or {}).get("followupPair") or {}
    a, b = pair.get("a"), pair.get("b")
    run_a, run_b = sides(run)
    cells: dict[tuple[int, int], dict[str, tuple[str, float | None]]] = {}
    if run_a == run_b:
        rows = Response.objects.filter(run_id=run.pk, variant_id__in=[a, b]).values_list(
            "prompt_index", "trial", "variant_id", "status", "score")
        for index, trial, variant, status, score in rows:
            cells.setdefault((index, trial), {})[variant] = (status, score)
    else:
        order: dict[str, int] = {}
        for side, pk, variant in (("a", run_a, a), ("b", run_b, b)):
            rows = Response.objects.filter(run_id=pk, variant_id=variant).values_list(
                "prompt_id", "prompt_index", "trial", "status", "score")
            for prompt_id, index, trial, status, score in rows:
                if side == "a":
                    order[prompt_id] = index
                cells.setdefault((prompt_id, trial), {})[side] = (status, score)
        cells = {(order.get(pid, 10 ** 9), pid, trial): got for (pid, trial), got in cells.items()}
        a, b = "a", "b"
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
    Run.objects.filter(pk__in=set(sides(run)), cancel_requested=False).exclude(
        status__in=("done", "failed", "cancelled")).update(
        cancel_requested=True, stopped_reason=STOP_REASON,
        stopped_detail=f"decided after {found.n} paired answers: {said(pair, words)} "
                       f"({found.low:+.3f} to {found.high:+.3f})")


def said(pair: dict, words: str) -> str:
    """"A better than B", or across two runs "A in run 7 better than in run 5"."""
    if pair.get("bRun"):
        return f"{pair.get('a')} in run {pair.get('aRun')} {words} than in run {pair.get('bRun')}"
    return f"{pair.get('a')} {words} than {pair.get('b')}"
