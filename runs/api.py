"""A small JSON API: start a run, read its status and progress, read its results, control it.

When ``EVALSITE_API_TOKEN`` is set every call needs ``Authorization: Bearer <token>``;
without it the API (like every page) answers only to the loopback address
(``evalsite.security.AccessMiddleware``). Requests that change
anything must send JSON (``Content-Type: application/json``): a web page in
the user's browser cannot send that to us without a CORS preflight, which we
never grant, so a loopback-only API is not open to cross-site requests.
"""

from __future__ import annotations


from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from blueprints.api import blueprint_or_404
from blueprints.editing import create_from_text
from blueprints.models import Blueprint, BlueprintIdError, shown_id, validate_blueprint_id
from evalsite.api import api_view, body as _body, error as _error

from . import actions, repeats, trust
from . import spec as run_spec
from . import start as run_start
from . import work as run_work
from .exports import run_to_json
from .models import Annotation, PointAssessment, Response, Run
from .request import RunRequest, RunRequestError


def run_status(run: Run, request) -> dict:
    return {
        "id": run.pk,
        "blueprint": run.blueprint.slug,
        "revision": run.revision.number,
        "status": run.status,
        "label": run.label,
        "name": run.name,
        "items": {"total": run.items_total, "done": run.items_done, "failed": run.items_failed},
        # true while a worker makes a large run's items (docs/runs.md, "How many items")
        "itemsBeingMade": bool(run.options.get("makingItems")) and not run.is_finished,
        "judgeCalls": {"total": run.judge_calls_total, "done": run.judge_calls_done,
                       "failed": run.judge_calls_failed},
        "waiting": run.waiting,
        "problems": run.options.get("problems", []),
        "createdAt": run.created_at.isoformat(),
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "score": run.overall_score,
        "budgetUsd": run.budget_usd, "spentUsd": run.spent_usd, "stoppedReason": run.stopped_reason or None,
        # How many times each judge was asked about each point, and how often it changed its mind (docs/results.md,
        # "Judge flip rate"): null until the run has finished, and for a run asking once.
        "judgeRepeats": repeats.judge_repeats(run),
        "judgeFlips": _flips_json(run),
        "models": {k: {"mean": v["mean"], "std": v["std"], "n": v["n"], "notEvaluated": v["notEvaluated"],
                       "notRun": v.get("notRun", 0)}
                   for k, v in (run.aggregates or {}).get("variants", {}).items()},
        # Every call sent (each attempt of each item: a retry, a re-run and a cancel keep what they spent).
        "usage": {
            "candidates": {"calls": run.candidate_calls_sent, "inputTokens": run.candidate_input_tokens,
                           "outputTokens": run.candidate_output_tokens, "costUsd": run.candidate_cost_usd,
                           "callsWithUnknownCost": run.candidate_cost_unknown},
            "judges": {"calls": run.judge_calls_sent, "inputTokens": run.judge_input_tokens,
                       "outputTokens": run.judge_output_tokens, "costUsd": run.judge_cost_usd,
                       "callsWithUnknownCost": run.judge_cost_unknown},
        },
        "urls": {
            "status": request.build_absolute_uri(reverse("runs:api-run", args=[run.pk])),
            "results": request.build_absolute_uri(reverse("runs:api-results", args=[run.pk])),
            "page": request.build_absolute_uri(reverse("runs:detail", args=[run.pk])),
        },
    }


def _flips_json(run: Run) -> dict | None:
    report = repeats.run_flips(run)
    return report.to_json() if report is not None else None


@api_view
@require_POST
def start(request):
    data = _body(request)
    if isinstance(data, JsonResponse):
        return data
    text, slug = data.get("blueprint"), data.get("blueprintId")
    if text is not None and not isinstance(text, str):
        return _error(400, "`blueprint` must be the blueprint's text (YAML or JSON)")
    if text is None and not isinstance(slug, str):
        return _error(400, "send `blueprint` (its text) or `blueprintId` (a stored blueprint's id)")
    if slug is not None and not isinstance(slug, str):
        return _error(400, "`blueprintId` must be a string: the id of the blueprint to make or update")
    refused = _refused_new_id(slug) if text is not None and slug else None
    if refused is not None:
        return refused
    try:
        run_request = RunRequest.from_api(data)  # read once: `models: []` is refused, never "the blueprint's"
    except RunRequestError as exc:
        return _error(400, exc.message, field=exc.api_key)
    dry_run = data.get("dryRun", False)
    if not isinstance(dry_run, bool):
        return _error(400, "`dryRun` must be true or false")
    if dry_run:
        return _dry_run(text, slug, run_request)
    with transaction.atomic():
        if text is not None and slug:
            blueprint, _ = Blueprint.objects.get_or_create(slug=slug, defaults={"title": slug})
            blueprint.save_revision(text, summary="Sent to the API")
        elif text is not None:
            blueprint, _ = create_from_text(text, summary="Sent to the API")
        else:
            blueprint = Blueprint.objects.filter(slug=slug).first()
            if blueprint is None:
                return _error(404, f"no blueprint with the id '{shown_id(slug)}'")
        try:
            prepared = run_start.prepare(blueprint, run_request)
            run = run_start.start_prepared(blueprint, prepared, source="api")
        except run_spec.RunRefused as refused:
            transaction.set_rollback(text is not None and not slug)  # keep nothing from a refused one-off text
            return _error(422, refused.message, problems=refused.problems, blueprint=blueprint.slug,
                          **({"field": refused.field} if getattr(refused, "field", None) else {}))
    run.refresh_from_db()  # with inline tasks (tests), the run has already finished on commit
    return JsonResponse(run_status(run, request), status=201)


