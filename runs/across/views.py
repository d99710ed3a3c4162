"""Pages across runs: a blueprint's history (with its pinned baseline), a model's runs, leaderboards by tag, the
overview (what changed since the last visit, drift), and the run page's "compared with the baseline" part.
Thin views: the figures come from ``runs.across`` (summaries of each run's matrix) and ``runs.engine.stats``."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.core.signing import BadSignature
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_safe

from blueprints.models import Blueprint

from ..followup import links as followup_links
from . import figures as across
from ..engine import across as engine
from ..models import Run
from ..templatetags.results import heat, score2
from ..pages import with_csp

LAST_VISIT_COOKIE = "evalsite_overview_seen"
LAST_VISIT_MAX_AGE = 365 * 24 * 3600
OVERVIEW_BOARDS = 6  # tags whose leaderboard the overview shows (each has its own page)


def _blueprint(slug: str) -> Blueprint:
    return get_object_or_404(Blueprint.objects.only("pk", "slug", "title", "tags"), slug=slug)


@require_http_methods(["GET", "HEAD", "POST"])
@with_csp
def history(request, slug):
    blueprint = _blueprint(slug)
    if request.method == "POST":  # pin (run=<id>) or unpin (run empty) the baseline
        raw = request.POST.get("run", "").strip()
        run = None
        if raw:
            run = Run.objects.filter(pk=int(raw) if raw.isdigit() else 0, blueprint=blueprint).first()
            if run is None or not run.is_finished:
                messages.error(request, f"Cannot pin run {raw[:20]}: pin a finished run of this blueprint.")
                return redirect("runs:history", blueprint.slug)
        across.pin_baseline(blueprint, run, request.POST.get("who", ""))
        messages.info(request, f"Pinned {run.display_name} as the baseline." if run else "No baseline now.")
        return redirect("runs:history", blueprint.slug)
    found = across.history(blueprint)
    charts = [{"variant": variant_id, "model": engine.parse_variant(variant_id)[0], "svg": trend_svg(variant_id, points)}
              for variant_id, points in found.trends.items()]
    variants = list(found.trends)
    rows = []
    followup_of, followups = followup_links(blueprint.pk)
    for info in reversed(found.runs):
        rows.append({"info": info, "cells": figure_cells(info, variants), "compared": found.compared.get(info.pk),
                     "followup_of": followup_of.get(info.pk), "followups": followups.get(info.pk, [])})
    context = {"blueprint": blueprint, "history": found, "charts": charts, "rows": rows,
               "variants": [{"id": v, "model": engine.parse_variant(v)[0]} for v in variants],
               "pinnable": [i for i in reversed(found.runs) if i.finished]}
    return render(request, "runs/history.html", context)


def figure_cells(info, variants: list[str]) -> str:
    """A history row's cells, one per variant: the mean (as the run page colours it) and its 95% interval.
    Written here rather than in the template: 100 runs x 10 variants of template filters cost ~150 ms."""
    out = []
    for variant_id in variants:
        figures = info.summary["variants"].get(variant_id) if info.summary else None
        if figures and figures["mean"] is not None:
            mean = figures["mean"]
            interval = (f' <span class="muted small">{score2(figures["low"])} – {score2(figures["high"])}</span>'
                        if figures["low"] is not None else "")
            out.append(f'<td class="num"><span class="score-chip {heat(mean)}">{score2(mean)}</span>{interval}</td>')
        elif info.summary is not None:
            out.append('<td class="num"><span class="muted">–</span></td>')
        else:
            out.append(f'<td class="num"><span class="muted small">{"unreadable" if info.finished else "in progress"}'
                       f'</span></td>')
    return mark_safe("".join(out))


CHART_W, CHART_H, CHART_PAD = 560, 120, 14


def trend_svg(variant_id: str, points) -> str:
    """One variant's mean run by run (oldest left) as an SVG: a dot per run, a bar for its 95% interval, a line
    through the means. Decoration for the table, which has the same numbers."""
    drawn = engine.trend_svg_points(points, CHART_W, CHART_H, CHART_PAD)
    name = escape(variant_id)
    parts = [f'<svg class="trend-chart" viewBox="0 0 {CHART_W} {CHART_H}" width="{CHART_W}" height="{CHART_H}" '
             f'role="img" aria-label="Mean of {name} in each run">',
             f'<line x1="{CHART_PAD}" y1="{CHART_PAD}" x2="{CHART_W - CHART_PAD}" y2="{CHART_PAD}" stroke="#ddd"/>',
             f'<line x1="{CHART_PAD}" y1="{CHART_H - CHART_PAD}" x2="{CHART_W - CHART_PAD}" '
             f'y2="{CHART_H - CHART_PAD}" stroke="#ddd"/>',
             f'<text x="0" y="{CHART_PAD + 4}" font-size="9">1</text>'
             f'<text x="0" y="{CHART_H - CHART_PAD + 4}" font-size="9">0</text>']
    line = " ".join(f"{p['x']},{p['y']}" for p in drawn if p["y"] is not None)
    if line:
        parts.append(f'<polyline points="{line}" fill="none" stroke="#4a6fa5" stroke-width="1.5"/>')
    for p in drawn:
        if p["y"] is None:
            continue
        point = p["point"]
        if p["y_low"] is not None:
            parts.append(f'<line x1="{p["x"]}" x2="{p["x"]}" y1="{p["y_high"]}" y2="{p["y_low"]}" stroke="#4a6fa5" '
                         f'stroke-opacity="0.5" stroke-width="3"/>')
        interval = f" [{score2(point.low)} – {score2(point.high)}]" if point.low is not None else ""
        parts.append(f'<circle cx="{p["x"]}" cy="{p["y"]}" r="3" fill="#1f3b63"><title>Run {point.run_id} '
                     f'(revision {point.revision}): {score2(point.mean)}{interval}</title></circle>')
    parts.append("</svg>")
    return mark_safe("".join(parts))


@require_safe
def run_baseline(request, run_id):
    """The run page's "compared with the baseline" (loaded in place; the same URL is a plain page)."""
    run = get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=run_id)
    if not request.htmx:  # the whole story is on the history page
        return redirect(f"{reverse('runs:history', args=[run.blueprint.slug])}#run-{run.pk}")
    result = across.run_against_baseline(run) if run.is_finished else None
    context = {"run": run, "result": result,
               "pairs": sorted((result or {}).get("pairs", {}).items(), key=lambda kv: kv[0])}
    return render(request, "runs/history.html#run-baseline", context)


