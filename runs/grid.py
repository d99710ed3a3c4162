# Over 500 lines: the grid's query, filters, search, sort and rows belong to one URL-driven view of the matrix.
"""The results grid: prompts x models with the start of each response, filters, search and sort.

Everything the grid shows is decided by a ``GridQuery`` read from the URL (so a view can be
bookmarked and shared): which cells count (a filter: below a threshold, errors, not evaluated,
judges disagree, a should-not point met, overridden), a text or regular-expression search over
prompts, responses and judges' reflections, and the order of the prompts (by score, spread,
latency or cost). A prompt is listed when one of its cells matches; the other cells of its row
stay, dimmed. Per model: the pass rate (the matrix's rule, ``Matrix.passes``: the blueprint's pass marks,
not the view's score cut), the mean, and how many cells are in each state, over the whole run (not the
filter). The view's ``threshold`` is a score cut for the "scored below" filter and the ``n`` key only.

Costs are bounded for a run of 10,000 responses: one pass over the responses' small columns, one
query for overrides, one for reflections when searching, and one for the text of the page's
cells; row objects only for the page's prompts (which prompts a view lists is read off the matrix's cells and
kept with it). A regular expression runs in Python's ``regex`` engine (JavaScript syntax, as ``$matches``)
with a time limit per text and for the whole search; a search that runs out of time says so.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from itertools import groupby
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Q
from django.db.models import TextField
from django.db.models.functions import Cast, Left
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from blueprints.spec.jsregex import RegexError, compile_js
from evalsite.once import OnePerKey
from runs.engine.matrix import STATE_LABELS, Cell, Matrix, PassCount, VariantSummary, prompt_summary
from runs.engine.aggregates import variant_intervals
from runs.engine.stats import MeanInterval

from .heatmap import CELL_TEXT
from .models import PointAssessment, Response, Run
from .records import page_matrix, run_matrix

FILTERS = {
    "all": "Every response",
    "failures": "Scored below the score cut",
    "not-passed": "Did not pass (the blueprint's pass mark)",
    "errors": "Errors",
    "not-evaluated": "Not evaluated",
    "not-run": "Not run (the run stopped first)",
    "disagree": "Judges disagree",
    "should-not": "Meets a should-not point",
    "overridden": "Overridden by a reviewer",
    "thumbs-down": "Thumbs down from a reviewer",
    "annotated": "Annotated by a reviewer",
}
SORTS = {"order": "Blueprint order", "score": "Lowest score first", "spread": "Widest spread first",
         "latency": "Slowest first", "cost": "Costliest first"}
PAGE_SIZE = 50
PREVIEW_CHARS = 160
MAX_QUERY_CHARS = 200
REGEX_TIMEOUT_S = 0.05  # per text
SEARCH_BUDGET_S = 0.25  # for the whole search: past it the results are partial, and say so
_PLACEHOLDER = 987654321


@dataclass(frozen=True)
class GridQuery:
    filter: str = "all"
    threshold: float = 0.8
    q: str = ""
    regex: bool = False
    sort: str = "order"
    page: int = 1

    @classmethod
    def from_params(cls, params) -> tuple[GridQuery, list[str]]:
        """The query a URL asks for, and what in it could not be used (each with the fix)."""
        problems = []
        flt = params.get("filter", "all")
        if flt not in FILTERS:
            problems.append(f"unknown filter '{flt[:40]}': use one of {', '.join(FILTERS)}")
            flt = "all"
        sort = params.get("sort", "order")
        if sort not in SORTS:
            problems.append(f"unknown order '{sort[:40]}': use one of {', '.join(SORTS)}")
            sort = "order"
        threshold = 0.8
        raw = params.get("threshold")
        if raw not in (None, ""):
            try:
                threshold = float(raw)
                if not (math.isfinite(threshold) and 0 <= threshold <= 1):
                    raise ValueError
            except ValueError:
                problems.append(f"the threshold must be a number from 0 to 1, not '{str(raw)[:40]}'")
                threshold = 0.8
        q = params.get("q", "")
        if len(q) > MAX_QUERY_CHARS:
            problems.append(f"the search is cut to its first {MAX_QUERY_CHARS} characters")
            q = q[:MAX_QUERY_CHARS]
        try:
            page = max(1, int(params.get("page", 1)))
        except ValueError:
            page = 1
        return cls(flt, threshold, q.strip(), params.get("regex") in ("1", "on", "true"), sort, page), problems

    def url(self, **changes) -> str:
        """The query string of this view with ``changes`` (defaults left out, so links stay short)."""
        values = {**self.__dict__, **changes}
        if "page" not in changes:
            values["page"] = 1
        out = {}
        for key, default in (("filter", "all"), ("threshold", 0.8), ("q", ""), ("regex", False), ("sort", "order"),
                             ("page", 1)):
            value = values[key]
            if value != default:
                out[key] = "1" if value is True else (f"{value:g}" if isinstance(value, float) else value)
        return "?" + urlencode(out) if out else "?"


@dataclass
class GridCell:
    """One cell as the grid shows it: the matrix's cell (every figure comes from it) and what this view adds."""

    variant_id: str
    cell: Cell | None = None
    matches: bool = True  # the filter and the search keep it
    below: bool = False  # scored below the query's threshold
    preview: str = ""  # the start of the response it links to
    href: str = ""  # its response page
    open_href: str = ""  # the fragment that opens it in place

    @property
    def state(self) -> str:
        return self.cell.state if self.cell is not None else "missing"

    @property
    def state_label(self) -> str:
        return STATE_LABELS.get(self.state, self.state)

    @property
    def score(self) -> float | None:
        return self.cell.shown if self.cell is not None else None

    @property
    def bucket(self) -> str:
        return self.cell.heat if self.cell is not None else "heat-none"

    @property
    def response_id(self) -> int | None:
        return self.cell.response_id if self.cell is not None else None

    @property
    def trials(self) -> int:
        return self.cell.k if self.cell is not None else 0

    @property
    def rule(self) -> str:
        """The rule's word (mean, best, pass@k): the CSV's ``aggregation`` column."""
        return self.cell.rule_word if self.cell is not None else ""

    @property
    def pass_state(self) -> str:
        return self.cell.pass_state if self.cell is not None else ""

    # Flags and figures: the matrix cell's own.
    violated_should_not = property(lambda self: bool(self.cell and self.cell.violated_should_not))
    disagreement = property(lambda self: bool(self.cell and self.cell.disagreement))
    overridden = property(lambda self: bool(self.cell and self.cell.overridden))
    thumbs = property(lambda self: self.cell.thumbs if self.cell else None)
    latency_ms = property(lambda self: self.cell.latency_ms if self.cell else None)
    cost_usd = property(lambda self: self.cell.cost_usd if self.cell else None)
    reason = property(lambda self: self.cell.reason if self.cell else "")


