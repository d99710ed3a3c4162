"""One response's assessment in the upstream's export layout, and our own details beside it.

``export_response`` gives the value of
``evaluationResults.llmCoverageScores[promptId][modelId]`` exactly as the
upstream's tooling reads it (reference 3.8); ``evalsite_details`` gives what
only evalsite knows (failed judges, raw answers, the worked calculation,
overrides, usage), for the export's top-level ``evalsite`` key. Keys whose
value would be undefined upstream are left out.
"""

from __future__ import annotations

from .assess import PointAssessment, ResponseAssessment
from .scoring import round2


def export_point(pa: PointAssessment) -> dict:
    out: dict = {"keyPointText": pa.key_point_text}
    if pa.score is not None:
        out["coverageExtent"] = pa.score
    if pa.reflection is not None:
        out["reflection"] = pa.reflection
    out["multiplier"] = pa.multiplier
    if pa.point.citation is not None:
        out["citation"] = pa.point.citation
    if pa.path_id:
        out["pathId"] = pa.path_id
    out["isInverted"] = pa.inverted
    if pa.kind == "judged":
        if pa.judge_model_id is not None:
            out["judgeModelId"] = pa.judge_model_id
        judgements = pa.individual_judgements
        if judgements:
            out["individualJudgements"] = [
                {"judgeModelId": v.judge_id, "coverageExtent": v.score, "reflection": v.reflection or ""}
                for v in judgements
            ]
    # Upstream keeps a partial judge failure in `error` beside the score; so do we in its layout.
    message = pa.error or pa.warning
    if message:
        out["error"] = message
    return out


def export_response(ra: ResponseAssessment) -> dict:
    """``llmCoverageScores[promptId][modelId]``: ``avgCoverageExtent`` (2 places) and ``pointAssessments``.

    ``avgCoverageExtent`` is the response's score, reviewers' overrides and
    gates applied. A response that was not evaluated has ``avgCoverageExtent:
    null`` and ``error`` with the reason. A prompt scored by similarity alone
    (no points) has no coverage: ``avgCoverageExtent`` is null without an
    error, and its score is the similarity, as the upstream's hybrid score reads it.
    """
    if ra.generation_error:
        return {"avgCoverageExtent": None, "error": ra.generation_error}
    out: dict = {
        "avgCoverageExtent": ra.score if ra.score_basis == "coverage" else None,
        "keyPointsCount": ra.key_points_count,
        "pointAssessments": [export_point(pa) for pa in ra.point_assessments],
    }
    if ra.judge_agreement is not None:
        out["judgeAgreement"] = ra.judge_agreement.to_upstream()
    if ra.score is None and ra.not_evaluated_reason:
        out["error"] = ra.not_evaluated_reason
    return out


def export_cell(shown: dict, cell_score: float | None, trials: int) -> dict:
    """A cell with trials in the upstream layout, which has one response per prompt and model:
    ``shown`` is the export of the trial the cell stands for (``matrix.representative_trial``: its points
    are listed), and ``avgCoverageExtent`` is the cell's score by its prompt's rule (mean, best, pass@k),
    rounded to 2 places, the figure every page shows."""
    if trials <= 1 or "pointAssessments" not in shown:
        return shown
    if shown.get("avgCoverageExtent") is None and "error" not in shown:
        return shown  # scored by similarity alone: no coverage to give
    out = {**shown, "avgCoverageExtent": None if cell_score is None else round2(cell_score)}
    if cell_score is not None:
        out.pop("error", None)
    return out


_JUDGE_KEYS = ("judgeId", "model", "score", "latencyMs", "inputTokens", "outputTokens", "costUsd", "cached",
               "rawAnswers", "error")


def _point_details(index: int, pa: PointAssessment) -> dict:
    verdicts = [v.to_dict() for v in pa.verdicts]
    return {
        "index": index, "kind": pa.kind, "score": pa.score,
        "judgesScore": pa.original_score if pa.overridden else pa.score,
        "overridden": pa.overridden,
        "override": ({"score": pa.score, "reason": pa.override_reason or "", "who": pa.override_by or ""}
                     if pa.overridden else None),
        "failedJudges": [v for v in verdicts if v.get("error")],
        "judgeStdDev": pa.judge_std_dev, "disagreement": pa.disagreement, "backupUsed": pa.backup_used,
        # A re-asking (the run's judge repeats) says which: {"repeat": 1} is the second asking (never scored).
        "judges": [{**{k: v.get(k) for k in _JUDGE_KEYS}, **({"repeat": v["repeat"]} if v.get("repeat") else {})}
                   for v in verdicts],
    }


def evalsite_details(ra: ResponseAssessment) -> dict:
    """What only evalsite keeps about one response's assessment, for the export's ``evalsite`` key.

    The export adds what generation recorded (status, latency, tokens, cost) beside it.
    """
    out = {
        "score": ra.score,
        "judgedScore": ra.score_before_overrides if ra.overridden else ra.score,
        "scoreBasis": ra.score_basis,
        "notEvaluatedReason": ra.not_evaluated_reason,
        "similarity": ra.similarity,
        "calculation": ra.calculation.to_dict() if ra.calculation is not None else None,
        "judgeUsage": ra.judge_usage.to_dict(),
    }
    if ra.verdict or ra.check_results or ra.verdict_reason:
        out.update(verdict=ra.verdict, verdictReason=ra.verdict_reason, scoreBeforeGates=ra.score_before_gates,
                   gatesFailed=list(ra.gates_failed), checks=[c.to_dict() for c in ra.check_results])
    out["points"] = [_point_details(i, pa) for i, pa in enumerate(ra.point_assessments)]
    return out
