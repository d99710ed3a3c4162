"""The pages of a run's insight: its findings, scanners, similarity and checked summary (loaded into the run page
and the simple view), and the buttons that ask for a similarity or a summary. Thin: the work is ``runs.insight``."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from . import insight
from .compare import decisions
from .models import Run
from .pages import with_csp


def _page_link(run_id: int, response_id: int) -> str:
    return reverse("runs:response", args=[run_id, response_id])


def _run_or_404(run_id: int) -> Run:
    return get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=run_id)


@require_safe
@with_csp
def run_insight(request, run_id):
    """The findings section: in place on the run page (htmx), or as a page of its own."""
    run = _run_or_404(run_id)
    context = insight.insight_context(run, _page_link)
    if request.htmx:
        return render(request, "runs/insight.html#insight", context)
    return render(request, "runs/insight.html", context)


@require_safe
@with_csp
def simple(request, run_id):
    """A run for people who do not write blueprints: the leaderboard with intervals, the findings, the summary."""
    run = _run_or_404(run_id)
    context = insight.insight_context(run, _page_link)
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