_THUMBS = {-1: '<span class="flag" title="a reviewer gave it a thumbs down">👎</span>',
           1: '<span class="flag" title="a reviewer gave it a thumbs up">👍</span>',
           0: '<span class="flag" title="a reviewer left a comment">💬</span>'}


def cell_html(cell: GridCell, index: int, col: int, oob: bool = False) -> str:
    """One grid cell as the page and the live poll send it (plain strings, not a template: 500 a page)."""
    swap = ' hx-swap-oob="outerHTML"' if oob else ""
    if not cell.response_id:
        return f'<td id="cell-{index}-{col}" class="gcell cell-missing"{swap}><span class="muted">–</span></td>'
    state = cell.state
    classes = ["gcell", cell.bucket if state == "scored" else f"cell-{state}"]
    if not cell.matches:
        classes.append("dim")
    if cell.below or state == "failed":
        classes.append("below")
    href = escape(cell.href)
    text = f"{cell.score:.2f}" if state == "scored" else CELL_TEXT.get(state, f"{escape(state)}…")
    parts = [f'<td id="cell-{index}-{col}" class="{" ".join(classes)}" tabindex="-1" data-response="{href}"{swap}>\n'
             f'  <div class="gcell-head"><a href="{href}" class="gcell-score">{text}</a>']
    if cell.violated_should_not:
        parts.append('<span class="flag flag-not" title="meets a should-not point">✗</span>')
    if cell.disagreement:
        parts.append('<span class="flag flag-disagree" title="judges disagree on a point">≠</span>')
    if cell.overridden:
        parts.append('<span class="flag" title="a reviewer overrode a point">✎</span>')
    parts.append(_THUMBS.get(cell.thumbs, ""))
    if cell.trials > 1:
        parts.append(f'<span class="trials" title="{cell.cell.rule_text}">×{cell.trials}</span>')
    parts.append("</div>\n")
    if cell.preview or cell.reason:
        summary = (escape(cell.preview) if cell.preview else
                   f'<span class="problem">{escape(Truncator(cell.reason).chars(160))}</span>')
        parts.append(f'  <details class="gcell-more">\n    <summary>{summary}</summary>\n'
                     f'    <div class="gcell-full" hx-get="{escape(cell.open_href)}" hx-trigger="toggle from:closest '
                     f'details once" hx-swap="innerHTML"><span class="muted small">Loading…</span></div>\n'
                     f'  </details>\n')
    parts.append("</td>")
    return "".join(parts)