def _dry_run(text, slug, run_request: RunRequest) -> JsonResponse:
    """What the run would cost (``runs.start.prepare``): 200 with the estimate; nothing sent, nothing kept."""
    with transaction.atomic():
        try:
            if text is not None:
                blueprint, _ = create_from_text(text, summary="Sent to the API (dry run)")  # rolled back below
            else:
                blueprint = Blueprint.objects.filter(slug=slug).first()
                if blueprint is None:
                    return _error(404, f"no blueprint with the id '{shown_id(slug)}'")
            prepared = run_start.prepare(blueprint, run_request)
        except run_spec.RunRefused as refused:
            return _error(422, refused.message, problems=refused.problems,
                          **({"field": refused.field} if getattr(refused, "field", None) else {}))
        finally:
            transaction.set_rollback(True)
    return JsonResponse({"dryRun": True, "blueprint": slug or blueprint.slug,
                         **prepared.estimate.to_json(), "problems": prepared.planned.problems,
                         "confirmationNeeded": prepared.confirm_needed})


def _refused_new_id(slug: str) -> JsonResponse | None:
    """The 400 for a `blueprintId` that would make a new blueprint under an id the rule refuses (the browser's
    forms' message, naming the rule, and `suggestedId`); None when it is usable or names a stored blueprint."""
    if Blueprint.objects.filter(slug=slug).exists():
        return None  # sending text for a stored blueprint makes a new revision: its id does not change
    try:
        validate_blueprint_id(slug)
    except BlueprintIdError as exc:
        return _error(400, exc.messages[0], suggestedId=exc.suggestion)
    return None


def _run_or_404(run_id: int) -> Run:
    run = Run.objects.select_related("blueprint", "revision").filter(pk=run_id).first()
    if run is None:
        raise Http404(f"no run with the id {run_id}")
    return run


@api_view
@require_http_methods(["GET", "DELETE"])
def run_detail(request, run_id):
    """GET: the run's status; DELETE: delete it with its results (a run still going is cancelled first)."""
    run = _run_or_404(run_id)
    if request.method == "DELETE":
        gone = run_work.delete_run(run)
        return JsonResponse({"deleted": {"run": run_id, "responses": gone["responses"],
                                         "overrides": gone["overrides"]}, "wasRunning": gone["was_running"]})
    return JsonResponse(run_status(run, request))


@api_view
@require_GET
def run_results(request, run_id):
    run = get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=run_id)
    return JsonResponse(run_to_json(run), json_dumps_params={"ensure_ascii": False})


@api_view
@require_POST
def control(request, run_id, action):
    """cancel, resume, retry-failed or rename (``{"name": "..."}``): the same checks and words as the run page."""
    if action not in ("cancel", "resume", "retry-failed", "rename"):
        return _error(404, f"unknown action '{action}': use cancel, resume, retry-failed or rename")
    run = _run_or_404(run_id)
    data = {}
    if action in ("rename", "resume"):  # resume: an optional {"budgetUsd": n}, the run's new cap
        data = _body(request)
        if isinstance(data, JsonResponse):
            return data
    try:
        done = {"cancel": actions.cancel, "resume": lambda r: actions.resume(r, data.get("budgetUsd")),
                "retry-failed": actions.retry_failed,
                "rename": lambda r: actions.rename(r, data.get("name"))}[action](run)
    except actions.Refused as refused:
        return _error(refused.status, refused.message)
    run.refresh_from_db()
    return JsonResponse({**run_status(run, request), "message": done.message})


# --- one response: re-run it, annotate it ---------------------------------------------------------


