"""The JSON across runs: ``GET /api/models/<model id>``, ``GET /api/runs-history/<blueprint id>`` (the
blueprints app owns ``/api/blueprints/``), ``GET /api/leaderboards/<tag>``. The same figures as the pages
(``runs.across.figures``): means with their 95% intervals, ranks, comparisons with the pinned baseline, drift."""

from __future__ import annotations

from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from blueprints.models import Blueprint
from evalsite.api import api_view, error

from .across import figures as across
from .engine import stats


def _json(data) -> JsonResponse:
    return JsonResponse(data, json_dumps_params={"ensure_ascii": False})


def _figures(variant: dict) -> dict:
    return {k: variant[k] for k in ("mean", "low", "high", "n", "calls", "costUsd", "latencyMs")}


def _drift(d) -> dict:
    return {"model": d.model, "variant": d.variant_id, "run": d.run_id, "base": d.base_id,
            **across.comparison_json(d.comparison)}


@api_view
@require_GET
def model_detail(request, model_id):
    found = across.model_page(model_id)
    if found is None:
        return error(404, "no finished run took part with this model")
    runs = [{"run": r.info.pk, "blueprint": r.blueprint.slug, "revision": r.info.revision, "status": r.info.status,
             "finishedAt": r.info.when.isoformat(), "variant": r.variant_id, "rank": r.rank, "of": r.of,
             **_figures(r.variant)} for r in found.runs]

    def gap(g):
        return {"run": g.run_id, "prompt": g.prompt_id, "promptIndex": g.prompt_index, "variant": g.variant_id,
                "score": g.score, "peers": g.peers, "gap": g.gap, "response": g.response_id}

    return _json({"model": found.model, "runs": runs, "weakest": [gap(g) for g in found.weak],
                  "strongest": [gap(g) for g in found.strong], "drift": [_drift(d) for d in found.drift],
                  "coverage": {"total": found.total.to_dict() if found.total else None,
                               "perBlueprint": [{"blueprint": c.blueprint.slug, "run": c.info.pk,
                                                 **c.coverage.to_dict()} for c in found.coverage]},
                  "method": stats.METHOD})


@api_view
@require_GET
def blueprint_history(request, slug):
    blueprint = get_object_or_404(Blueprint, slug=slug)
    found = across.history(blueprint)
    runs = []
    for info in found.runs:
        entry = {"run": info.pk, "revision": info.revision, "status": info.status, "createdAt": info.created_at.isoformat(),
                 "finishedAt": info.finished_at.isoformat() if info.finished_at else None,
                 "variants": ({v: _figures(info.summary["variants"][v]) for v in info.summary["order"]}
                              if info.summary else None)}
        compared = found.compared.get(info.pk)
        if compared is not None:
            entry["baseline"] = {"pairs": {v: across.comparison_json(c) for v, c in compared["pairs"].items()},
                                 "changedPrompts": compared["changed"], "worse": compared["worse"]}
        runs.append(entry)
    revisions = [{"number": r["number"], "runs": r["runs"], "previous": r["previous"], "changedPrompts": r["changed"],
                  "addedPrompts": r["added"], "removedPrompts": r["removed"]} for r in found.revisions]
    return _json({"blueprint": blueprint.slug, "baseline": found.baseline.pk if found.baseline else None,
                  "runs": runs, "revisions": revisions, "method": stats.METHOD})


@api_view
@require_GET
def leaderboard(request, tag):
    found = across.tag_board(tag)
    if found is None:
        return error(404, "no blueprint has this tag")

    def row(r):
        return {"model": r.model, "rank": r.rank, "mean": r.mean, "low": r.low, "high": r.high,
                "blueprints": r.covered, "perBlueprint": r.per_blueprint,
                "coverage": r.coverage.to_dict() if r.coverage else None}

    return _json({"tag": tag, "blueprints": [b.slug for b in found.blueprints],
                  "runs": {b.slug: found.latest[b.pk].pk for b in found.blueprints if b.pk in found.latest},
                  "minimum": found.board.minimum, "ranked": [row(r) for r in found.board.ranked],
                  "apart": [row(r) for r in found.board.apart],
                  "rule": "mean over the latest done run of each blueprint; ranked when a model ran at least half "
                          "of the tag's blueprints; interval: a bootstrap over those blueprints"})