@dataclass
class GridRow:
    index: int
    prompt_id: str
    summary: str
    cells: list[GridCell]
    mean: float | None = None  # the matrix's row mean
    spread: float | None = None

    @property
    def cells_html(self) -> SafeString:
        return mark_safe("".join(cell_html(c, self.index, col) for col, c in enumerate(self.cells)))


@dataclass
class ModelStats:
    """One model's line over the whole run: the matrix's summary and its cells by whether they passed."""

    variant_id: str
    summary: VariantSummary | None
    passes: PassCount = field(default_factory=PassCount)  # the matrix's rule (Matrix.passes)
    interval: MeanInterval | None = None  # the mean's 95% interval (runs.engine.stats.mean_interval)

    @property
    def mean(self) -> float | None:
        return self.summary.mean if self.summary else None

    @property
    def low(self) -> float | None:
        return self.interval.low if self.interval else None

    @property
    def high(self) -> float | None:
        return self.interval.high if self.interval else None

    @property
    def counts(self) -> dict[str, int]:
        return self.summary.counts if self.summary else {}

    @property
    def scored(self) -> int:
        return self.summary.n if self.summary else 0

    @property
    def pass_rate(self) -> float | None:
        return self.passes.rate

    @property
    def not_evaluated(self) -> int:
        return self.counts.get("not-evaluated", 0)

    @property
    def not_run(self) -> int:
        return self.counts.get("not-run", 0)

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0)

    @property
    def waiting(self) -> int:
        return self.counts.get("pending", 0) + self.counts.get("running", 0)


@dataclass
class Grid:
    query: GridQuery
    models: list[ModelStats]
    rows: list[GridRow]  # this page's
    matching: int  # prompts that match, on every page
    cells_matching: int
    pages: int
    problems: list[str]
    search_partial: bool = False
    matching_rows: list[GridRow] = field(default_factory=list, repr=False)  # every page's (the CSV download)


def grid_rows(matrix: Matrix, indices=None) -> dict[int, GridRow]:
    """A row per prompt of the matrix (or of the prompts at ``indices``, in their order), a cell per column."""
    wanted = range(len(matrix.prompts)) if indices is None else [i for i in indices if 0 <= i < len(matrix.prompts)]
    return {i: GridRow(i, matrix.prompts[i].id, "", [GridCell(v, matrix.cell(i, v)) for v in matrix.variants],
                       matrix.row_mean(i), matrix.row_spread(i))
            for i in wanted}


_one_drawing = OnePerKey()  # by the id of a matrix whose intervals are wanted