@require_safe
@with_csp
def model_detail(request, model_id):
    found = across.model_page(model_id)
    if found is None:
        raise Http404("no finished run took part with this model")
    return render(request, "runs/model.html", {"model": found})


@require_safe
def model_list(request):
    return render(request, "runs/models.html", {"models": across.model_list()})


@require_safe
def leaderboard(request, tag):
    board = across.tag_board(tag)
    if board is None:
        raise Http404("no blueprint has this tag")
    return render(request, "runs/leaderboard.html", {"board": board})


def _last_visit(request) -> datetime | None:
    try:
        raw = request.get_signed_cookie(LAST_VISIT_COOKIE, default=None, max_age=LAST_VISIT_MAX_AGE)
    except BadSignature:
        return None
    try:
        return datetime.fromisoformat(raw) if raw else None
    except ValueError:
        return None


@require_safe
def overview(request):
    last_visit = _last_visit(request)
    infos = across.finished_infos()
    recent = across.since(infos, last_visit)
    worse = across.worse_of(recent)
    blueprints = across.blueprints_of(i.blueprint_id for i in recent)
    tags = across.all_tags()
    every = list(Blueprint.objects.only("pk", "slug", "title", "tags"))
    boards = [(tag, across.tag_board(tag, infos, every)) for tag in list(tags)[:OVERVIEW_BOARDS]]
    context = {"last_visit": last_visit, "recent": [(i, blueprints.get(i.blueprint_id), worse.get(i.pk))
                                                      for i in recent[:50]],
               "more": max(0, len(recent) - 50), "drift": across.drift_of(infos), "tags": tags,
               "boards": [(t, b) for t, b in boards if b is not None], "models": across.model_list(infos)}
    context["drift_blueprints"] = across.blueprints_of(
        i.blueprint_id for i in infos if i.pk in {d.run_id for d in context["drift"]})
    context["drift_runs"] = {i.pk: i.blueprint_id for i in infos}
    if request.GET.get("part") == "home":  # the library's home page shows the same, and leaves the visit unseen
        return render(request, "runs/tags.html#overview-body", context)
    response = render(request, "runs/tags.html", context)
    response.set_signed_cookie(LAST_VISIT_COOKIE, timezone.now().isoformat(), max_age=LAST_VISIT_MAX_AGE,
                               httponly=True, samesite="Lax")
    return response
