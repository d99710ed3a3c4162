# Over 500 lines: every run page, each view a few lines; splitting by page would only scatter them.
"""Run pages: start a run, watch it, read its results, review a response, compare, download.

Every page is a plain GET a person (or a crawler) can reach by links from the
runs list; htmx only swaps parts in place: the live progress (polled every 2 s,
stopped with status 286 when the run ends), the heatmap's pages, the response's
render mode and a point's override. A request from htmx gets the named
fragment of the same template; without htmx the same URL renders the page.

Pages never load every assessment of a run: the run page reads the stored
aggregates, the heatmap reads one page of prompts, a response page one
response's points. Responses are untrusted, see runs/rendering.py; these pages
also send a Content-Security-Policy that allows nothing from elsewhere.
"""

from __future__ import annotations

import json
from datetime import datetime
from datetime import timezone as dt_timezone

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Q
from django.db.models.fields.json import KT
from django.http import Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from blueprints.models import Blueprint

from . import actions, call_views, compare as run_compare, grid, heatmap as heat_map, repeats, response_page, trust, \
    verdicts
from . import start as run_start
from . import work as run_work
from . import followup
from .exports import grid_to_csv, run_to_csv, run_to_json
from .pages import blueprint_of, with_csp
from .spec import RunRefused
from .models import Annotation, PointAssessment, Response, Run, RunStatus
from .records import WHOLE_FIGURES, figure_columns, page_matrix, reviewed_blueprints, run_matrix
from .run_form import form_state as run_form_state, known_models
from .rendering import RENDER_MODES, render as render_text
from .report import report_chunks
from .templatetags.results import number

CONTROLS = ("cancel", "resume", "retry-failed")
RUNS_PAGE_SIZE = 50
QUEUED_TOO_LONG_S = 30
POLL_OVERLAP_MS = 5000  # each poll asks again for the last 5 s: a row committed late is not missed
CELL_TEXT_CHARS = 20_000  # a cell opened in place shows this much; the response page shows the rest


def _fragment(request, template, name):
    return f"{template}#{name}" if request.htmx else template


# What a page of a run does not read from the row unless it asks (a deferred field loads on first use): the
# revision's text and files (the parse is kept per process), and on pages that show no stored figures, the run's
# aggregates (per cell: megabytes of JSON on a run of 100,000 responses).
_REVISION_TEXTS = ("revision__text", "revision__files", "revision__import_report", "revision__extras")


def _run_or_404(run_id, *, aggregates: bool = True):
    rows = Run.objects.select_related("blueprint", "revision").defer(
        *_REVISION_TEXTS, *(() if aggregates else ("aggregates",)))
    return get_object_or_404(rows, pk=run_id)


# The keys of the stored aggregates the run page shows: read alone (the database picks them out), never the
# per-cell figures beside them (``cells``, ``cellDetails``: megabytes of JSON on a run of 100,000 responses).
_PAGE_FIGURES = ("overall", "agreement", *WHOLE_FIGURES)


def _run_with_figures_or_404(run_id):
    """The run, its stored aggregates deferred, with ``run.figures``: the keys of them the run page shows."""
    rows = (Run.objects.select_related("blueprint", "revision").defer(*_REVISION_TEXTS, "aggregates")
            .annotate(**figure_columns(_PAGE_FIGURES)))
    run = get_object_or_404(rows, pk=run_id)
    run.figures = {key: getattr(run, f"figure_{key}") for key in _PAGE_FIGURES}
    return run


# --- starting and controlling ----------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def run_form(request, slug):
    """The run form of a blueprint, embedded in its page by this address (htmx) or a page of its own.

    GET: the form as first offered. POST from htmx without ``start``: the estimate for what the form says
    now (``runs/run_form.html#estimate``), as its boxes change. POST with ``start`` (the Start button, with
    or without JavaScript): the run starts when it can and, past EVALSITE_CONFIRM_USD or
    EVALSITE_CONFIRM_CALLS, only with the confirmation of this very estimate ticked; else the form comes back
    as posted with why, and nothing is created."""
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"), slug=slug)
    return _run_form(request, blueprint, starting=request.method == "POST" and bool(request.POST.get("start")))


@require_POST
def start(request):
    """The run form's Start, posted with the blueprint's id in the form (``blueprint``): as ``run_form``."""
    blueprint = get_object_or_404(Blueprint.objects.select_related("current_revision"),
                                  slug=request.POST.get("blueprint", ""))
    return _run_form(request, blueprint, starting=True)


def _run_form(request, blueprint, *, starting: bool):
    revision = blueprint.current_revision
    data = request.POST if request.method == "POST" else None
    number = data.get("revision") if data is not None else None
    if number and revision and str(revision.number) != number:
        revision = get_object_or_404(blueprint.revisions, number=number)
    state = run_form_state(blueprint, revision, data)
    context = {"blueprint": blueprint, "revision": revision, "state": state,
               "known_models": known_models() if data is None or not request.htmx else []}
    if starting:
        prepared = state.prepared
        if prepared is not None and not state.refused and prepared.confirmed:
            run = run_start.start_prepared(blueprint, prepared, source="web")
            return redirect("runs:detail", run.pk)
        context["start_error"] = (f"Not started: {state.refused}" if state.refused or prepared is None
                                  else prepared.not_confirmed_message)
        context["known_models"] = known_models()
    elif request.htmx and data is not None:
        return render(request, "runs/run_form.html#estimate", context)
    if request.htmx:
        return render(request, "runs/run_form.html#run-form", context)
    return render(request, "runs/run_form.html", context)