def model_intervals(matrix: Matrix) -> dict[str, MeanInterval]:
    """Each model's prompt-weighted mean over its cell scores, with its 95% bootstrap interval (the engine's
    ``aggregates.variant_intervals``: worked out once per matrix, stored with a finished run's aggregates).

    One computation per matrix at a time, as ``runs.spec`` parses: the other threads that want a cold kept matrix's
    intervals wait for it (20 viewers of a run just built each drew their own thousand resamples)."""
    with _one_drawing(id(matrix)):  # a Matrix is not hashable; while a thread here holds it, no other has its id
        return variant_intervals(matrix)


def model_stats(matrix: Matrix) -> list[ModelStats]:
    intervals = model_intervals(matrix)
    return [ModelStats(v, matrix.summaries.get(v), matrix.passes(v), intervals.get(v)) for v in matrix.variants]


VIEWS_KEPT = 8  # filtered or sorted views kept per matrix (a prompt position each: 8 bytes a prompt a view)
_VIEWS_LOCK = threading.Lock()


def matching_prompts(matrix: Matrix, query: GridQuery, searched: dict | None = None) -> tuple[array, int]:
    """The positions of the prompts ``query`` lists (one of their cells matches), in its order, and how many
    cells match: read off the matrix's cells, no row built. Without a search, kept with the matrix (a kept matrix
    is its run's at one ``results_version``: it changes when the run's results do), the last ``VIEWS_KEPT``."""
    key = (query.filter, query.threshold, query.sort)
    if searched is None:
        with _VIEWS_LOCK:
            kept = matrix.__dict__.get("_grid_views", {}).get(key)  # kept with the matrix, as the heatmap's HTML is
        if kept is not None:
            return kept
    keep = _filter(query)
    n, columns = len(matrix.prompts), set(matrix.variants)
    counts: dict[int, int] = {}
    for (index, variant_id), cell in matrix.cells.items():
        if 0 <= index < n and variant_id in columns and _matches(cell, index, keep, searched):
            counts[index] = counts.get(index, 0) + 1
    found = (array("l", _ordered(matrix, sorted(counts), query.sort)), sum(counts.values()))
    if searched is None:
        with _VIEWS_LOCK:
            views = matrix.__dict__.setdefault("_grid_views", {})
            views[key] = found
            while len(views) > VIEWS_KEPT:
                del views[next(iter(views))]
    return found


def build_grid(run: Run, bp, query: GridQuery, problems: list[str] | None = None, *, matrix: Matrix | None = None,
               page_only: bool = False) -> Grid:
    """The grid of ``query``'s page. ``page_only``: the page's rows alone, no ``matching_rows`` (what the page
    needs; the CSV download wants every matching row): a big run's view then makes only its page's rows instead
    of one for every prompt (a run of 2,000 prompts x 10 models: 20,000 cells a view); which prompts a filtered
    or sorted view lists is read off the matrix's cells (``matching_prompts``)."""
    problems = list(problems or [])
    plain = page_only and query.filter == "all" and not query.q and query.sort == "order"
    if matrix is None and plain:
        # Every prompt in order: the page's prompts' cells with the whole run's model lines (records.page_matrix;
        # the whole matrix when that cannot be: a run at work, figures not stored, a prompt with no cell).
        pages = max(1, math.ceil(len(bp.prompts) / PAGE_SIZE))
        start = (min(query.page, pages) - 1) * PAGE_SIZE
        matrix = page_matrix(run, bp.prompts, range(start, start + PAGE_SIZE), every=True)
    matrix = matrix if matrix is not None else run_matrix(run, bp.prompts)
    models = model_stats(matrix)
    keep = _filter(query)
    searched, partial = None, False
    if plain:
        indices, cells_matching = matrix.prompts_with_cells()
    else:
        searched, partial = _search(run, bp, query, problems) if query.q else (None, False)
        indices, cells_matching = matching_prompts(matrix, query, searched)
    pages = max(1, math.ceil(len(indices) / PAGE_SIZE))
    page = min(query.page, pages)
    matching_rows = [] if page_only else list(grid_rows(matrix, indices).values())
    shown = (matching_rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE] if not page_only else
             list(grid_rows(matrix, indices[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]).values()))
    for row in (shown if page_only else matching_rows):
        _mark(row, keep, searched, query.threshold)
    _add_previews(shown, run)
    for row in shown:
        row.summary = prompt_summary(bp.prompts[row.index])
    return Grid(query, models, shown, len(indices), cells_matching, pages, problems, partial, matching_rows)


