"""The pass/fail layer on the result pages: what a response's verdict rests on, a cell's trials, a run's verdicts.

Verdicts, gates and per-check minimums are worked out by the engine when a response
is scored (runs/engine/scoring.py) and stored on the Response row; a cell's trials,
its score and whether it passed come from the run's matrix (runs/engine/matrix.py,
the one owner of those rules). This module turns those into what the templates show
(``templates/runs/_verdicts.html``); an override works the verdict out again through
``runs.records``.
"""

from __future__ import annotations

from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

from blueprints.spec import functions
from runs.engine.matrix import Cell, Matrix

from .models import PointAssessment, Response, Run
from .templatetags.results import heat, pass_badge, score2

VERDICT_LABELS = {"pass": "pass", "borderline": "borderline", "fail": "fail"}


def verdict_cell_html(cell: dict | None) -> str:
    """One cell of the run page's verdicts table (``cell_view``): its score chip, with trials its rule, its pass
    badge and how many trials passed. Plain strings, not a template: a page of 100 prompts and 10 models has
    1,000 of them (59 ms of every run page through the template; tests/web/test_verdict_cells.py holds the two
    equal)."""
    if not cell:
        return '<td><span class="muted">—</span></td>'
    score = cell.get("score")
    parts = ["<td>", f'<span class="score-chip {heat(score)}">{score2(score)}</span>' if score is not None
             else '<span class="not-evaluated">n/e</span>']
    several = _more_than_one(cell.get("k"))
    if several:
        parts.append(f' <span class="muted small">{_shown(cell.get("rule"))}</span>')
    parts += [" ", pass_badge(cell.get("pass_state"))]
    if several and cell.get("judgedTrials"):
        parts.append(f' <span class="muted">{_shown(cell.get("passedTrials"))}/{_shown(cell.get("judgedTrials"))} '
                     "trials passed")
        if cell.get("agreement") is not None:
            parts.append(f", consistency {_percent(cell['agreement'])}%")
        parts.append("</span>")
    parts.append("</td>")
    return "".join(parts)


def _more_than_one(k) -> bool:
    try:
        return k > 1
    except TypeError:  # as the template's ``cell.k > 1`` reads a missing count
        return False


def _shown(value) -> str:
    """As ``{{ value }}`` prints it: localized, then escaped."""
    value = localize(value)
    return conditional_escape(value if isinstance(value, str) else str(value))


def _percent(value) -> str:
    """As ``{% widthratio value 1 100 %}`` prints it."""
    try:
        return str(round(float(value) / 1.0 * 100))
    except (ValueError, TypeError, OverflowError):
        return ""


def cell_view(cell: Cell | None) -> dict | None:
    """A matrix cell as ``_verdicts.html`` shows it: its score, its rule in words, whether it passed (the
    matrix's one rule, ``Cell.pass_state``) and its trials' figures (``CellOutcome.to_dict``)."""
    if cell is None:
        return None
    return {**cell.outcome.to_dict(), "k": cell.k, "score": cell.shown, "rule": cell.rule_text,
            "pass_state": cell.pass_state, "pass_label": cell.pass_label, "shown_trial": cell.shown_trial}


def response_verdict_context(run: Run, response: Response, assessments: list[PointAssessment],
                             cell: Cell | None = None) -> dict:
    """What ``_verdicts.html#response-verdict`` shows; ``cell``: the response's cell in the run's matrix."""
    metric = [pa for pa in assessments if pa.fn in functions.METRIC_FUNCTIONS]
    return {
        "has_layer": bool(response.verdict or response.checks or response.verdict_reason),
        "verdict": response.verdict,
        "reason": response.verdict_reason,
        "gates_failed": response.gates_failed or [],
        "score_before_gates": response.score_before_gates,
        "checks": response.checks or [],
        "metric_points": metric,
        "cell": cell_view(cell) if cell is not None and cell.k > 1 else None,
    }


def run_verdict_rows(matrix: Matrix | None, indices=None) -> list[dict]:
    """One row per prompt with trials or a pass mark, a cell per variant (the matrix's columns): its score, rule,
    whether it passed and, with trials, how many of them passed. ``indices``: only those prompts, in that order
    (the run page shows the prompts of its heatmap's page: a page of a big run stays a page)."""
    if matrix is None:
        return []
    rows = []
    for index in (range(len(matrix.prompts)) if indices is None else indices):
        if not 0 <= index < len(matrix.prompts):
            continue
        cells = matrix.row(index)
        if any(c is not None and (c.k > 1 or c.pass_mark) for c in cells):
            rows.append({"prompt_id": matrix.prompts[index].id, "index": index,
                         "cells_html": mark_safe("".join(verdict_cell_html(cell_view(c)) for c in cells))})
    return [{"variants": list(matrix.variants), "rows": rows}] if rows else []
