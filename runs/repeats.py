"""The judges' flip rate of stored runs: their judged points' verdicts, read in one query and counted by the
engine (``runs.engine.repeats``, the one place the rule lives)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from django.db.models import QuerySet

from runs.engine.repeats import FlipReport, flip_report

from .models import PointAssessment, Run

_KEPT = 16  # reports kept in this process, by run and results version
_REPORTS: OrderedDict[tuple, FlipReport] = OrderedDict()
_LOCK = threading.Lock()


def judge_repeats(run: Run) -> int:
    """How many times the run asked each judge about each point (1: once, as runs always did)."""
    plan = run.judges if isinstance(run.judges, dict) else {}
    return plan.get("repeats") or 1


def run_flips(run: Run) -> FlipReport | None:
    """The flip rate of a finished run that asked its judges more than once; None otherwise.

    One query over the run's judged points; the report is kept by the run's ``results_version`` (which moves
    whenever a point is stored) and the time it finished, so a page that shows it again reads nothing.
    """
    repeats = judge_repeats(run)
    if repeats < 2 or not run.is_finished:
        return None
    key = (run.pk, run.results_version, run.finished_at)
    with _LOCK:
        kept = _REPORTS.get(key)
    if kept is not None:
        return kept
    report = flips_of(PointAssessment.objects.filter(response__run_id=run.pk), repeats)
    with _LOCK:
        _REPORTS[key] = report
        while len(_REPORTS) > _KEPT:
            _REPORTS.popitem(last=False)
    return report


def flips_of(points: QuerySet, repeats: int) -> FlipReport:
    """The flip rate over some ``PointAssessment`` rows (one run's, or those of several runs)."""
    verdicts = points.filter(kind="judged").values_list("verdicts", flat=True).iterator(chunk_size=2000)
    return flip_report(verdicts, repeats)


def runs_flips(runs: QuerySet) -> tuple[FlipReport, int]:
    """The flip rate over the runs among ``runs`` that asked their judges more than once (the judges
    page: each judge across runs), and how many such runs there were."""
    asked = list(runs.filter(judges__repeats__gt=1).values_list("pk", "judges__repeats"))
    if not asked:
        return FlipReport(repeats=0), 0
    repeats = max(k for _, k in asked)
    points = PointAssessment.objects.filter(response__run_id__in=[pk for pk, _ in asked])
    return flips_of(points, repeats), len(asked)
