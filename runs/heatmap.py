"""The prompts x models heatmap: a page of the run's matrix, models best first."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from django.utils.safestring import SafeString, mark_safe

from runs.engine.matrix import Cell, Matrix, PassCount, prompt_summary

HEATMAP_PAGE_SIZE = 100
HEATMAP_SORTS = {"order": "Blueprint order", "lowest": "Lowest mean first", "spread": "Most spread first"}


@dataclass
class Column:
    variant_id: str
    rank: int | None
    mean: float | None
    std: float | None
    passes: PassCount | None = None  # its cells by whether they passed (Matrix.passes, the one rule)


@dataclass
class Row:
    index: int
    prompt_id: str
    summary: str
    weight: float | None
    cells: list[Cell | None]
    mean: float | None
    cells_html: SafeString = mark_safe("")  # the row's <td> cells, for the page (``cells_html``)
    href: str = ""  # the prompt's page (``with_cells_html``)


# What a cell without a score says, in the heatmap and the grid alike.
CELL_TEXT = {"failed": "failed", "not-evaluated": "n/e", "not-run": "not run"}
_HIDDEN = {"not-evaluated": " (not evaluated)", "pending": "pending", "running": "running"}


def cell_text(cell: Cell) -> str:
    """A cell's figure as every heatmap prints it: its score by its rule, or its state in words."""
    if cell.state == "scored":
        return f"{cell.shown:.2f}"
    text = CELL_TEXT.get(cell.state, "…")
    hidden = _HIDDEN.get(cell.state)
    return text + (f'<span class="visually-hidden">{hidden}</span>' if hidden else "")


def cell_html(cell: Cell | None, href: str) -> str:
    """One heatmap cell, linked to ``href`` (the response page, or its anchor in the report): the colour of
    its printed score, its figure, its flags and, with trials, how they were combined. Written here once for
    the run page, the heatmap pages and the offline report (1,000 cells a page: plain strings, not a template)."""
    if cell is None or not cell.response_id:
        return '<td class="cell cell-missing"><span class="muted">–</span></td>'
    colour = cell.heat if cell.state == "scored" else f"cell-{cell.state}"
    title = f' title="{escape(cell.reason[:200])}"' if cell.reason else ""
    parts = [f'<td class="cell {colour}"><a href="{href}"{title}>', cell_text(cell)]
    if cell.violated_should_not:
        parts.append('<span class="flag flag-not" title="meets a should-not point">✗<span class="visually-hidden">'
                     ' meets a should-not point</span></span>')
    if cell.disagreement:
        parts.append('<span class="flag flag-disagree" title="judges disagree on a point">≠<span '
                     'class="visually-hidden"> judges disagree</span></span>')
    if cell.k > 1:
        parts.append(f'<span class="trials" title="{cell.rule_text}">×{cell.k}</span>')
    parts.append("</a></td>")
    return "".join(parts)


def with_cells_html(rows_: list[Row], href_of, kept: dict | None = None, prompt_href_of=None) -> list[Row]:
    """Each row with its cells as HTML; ``href_of(response_id)`` gives a cell's link, ``prompt_href_of(index)`` the
    row's (a URL reversed once per page, not once a row: a hundred ``{% url %}`` were a sixth of a run page's CPU).
    ``kept``: a dict that lives as long as the matrix (its rows' HTML, written once for every page view of a kept
    matrix)."""
    for row in rows_:
        if prompt_href_of is not None:
            row.href = prompt_href_of(row.index)
        html = kept.get(row.index) if kept is not None else None
        if html is None:
            html = "".join(cell_html(c, href_of(c.response_id) if c and c.response_id else "") for c in row.cells)
            if kept is not None:
                kept[row.index] = html
        row.cells_html = mark_safe(html)
    return rows_


def columns(matrix: Matrix) -> list[Column]:
    """The matrix's columns (best mean first), ranked while they have a mean."""
    out = []
    for i, v in enumerate(matrix.variants):
        s = matrix.summaries[v]
        out.append(Column(v, i + 1 if s.mean is not None else None, s.mean, s.std, matrix.passes(v)))
    return out


def rows(matrix: Matrix, indices: list[int]) -> list[Row]:
    return [Row(i, matrix.prompts[i].id, prompt_summary(matrix.prompts[i], 90), matrix.prompts[i].weight,
                matrix.row(i), matrix.row_mean(i)) for i in indices if 0 <= i < len(matrix.prompts)]
