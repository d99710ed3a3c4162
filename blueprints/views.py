"""Blueprint pages: library, import, blueprint, editor (live validation and preview), try a response, history.

Each view fetches (404 early), validates a form, calls a model method or
`blueprints.editing`, `preview`, `trying` and `importing`, and renders. A request from htmx gets the named fragment
of the same template; without htmx the same URL renders the whole page.
"""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Q
from django.db.models.functions import Lower
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from blueprints import editing, importing, trying
from blueprints import preview as previews
from blueprints.forms import (
    STARTER_TEXT,
    CompareForm,
    EditorForm,
    ImportConflictForm,
    ImportForm,
    NewBlueprintForm,
    RenameForm,
    TryForm,
)
from blueprints.models import (
    BLUEPRINT_ID_MAX_LENGTH,
    Blueprint,
    BlueprintRevision,
    ModelCollection,
    collection_name_problem,
    model_ids_problems,
    shown_id,
)

LIBRARY_PAGE_SIZE = 50
SORTS = {
    "name": (Lower("title").asc(), "slug"),
    "changed": ("-updated_at", "slug"),
}


def _fragment(request, template, fragment):
    return f"{template}#{fragment}" if request.htmx else template


# --- library ----------------------------------------------------------------------------


@require_http_methods(["GET", "HEAD", "POST"])
def home(request):
    """The library: every blueprint, searchable by title, tag and text. POST: rename or delete one by its id
    (``library_action``)."""
    if request.method == "POST":
        return library_action(request)
    if not Blueprint.objects.exists():
        importing.load_examples()  # a first visit starts with the examples
    query = request.GET.get("q", "").strip()
    tag = request.GET.get("tag", "").strip()
    sort = request.GET.get("sort", "name")
    if sort not in SORTS:
        sort = "name"
    blueprints = Blueprint.objects.for_library()
    if query:
        blueprints = blueprints.filter(
            Q(title__icontains=query) | Q(slug__icontains=query) | Q(tags_key__icontains=query)
            | Q(description__icontains=query) | Q(current_revision__text__icontains=query)
        )
    if tag:
        blueprints = blueprints.filter(tags_key__contains=f"|{tag}|")
    page = Paginator(blueprints.order_by(*SORTS[sort]), LIBRARY_PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = Blueprint.with_last_runs(page.object_list)
    context = {
        "page": page, "query": query, "tag": tag, "sort": sort, "total": Blueprint.objects.count(),
        "tags": _all_tags(), "id_max_length": BLUEPRINT_ID_MAX_LENGTH,
    }
    return render(request, _fragment(request, "blueprints/library.html", "results"), context)


def library_action(request):
    """Rename or delete a blueprint named by its id in the form (``id``), not in the address: the library's way
    to reach any stored id, even one made before the id rule that no address can hold (``a/../b``).

    ``action=rename`` with ``new_id`` (the rename form's checks); ``action=delete`` shows what goes with it and
    asks, then ``confirm=yes`` deletes.
    """
    action, slug = request.POST.get("action", ""), request.POST.get("id", "")
    blueprint = Blueprint.objects.filter(slug=slug).first()
    if blueprint is None or action not in ("rename", "delete"):
        messages.error(request, f"There is no blueprint with the id '{shown_id(slug)}'." if blueprint is None
                       else "Choose rename or delete.")
        return redirect("blueprints:home")
    if action == "rename":
        form = RenameForm({"slug": request.POST.get("new_id", "")}, blueprint=blueprint)
        if not form.is_valid():
            messages.error(request, f"The blueprint '{shown_id(slug)}' keeps its id: "
                                    + " ".join(form.errors["slug"]))
            return redirect(blueprint.library_url)
        blueprint.rename(form.cleaned_data["slug"])
        messages.success(request, f"The blueprint '{shown_id(slug)}' now has the id '{blueprint.slug}'.")
        return redirect(blueprint.get_absolute_url())
    summary = blueprint.deletion_summary()
    if request.POST.get("confirm") != "yes":
        return render(request, "blueprints/delete.html", {"blueprint": blueprint, "summary": summary,
                                                          "by_id": True})
    blueprint.delete()
    messages.success(request, f"Deleted the blueprint '{shown_id(slug)}' with "
                              f"{_count(summary['revisions'], 'revision')} and {_count(summary['runs'], 'run')}.")
    return redirect("blueprints:home")


def _all_tags():
    counts: dict[str, int] = {}
    for tags in Blueprint.objects.values_list("tags", flat=True):
        for t in tags or []:
            counts[t] = counts.get(t, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:30]


@require_POST
def add_examples(request):
    added = importing.load_examples()
    if added:
        messages.success(request, f"Added {len(added)} example blueprint{'s' if len(added) != 1 else ''}.")
    else:
        messages.info(request, "The example blueprints are already in the library.")
    return redirect("blueprints:home")


# --- making and importing ---------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def new_blueprint(request):
    form = NewBlueprintForm(request.POST if request.method == "POST" else None, initial={"text": STARTER_TEXT})
    if request.method == "POST" and form.is_valid():
        blueprint, revision = editing.create_from_text(form.cleaned_data["text"], slug=form.cleaned_data["slug"])
        _saved_message(request, revision, created=True)
        return redirect("blueprints:edit", slug=blueprint.slug)
    text = form["text"].value() or ""
    check = editing.check_text(text)
    return render(request, "blueprints/editor.html", {"form": form, "blueprint": None, "check": check})


@require_http_methods(["GET", "POST"])
def import_blueprints(request):
    """Files chosen one by one, a folder (read as ``import_blueprints`` reads one: the same ids and companion
    files), or pasted text."""
    form = ImportForm(request.POST, request.FILES) if request.method == "POST" else ImportForm()
    outcome = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        outcome = importing.ImportOutcome()
        if data["folder"]:
            _merge(outcome, importing.import_uploads(data["folder"], folder_name=data["folder_name"]))
        if data["files"]:
            _merge(outcome, importing.import_uploads(data["files"]))
        pasted = data["text"]
        if pasted.strip():  # the same text as a stored blueprint is that blueprint (importing.identify's rule)
            outcome.items.append(importing.import_pasted(pasted.replace("\r\n", "\n")))
        form = ImportForm()
    return render(request, "blueprints/import.html", _import_context(form, outcome))


def _merge(outcome, more):
    outcome.items.extend(more.items)
    outcome.collections.extend(more.collections)


def _import_context(form, outcome):
    from django.conf import settings

    return {"form": form, "outcome": outcome, "max_files": settings.DATA_UPLOAD_MAX_NUMBER_FILES}


@require_POST
def import_conflict(request):
    """The person's answer for a file whose id belongs to another suite: a new id, or a new revision."""
    form = ImportConflictForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(e for errors in form.errors.values() for e in errors)
        outcome = importing.ImportOutcome(items=[importing.ImportItem(
            form["path"].value() or "the file", None, "refused", f"nothing was imported: {problems}")])
    else:
        data = form.cleaned_data
        path = data["path"]
        outcome = importing.import_files([(path, data["text"], data["files"])], via="upload",
                                         folder_name=data["folder"], choices={path: form.as_choice()})
    return render(request, "blueprints/import.html", _import_context(ImportForm(), outcome))


# --- one blueprint ----------------------------------------------------------------------


@require_safe
def detail(request, slug):
    blueprint, revision, result, preview = _current(slug)
    return render(request, "blueprints/blueprint_detail.html",
                  _detail_context(blueprint, revision, result, preview, _run_context(blueprint, revision, preview)))


def _current(slug: str):
    """A blueprint, its current revision, that revision parsed, and its preview (None where there is none)."""
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    revision = blueprint.current_revision
    lookup = revision.collections() if revision else ModelCollection.lookup()  # its own collections first
    result = revision.parse(lookup) if revision else None
    preview = previews.build_preview(result.blueprint, lookup) if result and result.blueprint else None
    return blueprint, revision, result, preview


def _detail_context(blueprint, revision, result, preview, run: dict) -> dict:
    return {
        "blueprint": blueprint, "revision": revision, "result": result, "preview": preview,
        "spec": result.blueprint if result else None,
        "description_html": editing.render_markdown(blueprint.description),
        "rename_form": RenameForm(initial={"slug": blueprint.suggested_id if blueprint.id_problem else blueprint.slug},
                                  blueprint=blueprint),
        **run,
    }


def _run_context(blueprint, revision, preview) -> dict:
    """Where the run form is: the runs app owns it (runs.views.run_form) and this page embeds it by its
    address; a draft has none."""
    if revision is None or preview is None:
        return {"run_url": None,
                "run_blocked": "Fix the errors in this blueprint before running it: drafts cannot run."}
    return {"run_url": reverse("runs:form", args=[blueprint.slug]), "run_blocked": None}


@require_http_methods(["GET", "POST"])
def edit(request, slug):
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    current = blueprint.current_revision
    form = EditorForm(request.POST if request.method == "POST" else None, initial={
        "text": current.text if current else "", "base_revision": current.number if current else None,
    })
    if request.method == "POST" and form.is_valid():
        base = form.cleaned_data["base_revision"]
        revision, created = blueprint.save_revision(form.cleaned_data["text"], summary="Edited in evalsite")
        moved_on = created and current is not None and base is not None and base != current.number
        if request.htmx:
            return render(request, "blueprints/editor.html#save-status",
                          {"blueprint": blueprint, "revision": revision, "created": created, "saved": True,
                           "moved_on": moved_on, "replaced": current})
        _saved_message(request, revision, created=created)
        if moved_on:
            messages.warning(request, f"Revision {current.number} had been saved elsewhere after you opened the "
                                      "editor; your text is now the newest revision (compare them in the history).")
        return redirect("blueprints:edit", slug=blueprint.slug)
    if request.method == "POST" and request.htmx:
        return render(request, "blueprints/editor.html#save-status",
                      {"blueprint": blueprint, "revision": current, "form_errors": form.errors.get("text")})
    check = editing.check_text(form["text"].value() or "", slug=blueprint.slug)
    return render(request, "blueprints/editor.html",
                  {"form": form, "blueprint": blueprint, "revision": current, "check": check})


def _saved_message(request, revision, *, created):
    if not created:
        messages.info(request, f"No changes: revision {revision.number} is still the newest.")
    elif revision.is_valid:
        messages.success(request, f"Saved revision {revision.number}.")
    else:
        messages.warning(request, f"Saved revision {revision.number} as a draft: "
                                  f"{revision.error_count} error{'s' if revision.error_count != 1 else ''} "
                                  "must be fixed before it can run.")


@require_POST
def validate(request):
    """Live validation: always 200, with the problems panel and (out of band) the preview."""
    slug = request.POST.get("slug") or None
    check = editing.check_text(request.POST.get("text", "").replace("\r\n", "\n"), slug=slug)
    return render(request, "blueprints/editor.html#live", {"check": check, "blueprint": None, "live": True})


@require_http_methods(["GET", "POST"])
def try_response(request, slug):
    """Paste a response for one prompt and see how a run would score it (judges only when asked)."""
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    unsaved = request.POST.get("text") if request.method == "POST" else None
    if unsaved:
        result = editing.check_text(unsaved.replace("\r\n", "\n"), slug=slug).result
    elif blueprint.current_revision:
        result = blueprint.current_revision.parse()
    else:
        result = None
    spec = result.blueprint if result else None
    prompts = {p.id: p for p in spec.prompts} if spec else {}
    form = TryForm(request.POST if request.method == "POST" else None, prompt_ids=list(prompts),
                   initial={"prompt": request.GET.get("prompt") or next(iter(prompts), None)})
    outcome = None
    if request.method == "POST" and form.is_valid():
        files = blueprint.current_revision.files if blueprint.current_revision else {}
        outcome = trying.try_response(spec, prompts[form.cleaned_data["prompt"]], form.cleaned_data["response"],
                                      with_judges=form.cleaned_data["with_judges"], files=files or {})
    selected = prompts.get(form["prompt"].value())
    plan, judge_problems = trying.judges_for_try(spec) if spec else (None, [])
    context = {
        "blueprint": blueprint, "form": form, "result": result, "spec": spec, "outcome": outcome,
        "groups": outcome.groups if outcome else None, "judges": [j.judge_id for j in plan.judges] if plan else [],
        "judge_problems": judge_problems,
        "selected": previews.prompt_view(spec, selected) if selected else None, "unsaved": bool(unsaved),
    }
    return render(request, _fragment(request, "blueprints/try.html", "try-results"), context)


@require_POST
def rename(request, slug):
    blueprint = get_object_or_404(Blueprint, slug=slug)
    form = RenameForm(request.POST, blueprint=blueprint)
    if form.is_valid():
        blueprint.rename(form.cleaned_data["slug"])
        messages.success(request, f"The blueprint's id is now '{blueprint.slug}'.")
    else:
        messages.error(request, " ".join(form.errors["slug"]))
    return redirect(blueprint.get_absolute_url())


@require_http_methods(["GET", "POST"])
def delete(request, slug):
    """GET: what deleting the blueprint takes with it; POST: delete it (its runs are cancelled and go too)."""
    blueprint = get_object_or_404(Blueprint, slug=slug)
    summary = blueprint.deletion_summary()
    if request.method == "POST":
        blueprint.delete()
        messages.success(request, f"Deleted the blueprint '{shown_id(slug)}' with "
                                  f"{_count(summary['revisions'], 'revision')} and {_count(summary['runs'], 'run')}.")
        return redirect("blueprints:home")
    return render(request, "blueprints/delete.html", {"blueprint": blueprint, "summary": summary})


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- history ----------------------------------------------------------------------------


@require_safe
def history(request, slug):
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    revisions = list(blueprint.revisions.defer("text", "files").order_by("-number"))
    newest = revisions[0].number if revisions else 0
    form = CompareForm(request.GET or None, initial={"a": max(newest - 1, 1), "b": newest})
    a = b = None
    if form.is_bound and form.is_valid():
        a, b = form.cleaned_data["a"], form.cleaned_data["b"]
    elif not form.is_bound and newest > 1:
        a, b = newest - 1, newest
    diff = None
    if a and b:
        pair = {r.number: r for r in blueprint.revisions.filter(number__in=[a, b])}
        if a in pair and b in pair:
            diff = {"a": pair[a], "b": pair[b], "rows": editing.diff_rows(pair[a].text, pair[b].text)}
        else:
            diff = {"missing": [n for n in (a, b) if n not in pair]}
    context = {"blueprint": blueprint, "revisions": revisions, "form": form, "diff": diff}
    return render(request, _fragment(request, "blueprints/history.html", "diff"), context)


@require_safe
def revision(request, slug, number):
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    rev = get_object_or_404(BlueprintRevision, blueprint=blueprint, number=number)
    lines = rev.text.splitlines()
    return render(request, "blueprints/revision.html", {"blueprint": blueprint, "revision": rev, "lines": lines})


@require_POST
def restore(request, slug, number):
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    old = get_object_or_404(BlueprintRevision, blueprint=blueprint, number=number)
    revision, created = blueprint.restore(old)
    if created:
        messages.success(request, f"Restored revision {number} as revision {revision.number}.")
    else:
        messages.info(request, f"Revision {number} has the same text as the newest revision; nothing to restore.")
    return redirect(reverse("blueprints:history", args=[blueprint.slug]))


# --- model collections ------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def collections(request):
    error = None
    if request.method == "POST" and request.POST.get("action") in ("rename", "delete"):
        # A collection named by a form field, not the address: any stored name, even one no address can hold.
        return _collection_action(request, request.POST.get("action"), request.POST.get("name", ""))
    if request.method == "POST":
        name = request.POST.get("name", "").strip().upper()
        lines = [(n, line.strip()) for n, line in enumerate(request.POST.get("models", "").splitlines(), start=1)
                 if line.strip()]
        model_ids = [model_id for _, model_id in lines]
        # Each id is checked where it was typed: "Line 3: 'foo:bar baz' has a space in it... e.g. 'foo:bar-baz'."
        problems = model_ids_problems(model_ids, where=lambda n: f"Line {lines[n - 1][0]}")
        name_problem = collection_name_problem(name)
        try:
            if problems:
                raise ValidationError([name_problem or "Nothing was saved: some model ids can never run."] + problems)
            # An empty list is allowed: real repositories keep some (FRONTIER.json is `[]`).
            ModelCollection.store(name, model_ids, source="edited in evalsite")
        except ValidationError as exc:
            error = exc.messages
        else:
            messages.success(request, f"Saved the collection {name}.")
            return redirect("blueprints:collections")
    context = {"collections": ModelCollection.objects.all(), "error": error, "posted": request.POST}
    return render(request, "blueprints/collections.html", context)


@require_POST
def collection_delete(request, name):
    return _collection_action(request, "delete", name)


@require_POST
def collection_rename(request, name):
    return _collection_action(request, "rename", name)


def _collection_action(request, action, name):
    collection = get_object_or_404(ModelCollection, name=name)
    shown = shown_id(name)
    if action == "delete":
        collection.delete()
        messages.success(request, f"Deleted the collection {shown}. Blueprints that name it can no longer run until "
                                  f"it is added again.")
        return redirect("blueprints:collections")
    try:
        collection.rename(request.POST.get("new_name", ""))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Renamed {shown} to {collection.name}. Blueprints that name {shown} need the new "
                                  f"name too.")
    return redirect("blueprints:collections")