@require_POST
def control(request, run_id, action):
    if action not in CONTROLS:
        raise Http404("unknown action")
    run = get_object_or_404(Run, pk=run_id)
    try:
        if action == "resume":  # with a new cap when the run stopped at its budget
            done = actions.resume(run, request.POST.get("budget_usd") or None)
        else:
            done = {"cancel": actions.cancel, "retry-failed": actions.retry_failed}[action](run)
    except actions.Refused as refused:
        messages.error(request, refused.message)
    else:
        messages.info(request, done.message)
    return redirect("runs:detail", run.pk)


@require_http_methods(["GET", "POST"])
def delete(request, run_id):
    """GET: what deleting the run takes with it; POST: delete it (cancelled first if it is going)."""
    run = get_object_or_404(Run.objects.select_related("blueprint"), pk=run_id)
    if request.method == "POST":
        name, blueprint = run.display_name, run.blueprint
        gone = run_work.delete_run(run)
        messages.success(request, f"Deleted {name} of '{blueprint.slug}' with its {gone['responses']} responses"
                                  f"{' (it was cancelled first)' if gone['was_running'] else ''}.")
        return redirect(f"{reverse('runs:list')}?blueprint={blueprint.slug}")
    context = {"run": run, "responses": run.responses.count(),
               "overrides": PointAssessment.objects.filter(response__run=run, override__isnull=False).count()}
    return render(request, "runs/delete.html", context)


@require_POST
def rename(request, run_id):
    run = get_object_or_404(Run, pk=run_id)
    try:
        actions.rename(run, request.POST.get("name", ""))
    except actions.Refused as refused:
        messages.error(request, refused.message)
    return redirect("runs:detail", run.pk)


# --- the runs list ---------------------------------------------------------------------------


@require_safe
def run_list(request):
    """Every run, newest first; ``?blueprint=<slug>`` narrows it to one blueprint's runs."""
    blueprint = None
    runs = (Run.objects.select_related("blueprint", "revision").defer("aggregates", "resolved_models", "judges")
            .annotate(overall=KT("aggregates__overall__mean")).order_by("-created_at", "-id"))
    slug = request.GET.get("blueprint", "").strip()
    if slug:
        blueprint = get_object_or_404(Blueprint, slug=slug)
        runs = runs.filter(blueprint=blueprint)
    page = Paginator(runs, RUNS_PAGE_SIZE).get_page(request.GET.get("page"))
    for run in page.object_list:  # read from JSON as text: a run that scored nothing stored null
        run.overall = number(run.overall)
    context = {"page": page, "blueprint": blueprint}
    return render(request, _fragment(request, "runs/run_list.html", "results"), context)


# --- one run ----------------------------------------------------------------------------------


def _phase(run: Run) -> str:
    if run.status == RunStatus.QUEUED:
        waited = (timezone.now() - run.created_at).total_seconds()
        if waited > QUEUED_TOO_LONG_S:
            return ("Queued, and no worker has started it yet. Is the task worker running? "
                    "(make run starts one; or .venv/bin/python manage.py qcluster)")
        return "Queued: waiting for a worker to pick it up."
    if run.status == RunStatus.RUNNING:
        back = run_work.rerun_stretch(run)
        if back is not None:
            return (f"Re-running single responses; when they are stored the run is {back} again"
                    f"{' (nothing else runs)' if back == RunStatus.CANCELLED else ''}.")
        if run.cancel_requested:
            return "Cancelling: items already in flight finish, nothing new starts."
        return "Generating responses and judging each one as it arrives."
    if run.status == RunStatus.DONE:
        return "Finished."
    if run.status == RunStatus.CANCELLED:
        return "Cancelled: finished items are kept; resume to run the rest."
    return "Failed: " + (run.error or "see the failures below.")


def _percent(done, total) -> int:
    return int(100 * done / total) if total else 100


def _matrix(run: Run, spec):
    """The run's results matrix, built once per request (``runs.records.run_matrix``)."""
    cached = getattr(run, "_matrix", None)
    if cached is None and spec is not None:
        cached = run._matrix = run_matrix(run, spec.prompts)
    return cached


def _heatmap_matrix(request, run: Run, spec):
    """The matrix the run page and its heatmap read (``run.figures``: the stored aggregates' keys the run page
    reads), and the heatmap's page of prompt positions. In the blueprint's order, the page's prompts' cells with
    the whole run's columns (``records.page_matrix``: a first view of a big run reads a page of its rows, not
    every one); in an order by score, the whole matrix."""
    sort = request.GET.get("sort", "order")
    if sort not in heat_map.HEATMAP_SORTS:
        sort = "order"
    if sort == "order":
        page = Paginator(range(len(spec.prompts)), heat_map.HEATMAP_PAGE_SIZE).get_page(request.GET.get("page"))
        matrix = page_matrix(run, spec.prompts, list(page.object_list), run.figures)
    else:
        matrix = _matrix(run, spec)
        page = Paginator(matrix.prompt_order(sort), heat_map.HEATMAP_PAGE_SIZE).get_page(request.GET.get("page"))
    return matrix, page, sort


