"""Run pages: start a run from a blueprint, watch it, control it.

The run page polls its progress fragment through htmx and stops polling
(status 286) when the run ends.
"""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from blueprints.models import Blueprint

from . import services
from .models import Response, Run

CONTROLS = ("cancel", "resume", "retry-failed")


@require_POST
def start(request):
    blueprint = get_object_or_404(Blueprint, slug=request.POST.get("blueprint", ""))
    revision = blueprint.current_revision
    number = request.POST.get("revision")
    if number and revision and str(revision.number) != number:
        revision = get_object_or_404(blueprint.revisions, number=number)
    try:
        run = services.start_run(blueprint, revision=revision, models=request.POST.getlist("models") or None,
                                 judges=request.POST.getlist("judges") or None, source="web")
    except services.RunRefused as refused:
        messages.error(request, f"Cannot run: {refused}")
        return redirect(blueprint.get_absolute_url())
    return redirect("runs:detail", run.pk)


def _fragment(request, name):
    return f"runs/run_detail.html#{name}" if request.htmx else "runs/run_detail.html"


@require_safe
def detail(request, run_id):
    run = get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=run_id)
    context = {"run": run, "variants": sorted((run.aggregates or {}).get("variants", {}).items(),
                                              key=lambda kv: -(kv[1]["mean"] if kv[1]["mean"] is not None else -1))}
    if request.htmx and run.is_finished and request.GET.get("poll"):
        response = render(request, "runs/run_detail.html#progress", context)
        response.status_code = HttpResponseStopPolling.status_code
        return response
    if not run.is_finished:
        context["recent_failures"] = Response.objects.filter(run=run, status="failed").order_by("-finished_at")[:5]
    return render(request, _fragment(request, "progress") if request.GET.get("poll") else "runs/run_detail.html",
                  context)


@require_POST
def control(request, run_id, action):
    if action not in CONTROLS:
        raise Http404("unknown action")
    run = get_object_or_404(Run, pk=run_id)
    if action == "cancel":
        services.cancel_run(run)
        messages.info(request, "Cancelled: no new item starts; finished items are kept.")
    elif action == "resume":
        count = services.resume_run(run)
        messages.info(request, f"Resumed: {count} item{'s' if count != 1 else ''} handed to the workers.")
    elif action == "retry-failed":
        count = services.retry_failed(run)
        messages.info(request, f"Retrying {count} item{'s' if count != 1 else ''} that ended in error.")
    return redirect("runs:detail", run.pk)
