"""The offline HTML report: one file, inline CSS, no script, no address outside the file.

Responses are rendered as the site renders them (runs/rendering.py): markdown sanitised, HTML
sanitised and shown in a sandboxed frame whose own policy forbids every fetch, plain text escaped;
links keep their text and lose their address. Descriptions are markdown, as on the blueprint page.

Speed: a run of 10,000 responses and 100,000 points is written in under 4 s (tests/bench/bench_results.py).
The summary goes through a template; the heatmap and each prompt's responses and points are built here
from plain rows (``values_list``, no model objects) with ``html.escape``, because Django's template
engine spent two thirds of the time on the 100,000 points (cProfile: 26 s of 39), and the JSON columns
are read as text and decoded here (Django's per-row JSON converters cost a further quarter). Most of
what remains is markdown-it. The report streams, ``REPORT_CHUNK`` prompts at a time, so memory stays flat.
"""

from __future__ import annotations

import json
from html import escape
from typing import Iterable, Iterator

from django.db.models import TextField
from django.db.models.functions import Cast
from django.template.loader import render_to_string
from django.utils import timezone

from runs.engine.judge import verdict_name
from runs.engine.matrix import AGGREGATION_WORDS, heat_class

from . import heatmap, insight
from .models import Annotation, PointAssessment, Response, Run
from .records import run_matrix
from .rendering import markdown_to_html, render as render_text
from .spec import parsed_blueprint
from .templatetags.results import fn_call_text, heat, score2, thousands, times

REPORT_CHUNK = 50  # prompts rendered at a time

_RESPONSE_FIELDS = ("pk", "prompt_index", "variant_id", "trial", "score", "not_evaluated_reason", "error",
                    "violated_should_not", "disagreement", "text")
_POINT_FIELDS = ("response_id", "kind", "text", "fn", "args_text", "path_id", "inverted", "multiplier", "score",
                 "error", "reflection", "verdicts_text", "override__score", "override__reason")
_read_json = json.JSONDecoder().raw_decode


def _json(text):
    """A JSON column read as text (SQL NULL and JSON null both read as None)."""
    return None if text is None else _read_json(text)[0]
_THUMBS = {n: f"{'👍' if n > 0 else '👎'} {label}" for n, label in Annotation.THUMBS}


def report_chunks(run: Run) -> Iterator[str]:
    spec = parsed_blueprint(run.revision)
    matrix = run_matrix(run, spec.prompts)
    columns = heatmap.columns(matrix)
    indices = list(range(len(spec.prompts))) if spec else []
    aggregates = run.aggregates or {}
    stats = aggregates.get("variants") or {}
    yield render_to_string("runs/report.html#head", {
        "run": run, "variants": [(c, stats[c.variant_id]) for c in columns if c.variant_id in stats],
        "agreement": aggregates.get("agreement"), "overall": aggregates.get("overall"),
        "generated_at": timezone.now(), "spec": spec,
        "description_html": markdown_to_html(spec.description, links=False) if spec and spec.description else "",
    })
    yield _findings_html(run)
    yield ('<table class="heatmap">\n  <thead><tr><th scope="col">Prompt</th>'
           + "".join(f'<th scope="col"><code>{escape(c.variant_id)}</code></th>' for c in columns)
           + "</tr></thead>\n  <tbody>\n")
    for start in range(0, len(indices), heatmap.HEATMAP_PAGE_SIZE):
        rows = heatmap.rows(matrix, indices[start:start + heatmap.HEATMAP_PAGE_SIZE])
        yield "".join(_heatmap_row(row) for row in rows)
    yield render_to_string("runs/report.html#heatmap-end", {})
    for start in range(0, len(indices), REPORT_CHUNK):
        yield _prompts_html(run, spec, indices[start:start + REPORT_CHUNK], matrix)
    yield render_to_string("runs/report.html#tail", {})


def _findings_html(run: Run) -> str:
    """The run's findings and checked summary (``runs.insight``), cells linked to the responses below."""
    context = insight.insight_context(run, lambda run_id, response_id: f"#r-{response_id}")
    summary = context.get("summary")
    context["summary_html"] = markdown_to_html(summary["summary"], links=False) if summary else ""
    return render_to_string("runs/report.html#findings", context)


def _cell_text(cell) -> str:
    """A matrix cell's figure (``heatmap.cell_text``) and, with trials, how they were combined."""
    shown = heatmap.cell_text(cell)
    if cell.k > 1:
        shown += f' <span class="muted small">{AGGREGATION_WORDS.get(cell.outcome.aggregation, "mean")} of {cell.k}</span>'
    return shown


def _heatmap_row(row) -> str:
    cells = "".join(heatmap.cell_html(cell, f"#r-{cell.response_id}" if cell and cell.response_id else "")
                    for cell in row.cells)
    return (f'<tr><th scope="row"><a href="#prompt-{row.index}"><code>{escape(row.prompt_id)}</code></a></th>'
            f'{cells}</tr>\n')