def _heatmap_context(run: Run, spec, matrix, page, sort) -> dict:
    if spec is None:
        return {"heatmap": None}
    link = reverse("runs:response", args=[run.pk, 987654321])
    prompt_link = reverse("runs:prompt", args=[run.pk, 987654321])
    rows = heat_map.with_cells_html(heat_map.rows(matrix, list(page.object_list)),
                                    lambda pk: link.replace("987654321", str(pk)),
                                    matrix.__dict__.setdefault("_heatmap_html", {}),  # kept with the matrix
                                    lambda index: prompt_link.replace("987654321", str(index)))
    return {"heatmap": {"columns": heat_map.columns(matrix), "rows": rows,
                        "page": page, "sort": sort, "sorts": heat_map.HEATMAP_SORTS.items(),
                        "prompts": len(spec.prompts)}}


def _run_context(request, run: Run) -> dict:
    aggregates = run.figures
    stats = aggregates.get("variants") or {}
    spec = blueprint_of(run)
    matrix, page, sort = _heatmap_matrix(request, run, spec) if run.is_finished and spec is not None \
        else (None, None, None)
    columns = heat_map.columns(matrix) if matrix is not None and stats else []
    context = {
        "run": run,
        "phase": _phase(run),
        "items_percent": _percent(run.items_done, run.items_total),
        "judge_percent": _percent(run.judge_calls_done + run.judge_calls_failed, run.judge_calls_total),
        "variants": [(c, stats[c.variant_id]) for c in columns if c.variant_id in stats],
        "agreement": aggregates.get("agreement"),
        "overall": aggregates.get("overall"),
        "not_run": sum(s.counts.get("not-run", 0) for s in matrix.summaries.values()) if matrix else 0,
        "failures": (Response.objects.filter(run=run, status="failed").order_by("-finished_at")
                     .only("pk", "prompt_id", "variant_id", "error")[:5]),
        # Simulated users' models: their calls are in the generations' figures (each response's calls say apart).
        "simulated_users": sorted({p.simulated_user.model for p in (spec.prompts if spec is not None else ())
                                   if p.simulated_user is not None}),
    }
    # The simulated users' own line of the bill (their calls are in the candidates' figures too).
    context["user_bill"] = call_views.simulated_user_bill(run) if context["simulated_users"] else None
    if followup.is_followup(run):
        context["followup_of"] = {**(run.options.get("followupPair") or {}), "run": run.options["followupOf"],
                                  "partner": run.options.get("followupPartner"),
                                  "prompts": (run.options.get("followupPlan") or {}).get("prompts") or [],
                                  "verdict": followup.verdict(run).to_dict()}
    context["followups"] = list(followup.followups_of(run)[:20])
    if run.is_finished:
        context.update(_heatmap_context(run, spec, matrix, page, sort))
        shown = context["heatmap"]  # the verdicts of the heatmap page's prompts: a page of a big run stays a page
        context["verdict_tables"] = verdicts.run_verdict_rows(
            matrix, [row.index for row in shown["rows"]] if shown is not None else None)
        if shown is not None and shown["page"].paginator.num_pages > 1:
            context["verdicts_paged"] = shown["page"]
        context["trust"] = trust.judge_trust(Response.objects.filter(run=run))
        context["tolerance"] = trust.TOLERANCE
        context["flips"] = repeats.run_flips(run)
        context["others"] = (Run.objects.filter(blueprint_id=run.blueprint_id).exclude(pk=run.pk)
                             .select_related("revision").only("pk", "created_at", "status", "revision__number")
                             .order_by("-created_at", "-id")[:30])
    return context


@require_safe
@with_csp
def detail(request, run_id):
    run = _run_with_figures_or_404(run_id)
    context = _run_context(request, run)
    if request.htmx and request.GET.get("poll"):
        response = render(request, "runs/run_detail.html#progress", context)
        if run.is_finished:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    return render(request, "runs/run_detail.html", context)


@require_safe
def judges(request):
    """How far to trust each judge model, across runs (one blueprint's, or every run's)."""
    slug = request.GET.get("blueprint", "")
    blueprint = Blueprint.objects.filter(slug=slug).first() if slug else None
    responses = Response.objects.filter(run__blueprint=blueprint) if blueprint else Response.objects.all()
    flips, flip_runs = repeats.runs_flips(Run.objects.filter(blueprint=blueprint) if blueprint else Run.objects.all())
    return render(request, "runs/judges.html", {
        "trust": trust.judge_trust(responses), "tolerance": trust.TOLERANCE, "blueprint": blueprint, "slug": slug,
        "flips": flips, "flip_runs": flip_runs,
        "reviewed_blueprints": reviewed_blueprints(), "unknown_blueprint": bool(slug) and blueprint is None})


@require_safe
@with_csp
def heatmap(request, run_id):
    """One page of the prompts x models heatmap (100 prompts a page)."""
    run = _run_with_figures_or_404(run_id)
    spec = blueprint_of(run)
    context = {"run": run, **_heatmap_context(run, spec, *(_heatmap_matrix(request, run, spec) if spec is not None
                                                              else (None, None, None)))}
    return render(request, _fragment(request, "runs/heatmap.html", "heatmap"), context)