def _response_or_404(run_id: int, response_id: int) -> tuple[Run, Response]:
    run = _run_or_404(run_id)
    response = Response.objects.filter(run=run, pk=response_id).first()
    if response is None:
        raise Http404(f"run {run_id} has no response with the id {response_id}")
    return run, response


@api_view
@require_POST
def response_rerun(request, run_id, response_id):
    """Generate and judge one response again, afresh; answers with the run's status (202: it is queued)."""
    run, response = _response_or_404(run_id, response_id)
    try:
        done = actions.rerun(run, response)
    except actions.Refused as refused:
        out = _error(refused.status, refused.message)
        if refused.retry_after_s:
            out.headers["Retry-After"] = str(max(1, round(refused.retry_after_s)))
        return out
    run.refresh_from_db()
    return JsonResponse({**run_status(run, request), "overridesRemoved": done.count, "message": done.message},
                        status=202)


@api_view
@require_http_methods(["GET", "POST", "DELETE"])
def response_annotation(request, run_id, response_id):
    """GET the annotation (null when none); POST {"thumbs": "up"|"down"|null, "comment": "...", "who": "..."}
    sets it; DELETE removes it."""
    _, response = _response_or_404(run_id, response_id)
    try:
        if request.method == "DELETE":
            actions.annotate(response, thumbs="", comment="", who="")
        elif request.method == "POST":
            data = _body(request)
            if isinstance(data, JsonResponse):
                return data
            unknown = sorted(set(data) - {"thumbs", "comment", "who"})
            if unknown:
                return _error(400, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: send thumbs, "
                                   f"comment and who")
            actions.annotate(response, thumbs=data.get("thumbs"), comment=data.get("comment"), who=data.get("who"))
    except actions.Refused as refused:
        return _error(refused.status, refused.message)
    annotation = Annotation.objects.filter(response=response).first()
    return JsonResponse({"response": response.pk, "annotation": annotation.to_export() if annotation else None},
                        json_dumps_params={"ensure_ascii": False})


@api_view
@require_http_methods(["POST", "DELETE"])
def point_review(request, run_id, response_id, position, what):
    """``override``: POST {"score": 0..1, "reason": "...", "who": "..."} sets the reviewer's score, DELETE removes
    it; ``confirm``: POST {"who": "..."} says the judges are right, DELETE takes it back."""
    if what not in ("override", "confirm"):
        return _error(404, f"unknown action '{what}': use override or confirm")
    _, response = _response_or_404(run_id, response_id)
    assessment = PointAssessment.objects.filter(response=response, position=position).first()
    if assessment is None:
        raise Http404(f"response {response_id} has no point {position}")
    data = {}
    if request.method == "POST":
        data = _body(request)
        if isinstance(data, JsonResponse):
            return data
    try:
        if what == "confirm":
            done = actions.confirm(assessment, confirmed=request.method == "POST", who=data.get("who") or "")
            message = done.message
        else:
            score = data.get("score") if request.method == "POST" else None
            if request.method == "POST" and score is None:
                return _error(400, 'send {"score": <0..1>, "reason": "..."} (DELETE removes the override)')
            outcome = actions.override(assessment, score, reason=data.get("reason") or "", who=data.get("who") or "")
            message = f"The response's score is {outcome.after} (it was {outcome.before})."
    except actions.Refused as refused:
        return _error(refused.status, refused.message)
    response.refresh_from_db()
    return JsonResponse({"response": response.pk, "position": position, "score": response.score,
                         "message": message})


@api_view
@require_GET
def judges(request):
    """How far to trust each judge model, from reviewers' overrides (``?blueprint=<slug>``, ``?run=<id>``)."""
    responses = Response.objects.all()
    if request.GET.get("blueprint"):
        responses = responses.filter(run__blueprint=blueprint_or_404(request.GET["blueprint"]))
    if request.GET.get("run"):
        try:
            responses = responses.filter(run=_run_or_404(int(request.GET["run"])))
        except ValueError:
            return _error(400, "run must be a run's number")
    report = trust.judge_trust(responses)
    return JsonResponse({
        "reviewedResponses": report.reviewed_responses, "overrides": report.overrides,
        "tolerance": trust.TOLERANCE,
        "judges": [{"model": j.model, "points": j.points, "stands": j.stands, "agreement": j.agreement,
                    "meanBias": j.mean_bias, "overridden": j.overridden, "runs": sorted(j.runs),
                    "wrong": [{"run": w.run_id, "response": w.response_id, "position": w.position,
                               "promptId": w.prompt_id, "model": w.variant_id, "point": w.text,
                               "judgeScore": w.judge_score, "reviewerScore": w.human_score} for w in j.wrong],
                    "wrongCount": j.wrong_count} for j in report.judges],
    }, json_dumps_params={"ensure_ascii": False})
