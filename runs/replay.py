"""Replay: rebuild a finished run as a new run from the answers it stored, with no provider call.

A run keeps a manifest: what it pinned (``Run.manifest``, written at start: revision number and text sha,
models and parameters, judges with their approach and prompt, scale, trials) and every call it made, in each
response's call log: the call's cache key, trial and turn and the answer's text as the run used it
(``runs/engine/calls.py``, written by ``runs/engine/pipeline.py``). :func:`run_manifest` puts the two together.

:func:`replay_run` first checks that every call's answer is in the run's own call log and refuses, naming each
one that is not, before anything is made. Then it starts a new run of the same revision, models, judges and
options whose every call is answered by the original's call for it (the same item, so the same trial; the
same cache key, so the same request), with that call's text, tokens, cost, latency and cache flag: the shared
response cache is not read for them, so a run made since (a Fresh re-run that stored other answers under the
same keys) changes nothing, and the new run's JSON and CSV exports are the original's, byte for byte, but for
the run id and the timestamps. A gate lets nothing leave (``pipeline.CacheOnlyGate``): should the replay ask
something the original did not, it stops there ("replay", naming the call) and still sends nothing.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from runs.engine import calls as call_log

from .models import Response, ResponseStatus, Run
from .spec import RunRefused


class ReplayRefused(Exception):
    def __init__(self, message: str, missing: list[str] | None = None):
        super().__init__(message)
        self.message, self.missing = message, list(missing or [])


def _judge_order(entry: dict) -> tuple:
    """Judge calls run at once and are logged as they come back: the manifest lists them by judge and point
    (their label), then model and key, so the same run always lists them alike (a replay's too)."""
    return ("dropped" in entry or "unreadable" in entry, str(entry.get("label") or ""), str(entry.get("model") or ""),
            str(entry.get("cacheKey") or ""))


def manifest_calls(run: Run) -> list[dict]:
    """Every call the run's responses made, in item order (prompt, variant, trial), each with its cache key and
    whether its answer is kept for a replay: an item's candidate calls in the order they were made, then its
    judge calls (``_judge_order``)."""
    out = []
    rows = Response.objects.filter(run=run).order_by("prompt_index", "variant_id", "trial").values_list(
        "prompt_index", "prompt_id", "variant_id", "trial", "status", "error", "candidate_calls", "judge_calls")
    for index, prompt_id, variant_id, trial, status, error, made, judged in rows:
        entries = (*call_log.unpack(made), *sorted(call_log.unpack(judged), key=_judge_order))
        if status == ResponseStatus.FAILED and not any(e.get("error") or "dropped" in e or "unreadable" in e
                                                       for e in entries):
            # Failed with no failed call logged (a model it could not reach, its time budget, a bug): the
            # replay could not rebuild that failure from answers.
            out.append({"promptIndex": index, "prompt": prompt_id, "variant": variant_id, "trial": trial,
                        "itemStatus": status, "problem": f"the item failed with no failed call in its log "
                                                         f"({(error or 'no reason kept')[:300]})"})
        for entry in entries:
            call = {"promptIndex": index, "prompt": prompt_id, "variant": variant_id, "trial": trial,
                    "itemStatus": status}
            if "dropped" in entry or "unreadable" in entry:
                call["problem"] = call_log.answer_problem(entry)
            else:
                problem = call_log.answer_problem(entry)
                call.update({"turn": entry.get("turn"), "purpose": entry.get("purpose"), "label": entry.get("label"),
                             "model": entry.get("model"), "key": entry.get("cacheKey"), "source": entry.get("source"),
                             "ok": not entry.get("error"), "error": entry.get("error"),
                             "cached": entry.get("cached"), "inputTokens": entry.get("input_tokens"),
                             "outputTokens": entry.get("output_tokens"), "costUsd": entry.get("cost_usd"),
                             "latencyMs": entry.get("latency_ms"), "answerKept": problem is None})
                if problem is not None:
                    call["answerMissing"] = problem
            out.append(call)
    return out


def run_manifest(run: Run) -> dict:
    """The run's manifest: what it pinned at start and the cache keys of every call it made (trial included)."""
    return {**(run.manifest or {}), "run": run.pk, "status": run.status, "calls": manifest_calls(run)}


def _where(call: dict) -> str:
    what = f"{call.get('purpose') or 'call'}" + (f" ({call['label']})" if call.get("label") else "")
    turn = f", turn {call['turn'] + 1}" if isinstance(call.get("turn"), int) and call["turn"] else ""
    return (f"{call['prompt']} × {call['variant']}, trial {call['trial'] + 1}{turn}: {what}"
            + (f" to '{call['model']}'" if call.get("model") else ""))


def missing_answers(run: Run, calls: list[dict] | None = None) -> list[str]:
    """What a replay of ``run`` could not take from the run's own call log, one sentence each (empty: it can
    replay). The shared response cache is not consulted: it may hold another run's answers under the same keys."""
    unfinished = Response.objects.filter(run=run, status__in=[ResponseStatus.PENDING, ResponseStatus.RUNNING]).count()
    if unfinished:
        return [f"{unfinished} item{'s' if unfinished != 1 else ''} of {run.display_name} did not run (it is "
                f"{run.status}{', stopped at its budget' if run.stopped_reason == 'budget' else ''}): a replay "
                f"rebuilds a run whose every item ran; resume it first"]
    missing = []
    for call in run_manifest(run)["calls"] if calls is None else calls:
        if call.get("problem"):
            missing.append(f"{call['prompt']} × {call['variant']}, trial {call['trial'] + 1}: {call['problem']}")
        elif call.get("answerMissing"):
            missing.append(f"{_where(call)}: {call['answerMissing']}"
                           + (f" (key {call['key']})" if call.get("key") else ""))
    return missing


def replay_run(run: Run, *, enqueue: bool = False, progress=None) -> Run:
    """A new run rebuilt from ``run``'s stored answers; refused (``ReplayRefused``, naming every missing answer)
    before anything is made when one is missing. ``enqueue``: hand it to the workers (the run page); else run
    it in this process (the command)."""
    from .start import start_run
    from .work import enqueue_pending, run_inline

    run = Run.objects.select_related("blueprint", "revision").get(pk=run.pk)
    if not run.is_finished:
        raise ReplayRefused(f"{run.display_name} is {run.status}; replay it once it has finished.")
    missing = missing_answers(run)
    if missing:
        raise ReplayRefused(f"{run.display_name} cannot be replayed without calling a provider: "
                            f"{len(missing)} answer{'s are' if len(missing) != 1 else ' is'} missing", missing)
    options = {k: v for k, v in (run.options or {}).items() if k != "reruns"}
    models = [m["id"] if isinstance(m, dict) else m for m in run.resolved_models]
    try:
        new = start_run(run.blueprint, revision=run.revision, models=models,
                        judges=options.get("requestedJudges"), keep_judges=options.get("keptJudges"),
                        trials=options.get("trialsOverride"), fresh=False, source="replay", enqueue=False)
    except RunRefused as refused:
        raise ReplayRefused(f"{run.display_name} cannot be replayed: {refused.message}", refused.problems) from None
    # The original's judges, models and options as they were (the site's default judges may have changed since).
    Run.objects.filter(pk=new.pk).update(
        judges=run.judges, resolved_models=run.resolved_models, options=options,
        judge_calls_total=run.judge_calls_total, name=f"Replay of {run.display_name}"[:200],
        manifest={**(run.manifest or new.manifest or {}), "replayOf": run.pk})
    new.refresh_from_db()
    if enqueue:
        transaction.on_commit(lambda: enqueue_pending(new.pk))
        return new
    return run_inline(new, progress=progress)


@require_POST
def replay_view(request, run_id):
    """The run page's Replay button (route it as ``runs:replay``, ``runs/<id>/replay``): the replay is handed to
    the workers and its page opens; a refusal names the missing answers on the run's page."""
    run = get_object_or_404(Run, pk=run_id)
    try:
        new = replay_run(run, enqueue=True)
    except ReplayRefused as refused:
        shown = "; ".join(refused.missing[:5]) + (f"; and {len(refused.missing) - 5} more" if len(refused.missing) > 5
                                                  else "")
        messages.error(request, f"Not replayed: {refused.message}" + (f": {shown}" if shown else "."))
        return redirect("runs:detail", run.pk)
    messages.info(request, f"Replaying {run.display_name} from its stored answers: no provider is called.")
    return redirect("runs:detail", new.pk)

