"""The Pairs page for people: the next blind pair, a judgement stored and revealed (``run_pairs`` for one run,
``blueprint_pairs`` across a blueprint's recent runs). What both Pairs pages share is ``scope``."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from ..models import PairJudgement
from ..pages import with_csp
from .llm_judge import judging_context
from .scope import (MAX_ID_DIGITS, SESSION_WHO, Refused, Scope, blueprint_scope, judgement_fields, next_pair,
                    offered_pair, page_context, pair_context, run_scope, who_of)


def _page(request, scope: Scope, *, judging: bool = True, **extra) -> dict:
    """The page's context; ``judging`` False for a fragment without the LLM judge's section."""
    return page_context(request, scope, judging=judging_context(scope) if judging else None, **extra)


# --- views -----------------------------------------------------------------------------------


def _pairs(request, scope: Scope):
    if request.method == "POST":
        return _judge(request, scope)
    judged = request.GET.get("judged", "")
    if judged:
        revealed = get_object_or_404(scope.people_judgements().select_related("left", "right"),
                                     pk=_digits_or_404(judged))
        return render(request, "runs/pairs.html", _page(request, scope, revealed=revealed))
    return render(request, "runs/pairs.html", _page(request, scope, pair=next_pair(scope, who_of(request))))


def _digits_or_404(value: str) -> int:
    if not value.isdigit() or len(value) > MAX_ID_DIGITS:
        raise Http404("no such judgement")
    return int(value)


def _judge(request, scope: Scope):
    template = "runs/pairs.html#judged" if request.htmx else "runs/pairs.html"
    judging = not request.htmx  # the fragment has no LLM judge section
    try:
        left, right = offered_pair(scope, request.POST)
    except Refused as refused:
        return render(request, template, _page(request, scope, judging=judging, error=refused.message,
                                                  pair=next_pair(scope, who_of(request))))
    try:
        fields = judgement_fields(request.POST)
    except Refused as refused:
        typed = {"winner": request.POST.get("winner", ""), "who": request.POST.get("who", "")[:150],
                 "reason": request.POST.get("reason", "")[:PairJudgement.MAX_REASON_CHARS]}
        return render(request, template, _page(request, scope, judging=judging, error=refused.message,
                                                  typed=typed, pair=pair_context(scope, left, right)))
    request.session[SESSION_WHO] = fields["who"]
    judgement = PairJudgement.objects.create(left=left, right=right, **fields)
    if not request.htmx:
        return redirect(f"{scope.url}{'&' if scope.run is None else '?'}judged={judgement.pk}")
    return render(request, template, _page(request, scope, judging=False, revealed=judgement))


@require_http_methods(["GET", "POST"])
@with_csp
def run_pairs(request, run_id):
    """One run's pairs: GET shows the next blind pair (``?judged=<id>``: who was who in a judgement); POST
    stores a judgement and reveals the models."""
    return _pairs(request, run_scope(run_id))


@require_http_methods(["GET", "POST"])
@with_csp
def blueprint_pairs(request):
    """The same across the recent runs of ``?blueprint=<slug>``."""
    slug = request.GET.get("blueprint", "").strip()
    if not slug:
        raise Http404("which blueprint? ?blueprint=<slug>")
    return _pairs(request, blueprint_scope(slug))
