"""The pages of a run's insight: its findings, scanners, similarity and checked summary (loaded into the run page
and the simple view), and the buttons that ask for a similarity or a summary. Thin: the work is ``runs.insight``."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST, require_safe

from . import insight
from .compare import decisions
from .engine.scanners import KINDS, LABELS
from .models import Run
from .pages import with_csp


def _run_or_404(run_id: int) -> Run:
    return get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=run_id)


def _cell_links(run: Run, made: insight.Insight) -> dict[tuple[str, str], str]:
    link = reverse("runs:response", args=[run.pk, 987654321])
    index = {p.id: i for i, p in enumerate(made.matrix.prompts)}
    out = {}
    for f in made.findings:
        for prompt_id, variant_id in f.cells:
            cell = made.matrix.cell(index.get(prompt_id, -1), variant_id)
            if cell is not None and cell.response_id is not None:
                out[(prompt_id, variant_id)] = link.replace("987654321", str(cell.response_id))
    return out


def _scanner_rows(made: insight.Insight) -> list[dict]:
    rows = []
    for variant in made.matrix.variants:
        counts = []
        for kind in KINDS:
            count = made.scan.counts.get(kind, {}).get(variant)
            counts.append(count)
        rows.append({"variant": variant, "counts": counts})
    return rows


def insight_context(run: Run) -> dict:
    """What the findings section shows (the run page's, the simple view's and the report's)."""
    try:
        made = insight.insight_of(run)
    except insight.NoInsight as why:
        return {"run": run, "unavailable": str(why)}
    links = _cell_links(run, made)
    row = insight.stored(run)
    similarity = row.similarity if row is not None and row.similarity_state == "done" else None
    summary = row.summary if row is not None and row.summary_state == "done" else None
    return {
        "run": run,
        "findings": [{"finding": f, "cells": [(c, links.get(c)) for c in f.cells[:8]], "more": max(0, len(f.cells) - 8)}
                     for f in made.findings],
        "scanner_kinds": [(k, LABELS[k]) for k in KINDS],
        "scanner_rows": _scanner_rows(made),
        "row": row,
        "similarity": similarity,
        "similarity_svg": mark_safe(similarity["svg"]) if similarity and similarity.get("svg") else None,
        "similarity_stale": row is not None and row.similarity_version not in (None, run.results_version),
        "summary": summary,
        "summary_stale": row is not None and row.summary_version not in (None, run.results_version),
        "accepted": [c for c in (summary or {}).get("claims", []) if c.get("ok")],
        "refused": [c for c in (summary or {}).get("claims", []) if not c.get("ok")],
        "summary_model": insight.summary_model(),
        "embeddings_model": insight.embeddings_model(),
    }


@require_safe
@with_csp
def run_insight(request, run_id):
    """The findings section: in place on the run page (htmx), or as a page of its own."""
    run = _run_or_404(run_id)
    context = insight_context(run)
    if request.htmx:
        return render(request, "runs/insight.html#insight", context)
    return render(request, "runs/insight.html", context)


@require_safe
@with_csp
def simple(request, run_id):
    """A run for people who do not write blueprints: the leaderboard with intervals, the findings, the summary."""
    run = _run_or_404(run_id)
    context = insight_context(run)
    if "unavailable" not in context:
        found = decisions(run)
        context["leaderboard"] = [(v, found.models[v]) for v in found.models]
        context["decided"] = [p for p in found.pairs if p.verdict != "cant_tell"]
        context["undecided"] = sum(1 for p in found.pairs if p.verdict == "cant_tell")
    return render(request, "runs/simple.html", context)


@require_POST
def ask(request, run_id, what):
    """Queue a similarity or a summary for a finished run (``what``: similarity or summary)."""
    run = _run_or_404(run_id)
    back = reverse("runs:detail", args=[run.pk]) + "#insight"
    if what not in ("similarity", "summary"):
        messages.error(request, "Ask for a similarity or a summary.")
        return redirect(back)
    if not run.is_finished:
        messages.error(request, f"Run {run.pk} is {run.status}: wait until it has finished.")
        return redirect(back)
    wanted = insight.embeddings_model() if what == "similarity" else insight.summary_model()
    if not wanted:
        setting = "EVALSITE_EMBEDDINGS_MODEL" if what == "similarity" else "EVALSITE_SUMMARY_MODEL"
        messages.error(request, f"No model for the {what}: set {setting} to a provider:model id and restart.")
        return redirect(back)
    from django_q.tasks import async_task

    row, _ = insight.RunInsight.objects.get_or_create(run=run)
    state = row.similarity_state if what == "similarity" else row.summary_state
    if state == "working":
        messages.info(request, f"The {what} is already being made.")
        return redirect(back)
    async_task("runs.tasks.insight_part", run.pk, what, task_name=f"run {run.pk}: {what}")
    messages.success(request, f"The {what} is being made with {wanted}; this page shows it when it is ready.")
    return redirect(back)

