"""What a person can do to a run or one of its results, once each: the page's view and the API both call these.

Each action checks what it is asked in the same words from every door and either does it, returning
what to tell the person (``Done``), or refuses with the reason and the fix (``Refused``; the API answers
its ``status``: 409 when the run's state forbids it now, 400 when what was sent cannot be used).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from . import annotations, overrides
from . import work as run_work
from .models import Annotation, PointAssessment, Response, ResponseStatus, Run, RunStatus


class Refused(Exception):
    def __init__(self, message: str, status: int = 409, *, retry_after_s: float | None = None):
        super().__init__(message)
        self.message, self.status, self.retry_after_s = message, status, retry_after_s


@dataclass(frozen=True)
class Done:
    message: str
    count: int = 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def cancel(run: Run) -> Done:
    run.refresh_from_db(fields=["status", "cancel_requested"])
    if run.is_finished:
        raise Refused(f"{run.display_name} is already {run.get_status_display().lower()}; there is nothing to cancel.")
    run_work.cancel_run(run)
    return Done("Cancelled: no new item starts; finished items are kept.")


def resume(run: Run, budget_usd=None) -> Done:
    """``budget_usd`` (a number, or text read as one; None or "" keeps the run's): the run's new cap. A run
    stopped at its budget resumes only with a cap above what it spent."""
    run.refresh_from_db(fields=["status", "cancel_requested", "budget_usd", "spent_usd", "stopped_reason",
                                "resolved_models", "judges", "options", "judge_calls_total"])
    if run.status in (RunStatus.QUEUED, RunStatus.RUNNING) and not run.cancel_requested:
        raise Refused(f"{run.display_name} is {run.status}; resume it once it has stopped.")
    waiting = Response.objects.filter(run=run, status__in=[ResponseStatus.PENDING, ResponseStatus.RUNNING]).count()
    if not waiting:
        raise Refused(f"{run.display_name} has nothing left to run; use Retry failed or re-run one response.")
    budget = None
    if budget_usd is not None and budget_usd != "":
        from .start import check_budget, unpriced_models

        try:
            budget = check_budget(budget_usd)
        except ValueError as exc:
            raise Refused(f"Not resumed: {exc}.", 400) from None
        missing = unpriced_models(run.resolved_models, run.judges if run.judge_calls_total else None,
                                  (run.options or {}).get("embeddingModel"))
        if missing:
            raise Refused(f"Not resumed: a budget needs a price for every model the run calls, and "
                          f"{', '.join(repr(m) for m in missing)} has none (runs/engine/providers/prices.json).", 400)
    if run.stopped_reason == "budget" and (budget is None or budget <= run.spent_usd):
        raise Refused(f"{run.display_name} stopped at its budget of ${run.budget_usd:g} after spending "
                      f"${run.spent_usd:.4f}; resume it with a higher cap (more than ${run.spent_usd:.4f}).", 409)
    count = run_work.resume_run(run, budget_usd=budget)
    cap = f" Its budget is now ${budget:g} (${run.spent_usd:.4f} spent so far)." if budget is not None else ""
    return Done(f"Resumed: {_plural(count, 'item')} handed to the workers.{cap}", count)


def retry_failed(run: Run) -> Done:
    run.refresh_from_db(fields=["status", "cancel_requested"])
    if not run.is_finished:
        raise Refused(f"{run.display_name} is still {run.status}; retry what failed once it has finished.")
    count = run_work.retry_failed(run)
    if not count:
        return Done("Nothing to retry: no item ended in error.")
    return Done(f"Retrying {_plural(count, 'item')} that ended in error.", count)


def rename(run: Run, name) -> Done:
    if not isinstance(name, str):
        raise Refused('Send the new name as text ("" gives the run back its number).', 400)
    try:
        run.rename(name)
    except ValidationError as exc:
        raise Refused(" ".join(exc.messages), 400) from None
    return Done(f"Renamed to {run.display_name}.")


def rerun(run: Run, response: Response) -> Done:
    try:
        count = run_work.rerun_response(run, response.pk)
    except run_work.RerunRefused as refused:
        # Past the run's re-runs a minute: 429, and when to try again; otherwise the item's state forbids it.
        wait = getattr(refused, "retry_after_s", None)
        raise Refused(f"Not re-run: {refused}.", 429 if wait else 409, retry_after_s=wait) from None
    gone = f" Its {_plural(count, 'override')} went with its old points." if count else ""
    return Done(f"Re-running {response.prompt_id} × {response.variant_id} afresh (no cached answers).{gone}", count)


def annotate(response: Response, *, thumbs, comment, who) -> Annotation | None:
    wrong = [k for k, v in (("thumbs", thumbs), ("comment", comment), ("who", who)) if v is not None
             and not isinstance(v, str)]
    if wrong:
        raise Refused(f"{', '.join(wrong)} must be text (thumbs: \"up\", \"down\" or empty)", 400)
    try:
        return annotations.save_annotation(response, thumbs=thumbs or "", comment=comment or "", who=who or "")
    except annotations.AnnotationRefused as refused:
        raise Refused(str(refused), 400) from None


def override(assessment: PointAssessment, score, *, reason: str = "", who: str = "") -> overrides.OverrideOutcome:
    """``score`` None removes the override; text is read as a number."""
    if isinstance(score, bool):
        raise Refused("Give a score between 0 and 1.", 400)
    if score is not None and not isinstance(score, (int, float)):
        try:
            score = float(score)
        except (TypeError, ValueError):
            raise Refused("Give a score between 0 and 1.", 400) from None
    try:
        return overrides.apply_override(assessment, score, reason=reason or "", who=who or "")
    except overrides.OverrideRefused as refused:
        raise Refused(str(refused), 400) from None


def confirm(assessment: PointAssessment, *, confirmed: bool = True, who: str = "") -> Done:
    try:
        done = overrides.confirm_point(assessment, confirmed=confirmed, who=who or "")
    except overrides.OverrideRefused as refused:
        raise Refused(str(refused), 409) from None
    number = assessment.position + 1
    return Done(f"Point {number}: the judges' score is confirmed." if done else
                f"Point {number}: confirmation taken back.")
