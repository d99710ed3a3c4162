"""A reviewer's word on one point: an override (the reviewer's score, with a reason) or a confirmation
(the judges are right). Either makes the point *reviewed* for judge trust (``runs.engine.trust``).

Overrides: the judges' verdict is never touched. The response's ``score`` (overrides applied) is
recomputed with the same function the exports use (``records.assessment_of``), its
``violated_should_not`` flag follows the effective scores, and a finished run's stored aggregates are
recomputed so every page and export agrees.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from .models import PointAssessment, PointConfirmation, PointOverride, Response, Run
from .records import assessment_fields, assessment_of, bump_results, compute_aggregates


class OverrideRefused(Exception):
    """The override cannot be applied; the message says why in words a reviewer can act on."""


@dataclass(frozen=True)
class OverrideOutcome:
    response: Response
    assessment: PointAssessment
    before: float | None  # the response's score before this change
    after: float | None


def apply_override(assessment: PointAssessment, score: float | None, *, reason: str = "",
                   who: str = "") -> OverrideOutcome:
    """Set the reviewer's ``score`` (0..1) for a point with a ``reason``; ``score=None`` removes the override.

    Raises OverrideRefused for a score outside 0..1, a missing reason, or a
    response that is not finished (its points may still be replaced).
    """
    if score is not None:
        if not 0 <= score <= 1:
            raise OverrideRefused("A score is between 0 and 1.")
        if not reason.strip():
            raise OverrideRefused("Say why: the reason stays beside the judges' verdict.")
    with transaction.atomic():
        response = Response.objects.select_for_update().select_related("run").get(pk=assessment.response_id)
        if response.status not in ("done", "failed"):
            raise OverrideRefused("This response is still being worked on; override it when it is finished.")
        before = response.score
        if score is None:
            PointOverride.objects.filter(assessment_id=assessment.pk).delete()
        else:
            PointConfirmation.objects.filter(assessment_id=assessment.pk).delete()  # the override says more
            PointOverride.objects.update_or_create(
                assessment_id=assessment.pk, defaults={"score": score, "reason": reason.strip(), "who": who.strip()})
        points = list(PointAssessment.objects.filter(response=response).select_related("override")
                      .order_by("position"))
        if points and response.score_basis != "similarity":
            # The engine works the score out again, gates and verdicts (docs/scoring.md section 7) included.
            assessed = assessment_of(response, points, response.run.prompt(response.prompt_index))
            fields = assessment_fields(assessed)
            for name, value in fields.items():
                setattr(response, name, value)
            response.save(update_fields=sorted(fields))
        run = response.run
        bump_results(run.pk)
        if run.is_finished:
            Run.objects.filter(pk=run.pk).update(aggregates=compute_aggregates(run.pk, agreement=(run.aggregates or {}).get("agreement")))
    assessment = next(pa for pa in points if pa.pk == assessment.pk)
    return OverrideOutcome(response=response, assessment=assessment, before=before, after=response.score)


def confirm_point(assessment: PointAssessment, *, confirmed: bool = True, who: str = "") -> bool:
    """Say the judges are right about this point (``confirmed=False`` takes it back). A point with an override
    is not confirmed: the reviewer's own score already says what holds. Scores do not change."""
    response = Response.objects.only("status").get(pk=assessment.response_id)
    if response.status not in ("done", "failed"):
        raise OverrideRefused("This response is still being worked on; confirm it when it is finished.")
    if not confirmed:
        PointConfirmation.objects.filter(assessment_id=assessment.pk).delete()
        return False
    if PointOverride.objects.filter(assessment_id=assessment.pk).exists():
        raise OverrideRefused("This point has your override; remove it first to confirm the judges' score.")
    if assessment.kind != "judged":
        raise OverrideRefused("Only a judged point can be confirmed: a function's score is not a judge's.")
    PointConfirmation.objects.update_or_create(assessment_id=assessment.pk,
                                               defaults={"who": who.strip()[:150], "created_at": timezone.now()})
    return True
