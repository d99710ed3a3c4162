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
from .judge import JudgeVerdict
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

    A response that was not evaluated has ``avgCoverageExtent: null`` and
    ``error`` with the reason. A prompt scored by similarity alone (no
    points) has no coverage: ``avgCoverageExtent`` is null without an error,
    and its score is the similarity, as the upstream's hybrid score reads it.
    """
    if ra.generation_error:
        return {"avgCoverageExtent": None, "error": ra.generation_error}
    coverage = ra.calculation.score if ra.calculation is not None else None
    out: dict = {
        "keyPointsCount": ra.key_points_count,
        "avgCoverageExtent": round2(coverage) if coverage is not None else None,
        "pointAssessments": [export_point(pa) for pa in ra.point_assessments],
    }
    if ra.judge_agreement is not None:
        out["judgeAgreement"] = ra.judge_agreement.to_upstream()
    if ra.score is None and ra.not_evaluated_reason:
        out["error"] = ra.not_evaluated_reason
    return out


def _verdict_details(v: JudgeVerdict) -> dict:
    return {
        "judgeId": v.judge_id,
        "model": v.judge.model,
        "approach": v.judge.approach,
        "role": v.role,
        "score": v.score,
        "classification": v.label,
        "reflection": v.reflection,
        "rawAnswers": list(v.raw_answers),
        "error": v.error,
        "latencyMs": v.latency_ms,
        "inputTokens": v.input_tokens,
        "outputTokens": v.output_tokens,
        "costUsd": v.cost_usd,
        "calls": v.calls,
        "cached": v.cached,
    }


def evalsite_details(ra: ResponseAssessment) -> dict:
    """What only evalsite keeps about one response, for the export's ``evalsite`` key."""
    return {
        "trial": ra.trial,
        "score": ra.score,
        "scoreBasis": ra.score_basis,
        "notEvaluatedReason": ra.not_evaluated_reason,
        "similarity": ra.similarity,
        "similarityError": ra.similarity_error,
        "calculation": ra.calculation.to_dict() if ra.calculation is not None else None,
        "judgeUsage": ra.judge_usage.to_dict(),
        "points": [
            {
                "index": i,
                "kind": pa.kind,
                "keyPointText": pa.key_point_text,
                "score": pa.score,
                "rawScore": pa.raw_score,
                "error": pa.error,
                "warning": pa.warning,
                "judgeStdDev": pa.judge_std_dev,
                "disagreement": pa.disagreement,
                "backupUsed": pa.backup_used,
                "overridden": pa.overridden,
                "originalScore": pa.original_score,
                "failedJudges": [v.judge_id for v in pa.failed_judges],
                "verdicts": [_verdict_details(v) for v in pa.verdicts],
            }
            for i, pa in enumerate(ra.point_assessments)
        ],
    }