def _prompts_html(run: Run, spec, chunk: list[int], matrix) -> str:
    in_chunk = {"run": run, "prompt_index__in": chunk}
    responses = (Response.objects.filter(**in_chunk).order_by("prompt_index", "variant_id", "trial")
                 .values_list(*_RESPONSE_FIELDS))
    points: dict[int, list[tuple]] = {}
    # The JSON columns come as text and are read here (Django's per-row converters were a fifth of the time).
    for row in (PointAssessment.objects.filter(**{f"response__{k}": v for k, v in in_chunk.items()})
                .annotate(args_text=Cast("fn_args", TextField()), verdicts_text=Cast("verdicts", TextField()))
                .order_by("response_id", "position").values_list(*_POINT_FIELDS)):
        points.setdefault(row[0], []).append(row)
    notes = {pk: (thumbs, comment, who) for pk, thumbs, comment, who in Annotation.objects.filter(
        **{f"response__{k}": v for k, v in in_chunk.items()}).values_list("response_id", "thumbs", "comment", "who")}
    by_prompt: dict[int, list[tuple]] = {}
    for row in responses:
        by_prompt.setdefault(row[1], []).append(row)
    out: list[str] = []
    for index in chunk:
        prompt = spec.prompts[index]
        out.append(_prompt_head(index, prompt))
        cells = [c for c in matrix.row(index) if c is not None and c.k > 1]
        if cells:
            out.append('  <p class="muted small">Cells over trials: ' + "; ".join(
                f'<code>{escape(c.variant_id)}</code> <span class="chip {c.heat}">{_cell_text(c)}</span>'
                for c in cells) + "</p>\n")
        for row in by_prompt.get(index, ()):
            out.append(_response_html(row, prompt.render_as, points.get(row[0], ()), notes.get(row[0])))
        out.append("</section>\n")
    return "".join(out)


def _prompt_head(index: int, prompt) -> str:
    parts = [f'<section id="prompt-{index}">\n  <h3>Prompt <code>{escape(prompt.id)}</code></h3>\n']
    if prompt.description:
        parts.append(f'  <div class="muted description">{markdown_to_html(prompt.description, links=False)}</div>\n')
    for m in prompt.messages:
        content = ("<em>to be generated</em>" if m.content is None
                   else escape(m.content).replace("\n", "<br>"))
        parts.append(f'  <div class="msg"><span class="role">{escape(m.role)}</span>{content}</div>\n')
    if prompt.ideal_response is not None:
        ideal = render_text(prompt.ideal_response, prompt.render_as, links=False)
        parts.append(f"  <details><summary>Ideal response</summary>{_rendered(ideal, 'The ideal response')}"
                     f"</details>\n")
    return "".join(parts)


def _rendered(r, label: str) -> str:
    """As the site shows it (``Rendered.as_html``), and how much of it when it is long."""
    body = r.as_html(label)
    if r.truncated:
        body += (f'<p class="muted small">The first {thousands(r.shown)} of {thousands(r.length)} '
                 f"characters.</p>")
    return body


def _flags(should_not: bool, disagreement: bool) -> str:
    return ((' <span class="flag flag-not">✗</span>' if should_not else "")
            + (' <span class="flag flag-disagree">≠</span>' if disagreement else ""))


def _response_html(row: tuple, render_as: str, points: Iterable[tuple], note: tuple | None) -> str:
    pk, _, variant_id, trial, score, not_evaluated, error, should_not, disagreement, text = row
    if score is not None:
        shown = f'<span class="chip {heat(score)}">{score2(score)}</span>'
    else:
        why = not_evaluated or error
        shown = '<span class="chip heat-none">n/e</span> not evaluated' + (f": {escape(why)}" if why else "")
    parts = [f'  <details class="response" id="r-{pk}">\n    <summary><code>{escape(variant_id)}</code>'
             f'{f" trial {trial + 1}" if trial else ""} — {shown}{_flags(should_not, disagreement)}</summary>\n']
    if note is not None:
        thumbs, comment, who = note
        said = " ".join(x for x in (_THUMBS.get(thumbs, ""), f"“{escape(comment)}”" if comment else "") if x)
        parts.append(f'    <p class="annotation">Reviewer{f" {escape(who)}" if who else ""}: {said}</p>\n')
    if text is not None:
        parts.append("    " + _rendered(render_text(text, render_as, links=False), "The response") + "\n")
    elif error:
        parts.append(f'    <p class="problem">Nothing was generated: {escape(error)}</p>\n')
    for point in points:
        parts.append(_point_html(point))
    parts.append("  </details>\n")
    return "".join(parts)


def _chip(score: float | None) -> str:
    """A score's chip, as the ``heat`` and ``score2`` filters draw it (inlined: 100,000 points a report)."""
    if score is None:
        return '<span class="chip heat-none">n/e</span>'
    return f'<span class="chip {heat_class(score)}">{score:.2f}</span>'


def _point_html(point: tuple) -> str:
    _, kind, text, fn, fn_args, path_id, inverted, multiplier, score, error, reflection, verdicts, \
        override, override_reason = point
    fn_args, verdicts = _json(fn_args), _json(verdicts)
    effective = override if override is not None else score
    parts = [f'      <div class="point{" ne" if effective is None else ""}">{_chip(effective)}']
    if path_id:
        parts.append(f' <code class="muted small">{escape(path_id)}</code>')
    if inverted:
        parts.append(' <span class="badge badge-not">should not</span>')
    parts.append(f" <code>{escape(fn_call_text(fn, fn_args))}</code>" if kind == "function" else f" {escape(text)}")
    if multiplier != 1:
        parts.append(f' <span class="badge">weight ×{times(multiplier)}</span>')
    if override is not None:
        parts.append(f' <span class="badge">reviewer: {score2(override)}, “{escape(override_reason)}”; judges '
                     f"{score2(score)}</span>")
    if error:
        parts.append(f'<div class="reflection">Not evaluated: {escape(error)}</div>')
    for v in verdicts or ():
        mark = v.get("score")
        said = (f"failed: {escape(str(v.get('error')))}" if v.get("error")
                else f"{'–' if mark is None else f'{mark:.2f}'} — {escape(v.get('reflection') or '')}")
        parts.append(f'<div class="reflection">{escape(verdict_name(v))}: {said}</div>')
    if kind == "function" and reflection:
        parts.append(f'<div class="reflection">{escape(reflection)}</div>')
    parts.append("</div>\n")
    return "".join(parts)