@require_safe
@with_csp
def results(request, run_id):
    """The results grid: prompts x models with each response's start; filter, search and sort in the URL.

    While the run works, the page polls ``?since=<ms>``: only the cells that changed since then come back
    (out of band), with the run's progress and wait reasons.
    """
    run = _run_or_404(run_id, aggregates=False)
    spec = blueprint_of(run)
    if spec is None:
        raise Http404("this run's blueprint revision can no longer be read")
    query, problems = grid.GridQuery.from_params(request.GET)
    since = request.GET.get("since")
    if request.htmx and since is not None:
        return _grid_changes(request, run, spec, query, since)
    context = {"run": run, "query": query, "grid": grid.build_grid(run, spec, query, problems, page_only=True),
               "filters": grid.FILTERS.items(), "sorts": grid.SORTS.items(), "now_ms": _now_ms() - POLL_OVERLAP_MS,
               **_live_context(run)}
    return render(request, _fragment(request, "runs/results.html", "grid"), context)


def _now_ms() -> int:
    return int(timezone.now().timestamp() * 1000)


def _live_context(run: Run) -> dict:
    return {"items_percent": _percent(run.items_done, run.items_total), "phase": _phase(run)}


def _grid_changes(request, run: Run, spec, query, since: str):
    """The cells whose response changed since ``since`` (ms), out of band, and the progress line."""
    try:
        since_at = datetime.fromtimestamp(int(since) / 1000, tz=dt_timezone.utc)
    except (ValueError, OverflowError, OSError):
        since_at = timezone.now()
    changed, models = grid.changed_cells(run, spec, query, since_at)
    response = render(request, "runs/results.html#changes",
                      {"run": run, "changed": changed, "models": models, "now_ms": _now_ms() - POLL_OVERLAP_MS,
                       "query": query, "ended": run.is_finished, **_live_context(run)})
    if run.is_finished:
        response.status_code = HttpResponseStopPolling.status_code
    return response


# --- one response ----------------------------------------------------------------------------


def _authored_turns(prompt, run: Run, spec, response: Response) -> list[dict]:
    """The prompt as written: its system prompt for this model variant, its turns, the turns to generate."""
    variant = response.variant_in(run.variants(spec), prompt)
    system = variant.system_for(prompt) if variant else prompt.system
    turns = [{"role": "system", "content": system, "generated": False}] if system else []
    turns += [{"role": m.role, "content": m.content, "generated": False} for m in prompt.messages]
    if not prompt.messages or prompt.messages[-1].role != "assistant":
        turns.append({"role": "assistant", "content": None, "generated": False})
    return turns


def _conversation(response: Response, prompt, run: Run, spec) -> list[dict]:
    """The turns to show: the stored conversation, or (before generation) the prompt as authored."""
    turns = [dict(t) for t in response.conversation]
    if not turns and prompt is not None:
        turns = _authored_turns(prompt, run, spec, response)
    return _with_trajectory(_with_previews(turns), response.tool_calls)


TOOL_OUTCOMES = {"result": "result", "error": "tool error", "no-mock": "failed: no mock answered",
                 "bad-arguments": "failed: arguments break the schema", "unknown-tool": "failed: no such tool",
                 "step-limit": "not answered: step limit reached",
                 "too-many-calls": "not answered: too many calls at once"}
TOOL_SHOWN_CHARS = 20_000


def _with_trajectory(turns: list[dict], calls) -> list[dict]:
    """A native tool loop's steps as the page shows them (docs/results.md, the response page): each call's arguments
    and each result as JSON text (shortened), its outcome in words, failures marked."""
    outcomes = {c.get("id"): c for c in calls or () if isinstance(c, dict)}
    for turn in turns:
        if isinstance(turn.get("tool_calls"), list):
            turn["shown_calls"] = [{
                "name": c.get("name"), "args": _json_text(c.get("arguments")),
                "outcome": (outcomes.get(c.get("id")) or {}).get("outcome"),
                "unanswered": (outcomes.get(c.get("id")) or {}).get("reason")
                if (outcomes.get(c.get("id")) or {}).get("outcome") in ("step-limit", "too-many-calls") else None,
                # record-only (an imported AI Eval case without mocks): kept, never answered, and not a failure
                "recorded": (outcomes.get(c.get("id")) or {}).get("outcome") == "recorded",
            } for c in turn["tool_calls"] if isinstance(c, dict)]
        tool = turn.get("tool")
        if isinstance(tool, dict):
            outcome = tool.get("outcome")
            turn["step"] = {
                "name": tool.get("name"), "number": tool.get("step"), "outcome": TOOL_OUTCOMES.get(outcome, outcome),
                "failed": outcome in ("no-mock", "bad-arguments", "unknown-tool", "step-limit", "too-many-calls"),
                "args": _json_text(tool.get("arguments")), "check": tool.get("check"), "mock": tool.get("mock"),
                "reason": tool.get("reason"),
                "answer": _json_text(tool["result"]) if "result" in tool else tool.get("error") or "",
            }
    return turns


