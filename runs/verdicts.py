"""The pass/fail layer on the result pages: what a response's verdict rests on, a cell's trials, a run's verdicts.

Verdicts, gates and per-check minimums are worked out by the engine when a response
is scored (runs/engine/scoring.py) and stored on the Response row; trials are
combined per cell when the run ends (``aggregates["cellDetails"]``). This module
turns those into what the templates show (``templates/runs/_verdicts.html``); an
override works the verdict out again through ``runs.records``.
"""

from __future__ import annotations

from blueprints.spec import functions

from .models import PointAssessment, Response, Run

VERDICT_LABELS = {"pass": "pass", "borderline": "borderline", "fail": "fail"}


def cell_details(run: Run, prompt_id: str, variant_id: str) -> dict | None:
    return ((run.aggregates or {}).get("cellDetails") or {}).get(prompt_id, {}).get(variant_id)


def response_verdict_context(run: Run, response: Response, assessments: list[PointAssessment]) -> dict:
    """What ``_verdicts.html#response-verdict`` shows."""
    metric = [pa for pa in assessments if pa.fn in functions.METRIC_FUNCTIONS]
    cell = cell_details(run, response.prompt_id, response.variant_id)
    return {
        "has_layer": bool(response.verdict or response.checks or response.verdict_reason),
        "verdict": response.verdict,
        "reason": response.verdict_reason,
        "gates_failed": response.gates_failed or [],
        "score_before_gates": response.score_before_gates,
        "checks": response.checks or [],
        "metric_points": metric,
        "cell": cell if cell and cell.get("k", 1) > 1 else None,
    }


def run_verdict_rows(run: Run) -> list[dict]:
    """One row per prompt with a cell per variant: its verdict and, with trials, pass@k and agreement."""
    details = (run.aggregates or {}).get("cellDetails") or {}
    variants = sorted({v for cells in details.values() for v in cells})
    rows = []
    for prompt_id, cells in details.items():
        rows.append({"prompt_id": prompt_id, "cells": [cells.get(v) for v in variants]})
    return [{"variants": variants, "rows": rows}] if rows else []
