"""``GET /api/runs/<id>/compare[?base=<id>]``: the decisions ``manage.py compare --json`` prints.

Without ``base``: every two model variants of the run, each the difference of the first's mean and the second's
with its 95% interval and a verdict (``better``, ``worse``, ``cant_tell``), and each variant's mean with its
interval. With ``base`` (a run of the same blueprint): each variant of the run against the same variant of the
base, prompts matched by id (those whose content changed are left out and named), the cells that changed under
the FDR rule, and ``regression``: whether some variant fails the gate ``manage.py compare --fail-on-regression``
applies (``runs.engine.stats.gate``: a one-sided paired sign-flip test per variant, Holm-adjusted over the
variants compared, family-wise level 0.1%, on a variant whose verdict is also "worse"), with ``gate``: that rule,
its level, and per variant ``{"delta", "n", "p", "pHolm", "fails"}``.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from evalsite.api import api_view, error

from . import compare as run_compare
from .models import Run
from .spec import RunRefused


def _run(pk) -> Run:
    return get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=pk)


@api_view
@require_GET
def compare(request, run_id):
    run = _run(run_id)
    base = None
    raw = request.GET.get("base", "").strip()
    if raw:
        try:
            base_id = int(raw)
        except ValueError:
            return error(400, f"`base` must be a run id, not '{raw[:40]}'")
        base = Run.objects.select_related("blueprint", "revision").filter(pk=base_id).first()
        if base is None:
            return error(404, f"no run {base_id}")
    try:
        found = run_compare.decisions(run, base)
    except run_compare.CannotCompare as exc:
        return error(400, str(exc))
    except RunRefused as exc:  # a revision that no longer parses cannot have run
        return error(409, f"this run's blueprint revision can no longer be read: {exc.message}"[:300])
    return JsonResponse(found.to_dict(), json_dumps_params={"ensure_ascii": False})