def _json_text(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return text if len(text) <= TOOL_SHOWN_CHARS else text[:TOOL_SHOWN_CHARS] + " …"


def _with_previews(turns: list[dict]) -> list[dict]:
    for turn in turns:
        content = turn.get("content")
        turn["long"] = content is not None and len(content) > 2000
        turn["preview"] = content[:2000] if turn["long"] else content
    return turns


def _response_context(request, run: Run, response: Response) -> dict:
    spec = blueprint_of(run)
    prompt = run.prompt(response.prompt_index, spec) if spec else None
    render_as = prompt.render_as if prompt else "markdown"
    mode = request.GET.get("as") or render_as
    if mode not in RENDER_MODES:
        mode = render_as
    assessments = list(PointAssessment.objects.filter(response=response)
                       .select_related("override", "confirmation").order_by("position"))
    siblings = Response.objects.filter(run=run)
    same_model = siblings.filter(variant_id=response.variant_id, trial=response.trial)
    matrix = _matrix(run, spec)
    context = {
        "run": run,
        "response": response,
        "prompt": prompt,
        "render_as": render_as,
        "mode": mode,
        "modes": RENDER_MODES,
        "rendered": render_text(response.text, mode) if response.text is not None else None,
        "ideal": render_text(prompt.ideal_response, mode) if prompt and prompt.ideal_response is not None else None,
        "conversation": _conversation(response, prompt, run, spec),
        "review": response_page.review_response(response, assessments),
        "assessments": assessments,
        "judge_errors": sum(1 for pa in assessments for v in pa.verdicts if v.get("error")),
        "verdict": verdicts.response_verdict_context(
            run, response, assessments, matrix.cell(response.prompt_index, response.variant_id) if matrix else None),
        # The cell this response is a trial of (its score and rule first), its trials, the other models' cells.
        **response_page.cell_context(matrix, response, siblings),
        "previous": same_model.filter(prompt_index__lt=response.prompt_index).order_by("-prompt_index")
        .values_list("pk", "prompt_id").first(),
        "next": same_model.filter(prompt_index__gt=response.prompt_index).order_by("prompt_index")
        .values_list("pk", "prompt_id").first(),
        # The next of this model's responses that failed or scored below the grid's default threshold.
        "next_failure": same_model.filter(prompt_index__gt=response.prompt_index)
        .filter(Q(status="failed") | Q(score__lt=grid.GridQuery.threshold)).order_by("prompt_index")
        .values_list("pk", "prompt_id").first(),
        "annotation": Annotation.objects.filter(response=response).first(),
        "overrides": sum(1 for pa in assessments if getattr(pa, "override", None) is not None),
    }
    return context


def _response_or_404(run_id, response_id):
    run = _run_or_404(run_id, aggregates=False)  # a response's pages read its rows and the matrix
    response = get_object_or_404(Response, pk=response_id, run=run)
    return run, response


@require_safe
@with_csp
def response_detail(request, run_id, response_id):
    run, response = _response_or_404(run_id, response_id)
    context = _response_context(request, run, response)
    if request.htmx and request.headers.get("HX-Target") == "rendered":
        return render(request, "runs/response_detail.html#rendered", context)
    return render(request, "runs/response_detail.html", context)


@require_safe
@with_csp
def response_cell(request, run_id, response_id):
    """A grid cell opened in place: the whole response as text, its error, and every point with its reflection."""
    run, response = _response_or_404(run_id, response_id)
    points = list(PointAssessment.objects.filter(response=response).select_related("override").order_by("position"))
    return render(request, "runs/_cell_detail.html", {"run": run, "response": response, "points": points,
                                                       "limit": CELL_TEXT_CHARS})


@require_safe
def response_calls(request, run_id, response_id):
    """Every call this response made (candidate turns, then judges), as sent and as answered; read on demand."""
    run, response = _response_or_404(run_id, response_id)
    log = response.call_log()
    return render(request, "runs/_calls.html", {"run": run, "response": response, "calls": call_views.call_views(log),
                                                 "spent": call_views.by_purpose(log)})


@require_safe
def response_text(request, run_id, response_id):
    """The whole response as plain text (pages render at most the first 50,000 characters)."""
    _, response = _response_or_404(run_id, response_id)
    which = request.GET.get("which", "response")
    text = response.text or ""
    if which == "ideal":
        spec = blueprint_of(response.run)
        prompt = response.run.prompt(response.prompt_index, spec) if spec else None
        text = (prompt.ideal_response if prompt else None) or ""
    out = HttpResponse(text, content_type="text/plain; charset=utf-8")
    out.headers["X-Content-Type-Options"] = "nosniff"
    out.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return out


@require_POST
@with_csp
def override(request, run_id, response_id, position):
    """Set or remove a reviewer's score for one point; the response's score and the run's aggregates follow."""
    run, response = _response_or_404(run_id, response_id)
    assessment = get_object_or_404(PointAssessment.objects.select_related("override"), response=response,
                                   position=position)
    error = None
    score = None if request.POST.get("action") == "remove" else request.POST.get("score", "")
    try:
        outcome = actions.override(assessment, score, reason=request.POST.get("reason", ""),
                                   who=request.POST.get("who", ""))
    except actions.Refused as refused:
        error = refused.message
    if not request.htmx:
        if error:
            messages.error(request, f"Point {position + 1}: {error}")
        else:
            messages.success(request, _override_message(position, outcome))
        return redirect(reverse("runs:response", args=(run.pk, response.pk)) + f"#point-{position + 1}")
    response.refresh_from_db()
    run.refresh_from_db()  # its results_version moved: the cell's score is read from the new matrix
    context = _response_context(request, run, response)
    context.update({"override_error": error, "override_position": position, "oob": True,
                    "override_typed": request.POST if error else None,
                    "override_message": None if error else _override_message(position, outcome)})
    return render(request, "runs/response_detail.html#override-result", context)


@require_POST
def confirm(request, run_id, response_id, position):
    """Say the judges are right about one point (``action=remove`` takes it back); the score does not change."""
    run, response = _response_or_404(run_id, response_id)
    assessment = get_object_or_404(PointAssessment, response=response, position=position)
    try:
        done = actions.confirm(assessment, confirmed=request.POST.get("action") != "remove",
                               who=request.POST.get("who", ""))
    except actions.Refused as refused:
        messages.error(request, f"Point {position + 1}: {refused.message}")
    else:
        messages.success(request, done.message)
    return redirect(reverse("runs:response", args=(run.pk, response.pk)) + f"#point-{position + 1}")


@require_POST
def rerun_response(request, run_id, response_id):
    """Generate and judge this one response again, afresh; the page follows it until it is stored."""
    run, response = _response_or_404(run_id, response_id)
    try:
        messages.info(request, actions.rerun(run, response).message)
    except actions.Refused as refused:
        messages.error(request, refused.message)
    return redirect("runs:response", run.pk, response.pk)


@require_safe
def response_state(request, run_id, response_id):
    """Polled by a response page while its response is pending or running: the page reloads once it is stored."""
    _, response = _response_or_404(run_id, response_id)
    if response.status in ("done", "failed"):
        out = HttpResponse("")
        out.headers["HX-Refresh"] = "true"
        return out
    return HttpResponse(f"{response.status}…")


@require_POST
def annotate(request, run_id, response_id):
    """Set or clear a reviewer's thumbs and comment on a response."""
    run, response = _response_or_404(run_id, response_id)
    error = None
    try:
        actions.annotate(response, thumbs=request.POST.get("thumbs", ""), comment=request.POST.get("comment", ""),
                         who=request.POST.get("who", ""))
    except actions.Refused as refused:
        error = refused.message
    if not request.htmx:
        if error:
            messages.error(request, f"Annotation not saved: {error}.")
        return redirect(reverse("runs:response", args=(run.pk, response.pk)) + "#annotation")
    context = {"run": run, "response": response, "annotation_error": error,
               "annotation": Annotation.objects.filter(response=response).first(), "saved": error is None,
               "typed": request.POST if error else None}
    return render(request, "runs/response_detail.html#annotation", context)


def _override_message(position, outcome) -> str:
    fmt = (lambda v: "not evaluated" if v is None else f"{v:.2f}")
    what = "removed" if getattr(outcome.assessment, "override", None) is None else "saved"
    return f"Override on point {position + 1} {what}: the response's score is {fmt(outcome.after)} " \
           f"(it was {fmt(outcome.before)})."


# --- one prompt, every model -----------------------------------------------------------------


@require_safe
@with_csp
def prompt_detail(request, run_id, prompt_index):
    run = _run_or_404(run_id, aggregates=False)  # its cells come from the matrix, not the stored figures
    spec = blueprint_of(run)
    # Each model's cell, and the response it stands for (the matrix's rule: with trials, not always trial 0).
    cells = {c.response_id: c for c in _matrix(run, spec).row(prompt_index) if c is not None} if spec else {}
    shown = Response.objects.filter(pk__in=cells) if cells else Response.objects.filter(trial=0)
    responses = list(shown.filter(run=run, prompt_index=prompt_index))
    if not responses:
        raise Http404("no such prompt in this run")
    prompt = run.prompt(prompt_index, spec) if spec else None
    rank = {pk: i for i, pk in enumerate(cells)}  # the matrix's column order, best model first
    responses.sort(key=lambda r: (rank.get(r.pk, len(rank)), r.variant_id))
    points: dict[int, dict[int, PointAssessment]] = {}
    for pa in PointAssessment.objects.filter(response__in=responses).select_related("override"):
        points.setdefault(pa.position, {})[pa.response_id] = pa
    mode = prompt.render_as if prompt else "markdown"
    table = []
    for position in sorted(points):
        row = points[position]
        first = next(iter(row.values()))
        table.append({"position": position, "point": first, "cells": [row.get(r.pk) for r in responses]})
    views = {r.pk: verdicts.cell_view(cells.get(r.pk)) for r in responses}  # each column's cell: score, rule
    cards = [{"response": r, "rendered": render_text(r.text, mode, limit=20_000) if r.text is not None else None,
              "cell": views[r.pk]} for r in responses]
    context = {"run": run, "prompt": prompt, "prompt_index": prompt_index, "prompt_id": responses[0].prompt_id,
               "cards": cards, "responses": responses, "table": table, "mode": mode,
               "columns": [{"response": r, "cell": views[r.pk]} for r in responses],
               "many_trials": any(c is not None and c["k"] > 1 for c in views.values()),
               "ideal": render_text(prompt.ideal_response, mode) if prompt and prompt.ideal_response is not None
               else None,
               "conversation": _with_previews(_authored_turns(prompt, run, spec, responses[0]))
               if prompt else []}
    return render(request, "runs/prompt_detail.html", context)


# --- two runs --------------------------------------------------------------------------------


@require_safe
@with_csp
def compare(request, run_id):
    """``?with=<run>``: per model variant, this run against that one (the paired difference, its interval and
    verdict), the cells whose change stands out under the FDR rule, and every cell's change, worst first.
    Without it: this run's model variants against each other, and each one's mean with its interval.
    ``?part=models`` (htmx, from the run page): the run page's per-model table with each mean's interval.
    ``?with=<run>&part=robustness`` (htmx, from the page): what would flip each verdict against that run."""
    if request.GET.get("part") == "models":
        return _models_part(request, _run_with_figures_or_404(run_id))
    run = _run_or_404(run_id, aggregates=False)
    others = (Run.objects.filter(blueprint_id=run.blueprint_id).exclude(pk=run.pk).select_related("revision")
              .only("pk", "created_at", "status", "revision__number").order_by("-created_at", "-id")[:50])
    base = None
    context = {"run": run, "others": others, "base": None, "level": run_compare.stats.FDR_LEVEL,
               "method": run_compare.stats.METHOD}
    if request.GET.get("with"):
        base_id = _run_id(request.GET["with"])
        base = Run.objects.select_related("blueprint", "revision").defer(*_REVISION_TEXTS, "aggregates") \
            .filter(pk=base_id).first() if base_id is not None else None
        if base is None:
            raise Http404("no such run")
        if base.blueprint_id != run.blueprint_id:
            context["problem"] = (f"Run {base.pk} is of another blueprint ({base.blueprint.slug}); "
                                  "compare runs of the same blueprint.")
            base = None
    if base is not None:
        result = run_compare.compare_with_base(run, base)
        if request.GET.get("part") == "robustness":  # loaded in place by the page: seconds on a big run
            run_compare.with_robustness(run, result.pairs, base, result.changed_prompts)
            return render(request, "runs/_robustness.html", {"robust_pairs": result.pairs})
        context["followup_suggestions"] = _across_suggestions(run, base, result) \
            if run.is_finished and base.is_finished else []
        changes = result.changes
        page = Paginator(changes, run_compare.COMPARE_PAGE_SIZE).get_page(request.GET.get("page"))
        context.update({
            "base": base, "page": page, "result": result, "listed": result.listed[:run_compare.LISTED_MAX],
            "bounds": list(run_compare.run_bounds(run).values()),
            "base_bounds": list(run_compare.run_bounds(base).values()),
            "counts": result.counts,
        })
    elif "problem" not in context:
        spec = blueprint_of(run)
        if spec is not None:
            matrix = _matrix(run, spec)
            intervals = grid.model_intervals(matrix)
            pairs = run_compare.with_robustness(run, run_compare.variant_pairs(matrix, spec.prompts))
            context["followup_suggestions"] = [followup.suggest(run, p.a, p.b) for p in pairs
                                               if p.verdict == "cant_tell"][:FOLLOWUPS_SHOWN] if run.is_finished else []
            context.update({"pairs": pairs,
                            "bounds": list(run_compare.run_bounds(run, matrix).values()),
                            "models": [(v, intervals[v]) for v in matrix.variants if v in intervals]})
    return render(request, _fragment(request, "runs/compare.html", "changes"), context)


FOLLOWUPS_SHOWN = 5  # "can't tell" pairs the compare page suggests a follow-up for


def _across_suggestions(run: Run, base: Run, result) -> list:
    """A follow-up for each variant the two runs "can't tell" apart, where a new run could tell (followup.py
    refuses two runs that differ only in when they ran: then none is offered)."""
    out = []
    for pair in result.pairs:
        if pair.verdict != "cant_tell" or len(out) >= FOLLOWUPS_SHOWN:
            continue
        try:
            out.append(followup.suggest_across(run, base, pair.a, result=result))
        except RunRefused:
            break  # the same for every variant of these two runs
    return out


@require_POST
def start_followup(request, run_id):
    """One click on the compare page: a follow-up run of a "can't tell" pair (runs/followup.py), with a budget."""
    run = _run_or_404(run_id)
    budget = request.POST.get("budget_usd") or None
    try:
        if budget is not None:
            budget = run_start.check_budget(budget)
        base = None
        raw_base = request.POST.get("base", "").strip()[:MAX_RUN_ID_DIGITS + 1]
        if raw_base:
            base_id = _run_id(raw_base)
            if base_id is None:
                raise ValueError(f"`base` must be a run id, not {raw_base!r}")
            base = Run.objects.select_related("blueprint", "revision").filter(pk=base_id).first()
            if base is None:
                raise ValueError(f"no run {raw_base}")
            found = followup.suggest_across(run, base, request.POST.get("a", "")[:500])
        else:
            found = followup.suggest(run, request.POST.get("a", ""), request.POST.get("b", ""))
        large = found.calls >= settings.EVALSITE_CONFIRM_CALLS or (found.cost_most or 0) >= settings.EVALSITE_CONFIRM_USD
        if large and (budget is None or budget >= settings.EVALSITE_CONFIRM_USD):
            raise ValueError(f"this follow-up may make {found.calls:,} calls"
                             + (f" (at most ${found.cost_most:.2f})" if found.cost_most is not None else "")
                             + f"; set a budget under ${settings.EVALSITE_CONFIRM_USD:g} to start it with one click, or "
                             "start it with manage.py followup")
        if base is not None:
            follow, _, _ = followup.start_across(run, base, found.a, budget_usd=budget, source="web",
                                                 suggestion=found)
        else:
            follow, _ = followup.start(run, found.a, found.b, budget_usd=budget, source="web", suggestion=found)
    except ValueError as exc:
        messages.error(request, f"Cannot start the follow-up: {exc}.")
        return _back_to_compare(run, request)
    except RunRefused as exc:
        messages.error(request, f"Cannot start the follow-up: {exc}")
        return _back_to_compare(run, request)
    return redirect("runs:detail", follow.pk)


MAX_RUN_ID_DIGITS = 12


def _run_id(raw: str) -> int | None:
    """A run id as a person or a form wrote it (digits, at most ``MAX_RUN_ID_DIGITS``), or None: a longer number
    would overflow the database's integer before it could be looked up."""
    raw = raw.strip()
    return int(raw) if raw.isdigit() and len(raw) <= MAX_RUN_ID_DIGITS else None


def _back_to_compare(run: Run, request):
    base = _run_id(request.POST.get("base", ""))
    if base is not None:
        return redirect(f"{reverse('runs:compare', args=(run.pk,))}?with={base}")
    return redirect("runs:compare", run.pk)


def _models_part(request, run: Run):
    """The run page's per-model table, each mean with its 95% interval (loaded in place by the run page)."""
    spec = blueprint_of(run)
    if spec is None or not run.is_finished:
        raise Http404("no results to show")
    stats = run.figures["variants"] or {}
    matrix = _matrix(run, spec)
    intervals = grid.model_intervals(matrix)
    variants = [(c, stats[c.variant_id], intervals.get(c.variant_id)) for c in heat_map.columns(matrix)
                if c.variant_id in stats]
    order = matrix.variants  # each model against the next one down the table: what would flip that decision
    neighbours = {(a, b) for a, b in zip(order, order[1:])}
    pairs = run_compare.with_robustness(run, [p for p in run_compare.variant_pairs(matrix, spec.prompts)
                                              if (p.a, p.b) in neighbours])
    return render(request, "runs/run_detail.html#variants", {"run": run, "variants": variants, "intervals": True,
                                                              "bounds": list(run_compare.run_bounds(run, matrix).values()),
                                                              "robust_pairs": pairs})


@require_safe
@with_csp
def diff(request, run_id, base_id):
    """A word diff of one prompt and model's response in two runs of the same blueprint."""
    run, base = _run_or_404(run_id), _run_or_404(base_id)
    if base.blueprint_id != run.blueprint_id:
        raise Http404("these runs are of different blueprints")
    prompt_id, variant_id = request.GET.get("prompt", ""), request.GET.get("variant", "")
    pair = []
    for r in (base, run):  # the response each run's cell stands for (its matrix's rule)
        pk = run_compare.cell_response(r, prompt_id, variant_id)
        pair.append(Response.objects.filter(pk=pk).first() if pk else None)
    if pair == [None, None]:
        raise Http404("neither run has this prompt and model")
    before, after = pair
    pieces = run_compare.text_diff(before.text if before else "", after.text if after else "")
    context = {"run": run, "base": base, "before": before, "after": after, "pieces": pieces,
               "prompt_id": prompt_id, "variant_id": variant_id,
               "changed": any(p.op != "equal" for p in pieces)}
    return render(request, "runs/diff.html", context)


# --- downloads -------------------------------------------------------------------------------


def _attachment(response, filename):
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_safe
def export_json(request, run_id):
    run = _run_or_404(run_id)
    response = JsonResponse(run_to_json(run), json_dumps_params={"ensure_ascii": False, "indent": 1})
    return _attachment(response, f"{run.blueprint.slug}-run-{run.pk}.json")


@require_safe
def export_csv(request, run_id):
    run = _run_or_404(run_id)
    return _attachment(HttpResponse(run_to_csv(run), content_type="text/csv; charset=utf-8"),
                       f"{run.blueprint.slug}-run-{run.pk}.csv")


@require_safe
def results_csv(request, run_id):
    """The results grid's view (its filter, search and order from the URL) as CSV: one row per matching cell."""
    run = _run_or_404(run_id)
    spec = blueprint_of(run)
    if spec is None:
        raise Http404("this run's blueprint revision can no longer be read")
    query, problems = grid.GridQuery.from_params(request.GET)
    built = grid.build_grid(run, spec, query, problems, matrix=_matrix(run, spec))
    return _attachment(HttpResponse(grid_to_csv(run, spec, built), content_type="text/csv; charset=utf-8"),
                       f"{run.blueprint.slug}-run-{run.pk}-results.csv")


@require_safe
def report(request, run_id):
    """One HTML file that opens offline: inline CSS, no script, no address outside the file."""
    run = _run_or_404(run_id)
    response = StreamingHttpResponse(report_chunks(run), content_type="text/html; charset=utf-8")
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return _attachment(response, f"{run.blueprint.slug}-run-{run.pk}-report.html")