def _matches(cell: Cell, index: int, keep, searched: dict | None) -> bool:
    """The filter and the search keep this cell of the prompt at ``index``."""
    return keep(cell) and (searched is None or index in searched["prompts"]
                           or any(t.response_id in searched["responses"] for t in cell.trials))


def _mark(row: GridRow, keep, searched: dict | None, threshold: float) -> None:
    for cell in row.cells:
        cell.below = cell.score is not None and cell.score < threshold
        cell.matches = cell.cell is not None and _matches(cell.cell, row.index, keep, searched)


def changed_cells(run: Run, bp, query: GridQuery, since) -> tuple[list[tuple[int, int, GridCell]], list[ModelStats]]:
    """``(prompt index, column, cell)`` for every cell whose response started or finished since ``since``
    (the live poll: a few cells, not the grid), and the per-model lines over the whole run."""
    indices = set(Response.objects.filter(run=run).filter(finished_at__gte=since)
                  .values_list("prompt_index", flat=True))
    indices |= set(Response.objects.filter(run=run, claimed_at__gte=since).values_list("prompt_index", flat=True))
    matrix = run_matrix(run, bp.prompts)
    models = model_stats(matrix)
    if not indices:
        return [], models
    rows = grid_rows(matrix, sorted(indices))
    keep = _filter(query)
    searched = None
    if query.q:  # the search, over the changed responses alone
        ids = {t.response_id for i in indices if i in rows for c in rows[i].cells if c.cell for t in c.cell.trials}
        searched, _ = _search(run, bp, query, [], only=ids)
    out = []
    changed = [rows[i] for i in sorted(indices) if i in rows]
    _add_previews(changed, run)
    for row in changed:
        _mark(row, keep, searched, query.threshold)
        out.extend((row.index, col, mark_safe(cell_html(cell, row.index, col, oob=True)))
                   for col, cell in enumerate(row.cells) if cell.state != "missing")
    return out, models


def _filter(query: GridQuery):
    """Whether the filter keeps a matrix cell (by what its grid cell shows: the score printed, 2 places)."""
    t = query.threshold
    return {
        "all": lambda c: True,
        "failures": lambda c: c.shown is not None and c.shown < t,
        "not-passed": lambda c: c.pass_state == "fail",
        "errors": lambda c: c.state == "failed",
        "not-run": lambda c: c.state == "not-run",
        "not-evaluated": lambda c: c.state == "not-evaluated",
        "disagree": lambda c: c.disagreement,
        "should-not": lambda c: c.violated_should_not,
        "overridden": lambda c: c.overridden,
        "thumbs-down": lambda c: c.thumbs == -1,
        "annotated": lambda c: c.thumbs is not None,
    }[query.filter]


def _ordered(matrix: Matrix, indices: list[int], sort: str) -> list[int]:
    """Prompt positions (in blueprint order) in the order ``sort`` asks for; ties stay in blueprint order."""
    if sort == "score":
        means = {i: matrix.row_mean(i) for i in indices}
        return sorted(indices, key=lambda i: (means[i] is None, means[i] if means[i] is not None else 0, i))
    if sort == "spread":
        spreads = {i: matrix.row_spread(i) for i in indices}
        return sorted(indices, key=lambda i: (spreads[i] is None, -(spreads[i] or 0.0), i))
    if sort == "latency":
        return sorted(indices, key=lambda i: (-max((c.latency_ms or 0) if c is not None else 0
                                                   for c in matrix.row(i)), i))
    if sort == "cost":
        return sorted(indices, key=lambda i: (-sum((c.cost_usd or 0) for c in matrix.row(i) if c is not None),
                                              i))
    return indices


