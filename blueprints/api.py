"""The JSON API of the library: read, rename and delete blueprints and model collections."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404, JsonResponse
from django.views.decorators.http import require_http_methods, require_POST

from evalsite.api import api_view, body, error

from .models import (
    Blueprint,
    BlueprintIdError,
    ModelCollection,
    collection_name_problem,
    model_ids_problems,
    shown_id,
)


def blueprint_or_404(slug: str) -> Blueprint:
    blueprint = Blueprint.objects.filter(slug=slug).first()
    if blueprint is None:
        raise Http404(f"no blueprint with the id '{shown_id(slug)}'")
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
    blueprint = blueprint_or_404(slug)
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
    blueprint = blueprint_or_404(slug)
    data = body(request)
    if isinstance(data, JsonResponse):
        return data
    if not isinstance(data.get("id"), str):
        return error(400, 'send {"id": "<new id>"}')
    try:
        blueprint.rename(data["id"].strip())
    except BlueprintIdError as exc:  # the browser's message, naming the rule, and an id to try
        return error(400, " ".join(exc.messages), suggestedId=exc.suggestion)
    except ValidationError as exc:
        return error(400, " ".join(exc.messages))
    return JsonResponse(_blueprint_json(blueprint, request))


def _collection_json(collection: ModelCollection) -> dict:
    return {"name": collection.name, "models": collection.models, "source": collection.source}


def collection_or_404(name: str) -> ModelCollection:
    collection = ModelCollection.objects.filter(name=name).first()
    if collection is None:
        raise Http404(f"no model collection named '{shown_id(name)}'")
    return collection


@api_view
@require_http_methods(["GET", "PUT", "DELETE"])
def collection_detail(request, name):
    """GET: the collection; PUT ``{"models": [...]}``: create or replace it, each id checked as the Collections
    page checks it (the rule a run routes by); DELETE: delete it."""
    if request.method == "PUT":
        return _collection_put(request, name)
    collection = collection_or_404(name)
    if request.method == "DELETE":
        collection.delete()
        return JsonResponse({"deleted": {"collection": name}})
    return JsonResponse(_collection_json(collection))


MAX_COLLECTION_MODELS = 2000  # as many models as a run may have variants (Limits.max_variants' default)


def _collection_put(request, name):
    if request.content_type != "application/json":
        return error(415, "send a JSON body with Content-Type: application/json")
    data = body(request)
    if isinstance(data, JsonResponse):
        return data
    models = data.get("models")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        return error(400, 'send {"models": ["provider:model", ...]}: a list of model ids')
    if len(models) > MAX_COLLECTION_MODELS:
        return error(400, f"a collection lists at most {MAX_COLLECTION_MODELS:,} models; this one has "
                          f"{len(models):,}")
    problem = collection_name_problem(name)
    if problem is not None:
        return error(400, problem)
    problems = model_ids_problems(models, where=lambda n: f"models[{n - 1}]")
    if problems:
        return error(400, "Nothing was saved: some model ids can never run.", problems=problems)
    existed = ModelCollection.objects.filter(name=name).exists()
    try:
        collection, changed = ModelCollection.store(name, models, source="edited in evalsite")
    except ValidationError as exc:
        return error(400, " ".join(exc.messages))
    return JsonResponse({**_collection_json(collection), "changed": changed}, status=200 if existed else 201)


@api_view
@require_POST
def collection_rename(request, name):
    collection = collection_or_404(name)
    data = body(request)
    if isinstance(data, JsonResponse):
        return data
    if not isinstance(data.get("name"), str):
        return error(400, 'send {"name": "<NEW NAME>"}')
    try:
        collection.rename(data["name"])
    except ValidationError as exc:
        return error(400, " ".join(exc.messages))
    return JsonResponse(_collection_json(collection))
