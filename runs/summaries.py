"""A finished run's summary row for the pages across runs (``RunSummary``): how it is stored. Finishing a run
stores it from the matrix its aggregates were read off (``records.finish_run``); the pages across runs
(``runs.across.figures``) rebuild a stale or missing one through the same ``store``."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from .engine import across as engine
from .engine.matrix import Matrix
from .models import Run, RunSummary
from .spec import RunRefused, parsed_blueprint


def models_key(data: dict) -> str:
    """The summary's models, one a line between newlines, so that a model's runs are found with ``contains``."""
    models = sorted({v["model"] for v in data["variants"].values()})
    return "\n" + "\n".join(models) + "\n" if models else ""


def store(run: Run, data: dict) -> None:
    """Store ``data`` as ``run``'s summary at the version and status read with the run (a reader that finds
    either moved builds it again)."""
    fields = {"results_version": run.results_version, "status": run.status, "shape": engine.SUMMARY_SHAPE,
              "models_key": models_key(data), "data": data, "baseline": {}, "built_at": timezone.now()}
    updated = RunSummary.objects.filter(run_id=run.pk).update(**fields)
    if not updated:
        try:
            with transaction.atomic():
                RunSummary.objects.create(run_id=run.pk, **fields)
        except IntegrityError:  # another request stored it first: the same figures
            pass


def store_finished(run: Run, matrix: Matrix, critical=None) -> dict | None:
    """Summarise a run that has just finished from ``matrix`` (the one its stored figures were read off) and
    store it; None when its revision no longer parses. ``critical(prompts)``: the ids of its responses that
    failed a critical point (``records.critical_failed``; the deal-breaker bound counts them)."""
    try:
        prompts = parsed_blueprint(run.revision).prompts
    except RunRefused:
        return None
    data = engine.summarise(matrix, prompts, critical_failed=critical(prompts) if critical else frozenset())
    store(run, data)
    return data