def _search(run: Run, bp, query: GridQuery, problems: list[str], only: set[int] | None = None
            ) -> tuple[dict, bool]:
    """Prompts and responses the search finds: in the prompt's text, the response, or what a judge said
    (a point's reflection or any judge's own). ``only``: look at these responses alone (the live poll)."""
    found = {"prompts": set(), "responses": set()}
    responses = Response.objects.filter(run=run)
    points = PointAssessment.objects.filter(response__run=run)
    if only is not None:
        responses, points = responses.filter(pk__in=only), points.filter(response_id__in=only)
    if query.regex:
        try:
            pattern = compile_js(query.q, ignore_case=True)
        except RegexError as exc:
            problems.append(f"the regular expression cannot be read: {exc}; search for it as text, or fix it")
            return {"prompts": set(), "responses": set()}, False
        budget = time.monotonic() + SEARCH_BUDGET_S

        def hit(text: str) -> bool | None:
            if time.monotonic() > budget:
                return None
            try:
                return pattern.search(text or "", timeout=REGEX_TIMEOUT_S, concurrent=True) is not None
            except TimeoutError:
                return False

        for i, prompt in enumerate(bp.prompts):
            if hit(_prompt_text(prompt)):
                found["prompts"].add(i)
        partial = False
        for pk, text in responses.values_list("pk", "text").iterator(chunk_size=500):
            result = hit(text or "")
            if result is None:
                partial = True
                break
            if result:
                found["responses"].add(pk)
        if not partial and len(found["responses"]) < responses.count():
            # What judges said, as stored (JSON text, not decoded: a hundred thousand rows must stay cheap),
            # one search per response over all its points (the regex call, not the text, is what costs).
            rows = (points
                    .annotate(said=Cast("verdicts", TextField())).order_by("response_id")
                    .values_list("response_id", "reflection", "said").iterator(chunk_size=2000))
            for response_id, group in groupby(rows, key=lambda row: row[0]):
                if response_id in found["responses"]:
                    continue
                result = hit("\n\n".join(f"{reflection}\n{said}" for _, reflection, said in group))
                if result is None:
                    partial = True
                    break
                if result:
                    found["responses"].add(response_id)
        if partial:
            problems.append(f"the search stopped after {SEARCH_BUDGET_S:g} s: the results are partial; "
                            "narrow the expression")
        return found, partial
    needle = query.q.lower()
    found["prompts"] = {i for i, p in enumerate(bp.prompts) if needle in _prompt_text(p).lower()}
    found["responses"] = set(responses.filter(text__icontains=query.q).values_list("pk", flat=True))
    found["responses"] |= set(points.filter(
        Q(reflection__icontains=query.q) | Q(verdicts__icontains=query.q)).values_list("response_id", flat=True))
    return found, False


def _prompt_text(prompt) -> str:
    return "\n".join([prompt.id] + [m.content or "" for m in prompt.messages])


def _add_previews(rows: list[GridRow], run: Run) -> None:
    """The start of each shown cell's response, in one query, and its links (reversed once, not per cell)."""
    wanted = {pk: c for r in rows for c in r.cells if (pk := c.response_id) is not None}
    page, opener = (reverse(name, args=[run.pk, _PLACEHOLDER]) for name in ("runs:response", "runs:cell"))
    mark = str(_PLACEHOLDER)
    for pk, cell in wanted.items():
        cell.href, cell.open_href = page.replace(mark, str(pk)), opener.replace(mark, str(pk))
    for pk, start in (Response.objects.filter(pk__in=wanted)
                      .annotate(start=Left("text", PREVIEW_CHARS + 1)).values_list("pk", "start")):
        text = " ".join((start or "").split())
        wanted[pk].preview = text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…"
