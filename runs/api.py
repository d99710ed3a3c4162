"""A small JSON API: start a run, read its status and progress, read its results, control it.

When ``EVALSITE_API_TOKEN`` is set every call needs ``Authorization: Bearer <token>``;
without it the API (like every page) answers only to the loopback address
(``evalsite.security.AccessMiddleware``). Requests that change
anything must send JSON (``Content-Type: application/json``): a web page in
the user's browser cannot send that to us without a CORS preflight, which we
never grant, so a loopback-only API is not open to cross-site requests.
"""

from __future__ import annotations

import json
from functools import wraps

from django.db import transaction
from django.http import Http404, JsonResponse
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from blueprints.models import Blueprint, ModelCollection
from blueprints.editing import create_from_text
from blueprints.spec.extensions import MAX_TRIALS

from . import review, trust
from . import spec as run_spec
from . import start as run_start
from . import work as run_work
from .exports import run_to_json
from .models import Annotation, Response, Run


def _error(status: int, message: str, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def api_view(view):
    """JSON in, JSON out. Who may call is decided for the whole site (evalsite.security.AccessMiddleware)."""
    @csrf_exempt
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method == "POST" and request.content_type != "application/json":
            return _error(415, "send a JSON body with Content-Type: application/json")
        try:
            response = view(request, *args, **kwargs)
        except Http404 as exc:  # the API answers JSON, never the site's HTML page
            return _error(404, str(exc) or "not found")
        if response.status_code == 405 and not response.get("Content-Type", "").startswith("application/json"):
            allowed = response.get("Allow", "")
            return _error(405, f"{request.method} is not allowed here; use {allowed}", allowed=allowed.split(", "))
        return response

    return wrapper


def _refuse_constant(name: str):
    raise ValueError(f"`{name}` is not a JSON value")


def _body(request) -> dict | JsonResponse:
    try:
        data = json.loads(request.body or b"{}", parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return _error(400, f"the body is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        return _error(400, "the body is not usable JSON: it is nested too deeply")
    except ValueError as exc:  # NaN/Infinity, an int of thousands of digits, bytes that are not UTF-8
        return _error(400, f"the body is not usable JSON: {exc}"[:300])
    if not isinstance(data, dict):
        return _error(400, "the body must be a JSON object")
    return data


def run_status(run: Run, request) -> dict:
    return {
        "id": run.pk,
        "blueprint": run.blueprint.slug,
        "revision": run.revision.number,
        "status": run.status,
        "label": run.label,
        "name": run.name,
        "items": {"total": run.items_total, "done": run.items_done, "failed": run.items_failed},
        "judgeCalls": {"total": run.judge_calls_total, "done": run.judge_calls_done,
                       "failed": run.judge_calls_failed},
        "waiting": run.waiting,
        "problems": run.options.get("problems", []),
        "createdAt": run.created_at.isoformat(),
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "score": run.overall_score,
        "models": {k: {"mean": v["mean"], "std": v["std"], "n": v["n"], "notEvaluated": v["notEvaluated"]}
                   for k, v in (run.aggregates or {}).get("variants", {}).items()},
        "urls": {
            "status": request.build_absolute_uri(reverse("runs:api-run", args=[run.pk])),
            "results": request.build_absolute_uri(reverse("runs:api-results", args=[run.pk])),
            "page": request.build_absolute_uri(reverse("runs:detail", args=[run.pk])),
        },
    }


def _strings(data: dict, key: str) -> list[str] | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"`{key}` must be a list of model ids")
    return [v for v in value if v]


def _trials(data: dict) -> int | None:
    value = data.get("trials")
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TRIALS:
        raise ValueError(f"`trials` must be a whole number from 1 to {MAX_TRIALS}")
    return value


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
    try:
        models, judges = _strings(data, "models"), _strings(data, "judges")
        trials = _trials(data)
    except ValueError as exc:
        return _error(400, str(exc))
    with transaction.atomic():
        if text is not None and slug:
            blueprint, _ = Blueprint.objects.get_or_create(slug=slug, defaults={"title": slug})
            blueprint.save_revision(text, summary="Sent to the API")
        elif text is not None:
            blueprint, _ = create_from_text(text, summary="Sent to the API")
        else:
            blueprint = Blueprint.objects.filter(slug=slug).first()
            if blueprint is None:
                return _error(404, f"no blueprint with the id '{slug}'")
        try:
            run = run_start.start_run(blueprint, models=models, judges=judges, fresh=bool(data.get("fresh")),
                                     trials=trials, source="api")
        except run_spec.RunRefused as refused:
            transaction.set_rollback(text is not None and not slug)  # keep nothing from a refused one-off text
            return _error(422, refused.message, problems=refused.problems, blueprint=blueprint.slug)
    run.refresh_from_db()  # with inline tasks (tests), the run has already finished on commit
    return JsonResponse(run_status(run, request), status=201)


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
    if action not in ("cancel", "resume", "retry-failed", "rename"):
        return _error(404, f"unknown action '{action}': use cancel, resume, retry-failed or rename")
    run = _run_or_404(run_id)
    if action == "rename":
        data = _body(request)
        if isinstance(data, JsonResponse):
            return data
        if not isinstance(data.get("name"), str):
            return _error(400, "send {\"name\": \"...\"} (an empty name gives the run back its number)")
        try:
            run.rename(data["name"])
        except ValidationError as exc:
            return _error(400, " ".join(exc.messages))
    elif action == "cancel":
        run_work.cancel_run(run)
    elif action == "resume":
        run_work.resume_run(run)
    elif action == "retry-failed":
        run_work.retry_failed(run)
    run.refresh_from_db()
    return JsonResponse(run_status(run, request))


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
        overrides = run_work.rerun_response(run, response.pk)
    except run_work.RerunRefused as refused:
        return _error(409, str(refused))
    run.refresh_from_db()
    return JsonResponse({**run_status(run, request), "overridesRemoved": overrides}, status=202)


@api_view
@require_http_methods(["GET", "POST", "DELETE"])
def response_annotation(request, run_id, response_id):
    """GET the annotation (null when none); POST {"thumbs": "up"|"down"|null, "comment": "...", "who": "..."}
    sets it; DELETE removes it."""
    _, response = _response_or_404(run_id, response_id)
    if request.method == "DELETE":
        review.save_annotation(response, thumbs="", comment="")
    elif request.method == "POST":
        data = _body(request)
        if isinstance(data, JsonResponse):
            return data
        wrong = [k for k in ("thumbs", "comment", "who") if data.get(k) is not None and not isinstance(data[k], str)]
        if wrong:
            return _error(400, f"{', '.join(wrong)} must be text (thumbs: \"up\", \"down\" or null)")
        unknown = sorted(set(data) - {"thumbs", "comment", "who"})
        if unknown:
            return _error(400, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: send thumbs, "
                               f"comment and who")
        try:
            review.save_annotation(response, thumbs=data.get("thumbs") or "", comment=data.get("comment") or "",
                                   who=data.get("who") or "")
        except review.AnnotationRefused as refused:
            return _error(400, str(refused))
    annotation = Annotation.objects.filter(response=response).first()
    return JsonResponse({"response": response.pk, "annotation": annotation.to_export() if annotation else None},
                        json_dumps_params={"ensure_ascii": False})


@api_view
@require_GET
def judges(request):
    """How far to trust each judge model, from reviewers' overrides (``?blueprint=<slug>``, ``?run=<id>``)."""
    responses = Response.objects.all()
    if request.GET.get("blueprint"):
        responses = responses.filter(run__blueprint=_blueprint_or_404(request.GET["blueprint"]))
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


# --- the library: blueprints and collections -----------------------------------------------------


def _blueprint_or_404(slug: str) -> Blueprint:
    blueprint = Blueprint.objects.filter(slug=slug).first()
    if blueprint is None:
        raise Http404(f"no blueprint with the id '{slug}'")
    return blueprint


def _blueprint_json(blueprint: Blueprint, request) -> dict:
    return {"id": blueprint.slug, "title": blueprint.title, "tags": blueprint.tags,
            "revision": blueprint.current_revision.number if blueprint.current_revision else None,
            "updatedAt": blueprint.updated_at.isoformat(),
            "urls": {"page": request.build_absolute_uri(blueprint.get_absolute_url())}}


@api_view
@require_http_methods(["GET", "DELETE"])
def blueprint_detail(request, slug):
    """GET: the blueprint; DELETE: delete it with its revisions and runs (runs still going are cancelled first)."""
    blueprint = _blueprint_or_404(slug)
    if request.method == "DELETE":
        summary = blueprint.deletion_summary()
        blueprint.delete()
        return JsonResponse({"deleted": {"blueprint": slug, "revisions": summary["revisions"],
                                         "runs": summary["runs"], "responses": summary["responses"]},
                             "cancelled": summary["running"]})
    return JsonResponse(_blueprint_json(blueprint, request))


@api_view
@require_POST
def blueprint_rename(request, slug):
    blueprint = _blueprint_or_404(slug)
    data = _body(request)
    if isinstance(data, JsonResponse):
        return data
    if not isinstance(data.get("id"), str):
        return _error(400, 'send {"id": "<new id>"}')
    try:
        blueprint.rename(data["id"].strip())
    except ValidationError as exc:
        return _error(400, " ".join(exc.messages))
    return JsonResponse(_blueprint_json(blueprint, request))


def _collection_or_404(name: str) -> ModelCollection:
    collection = ModelCollection.objects.filter(name=name).first()
    if collection is None:
        raise Http404(f"no model collection named '{name}'")
    return collection


@api_view
@require_http_methods(["GET", "DELETE"])
def collection_detail(request, name):
    collection = _collection_or_404(name)
    if request.method == "DELETE":
        collection.delete()
        return JsonResponse({"deleted": {"collection": name}})
    return JsonResponse({"name": collection.name, "models": collection.models, "source": collection.source})


@api_view
@require_POST
def collection_rename(request, name):
    collection = _collection_or_404(name)
    data = _body(request)
    if isinstance(data, JsonResponse):
        return data
    if not isinstance(data.get("name"), str):
        return _error(400, 'send {"name": "<NEW NAME>"}')
    try:
        collection.rename(data["name"])
    except ValidationError as exc:
        return _error(400, " ".join(exc.messages))
    return JsonResponse({"name": collection.name, "models": collection.models, "source": collection.source})
