"""Small formatting helpers and the server-rendered SVG chart of the result pages (no chart library, no CDN)."""

from __future__ import annotations

import math

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from runs.engine.matrix import AGGREGATION_WORDS, STATE_LABELS, heat_class

register = template.Library()


def number(value) -> float | None:
    """A finite number, or None for anything else: None, "", a stored JSON null read back as text, NaN.

    The filters below take what a page hands them (a missing cell, a value read from JSON) and
    never fail on it: a page of a run always renders, whatever state the run ended in.
    """
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@register.filter
def score2(value) -> str:
    """A score with 2 places, or an en dash when there is none."""
    value = number(value)
    return "–" if value is None else f"{value:.2f}"


@register.filter
def heat(value) -> str:
    """The heatmap colour class (``runs.engine.matrix.heat_class``: floor(score x 10), ``heat-none`` without one)."""
    return heat_class(number(value))


# A cell's pass state as a badge: what "passed" means is the matrix's one rule (``Cell.pass_state``).
_PASS_BADGES = {
    "pass": '<span class="badge badge-ok pass-state pass-pass">passed</span>',
    "fail": '<span class="badge badge-error pass-state pass-fail">did not pass</span>',
    "undecided": '<span class="badge pass-state pass-undecided" title="a pass mark is set, but the cell has no verdict '
                 '(not scored, or a check could not be scored)">undecided</span>',
}
_NO_THRESHOLD = ('<span class="badge pass-state pass-none" title="the prompt sets no threshold, verdicts, gate or '
                 'minimum, so a cell neither passes nor fails">no threshold set</span>')


@register.filter
def pass_badge(value):
    """A cell's pass state as its badge (the partial ``pass-badge`` and ``runs.verdicts.verdict_cell_html``)."""
    return mark_safe(_PASS_BADGES.get(value, _NO_THRESHOLD) if isinstance(value, str) else _NO_THRESHOLD)


@register.filter
def aggregation_word(value) -> str:
    """How a cell's trials are combined, in words: mean, best, pass@k."""
    return AGGREGATION_WORDS.get(value or "mean", str(value))


@register.filter
def state_label(value) -> str:
    return STATE_LABELS.get(value, str(value))


@register.filter
def thousands(value) -> str:
    if value is None:
        return "–"
    return f"{int(value):,}"


@register.filter
def usd(value) -> str:
    value = number(value)
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


@register.filter
def duration_ms(value) -> str:
    value = number(value)
    if value is None:
        return "–"
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


@register.filter
def get(mapping, key):
    return (mapping or {}).get(key)


@register.filter
def alpha_reading(alpha) -> str:
    """Krippendorff's conventional reading of an alpha: 0.8 and up reliable, 0.667 and up tentative."""
    if alpha is None:
        return "undefined"
    if alpha >= 0.8:
        return "reliable"
    if alpha >= 0.667:
        return "tentative"
    return "unreliable"


@register.filter
def fn_call(pa) -> str:
    """``$fn(args)`` as a point function reads in a blueprint."""
    return fn_call_text(pa.fn, pa.fn_args)


def fn_call_text(fn: str, fn_args) -> str:
    import json

    if fn_args is None:
        return f"${fn}"
    return f"${fn}({json.dumps(fn_args, ensure_ascii=False)})"


@register.filter
def markdown(text) -> str:
    """A description written in markdown, rendered and sanitised as responses are (no images)."""
    from runs.rendering import markdown_to_html

    return mark_safe(markdown_to_html(text)) if text else ""


@register.filter
def took(run) -> str:
    """How long a run took (or has been going)."""
    from django.utils import timezone

    seconds = run.elapsed_s(timezone.now())
    if run.finished_at is not None and (seconds is None or seconds < 1):
        # A working time that was never measured (no start stamp, a stretch cut short) must not read as
        # "0 s" for a run that took longer: the span from its start (or creation) to its end says.
        span = (run.finished_at - (run.started_at or run.created_at)).total_seconds()
        if span >= 1:
            seconds = span
    if seconds is None:
        return "–"
    if seconds < 1:
        return "under 1 s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


ROW = 34
BAR_W = 520
CHART_W = 640


@register.simple_tag
def score_chart(variants, title="Score per model variant"):
    """A horizontal bar per model variant: the weighted mean, a whisker of ± one standard deviation.

    ``variants`` is a list of ``(column, stats)`` pairs as the run page has them. The bars are
    decoration for the table beside them (which has the same numbers), so the chart is one image
    with a title and a short description, not a second table for screen readers.
    """
    rows = list(variants)
    height = ROW * len(rows) + 24
    parts = [format_html('<svg class="score-chart" viewBox="0 0 {} {}" role="img" aria-labelledby="chart-title">', CHART_W, height),
             format_html('<title id="chart-title">{}</title>', title)]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = tick * BAR_W
        parts.append(format_html('<line class="tick" x1="{}" x2="{}" y1="0" y2="{}"/>', x, x, height - 16))
        parts.append(format_html('<text class="tick-label" x="{}" y="{}" text-anchor="middle">{}</text>',
                                 max(8, min(BAR_W - 8, x)), height - 4, f"{tick:g}"))
    for i, (column, stats) in enumerate(rows):
        y = i * ROW
        mean, std = stats.get("mean"), stats.get("std")
        parts.append(format_html('<text class="bar-label" x="0" y="{}">{}</text>', y + 12, column.variant_id))
        if mean is None:
            parts.append(format_html('<text class="bar-none" x="0" y="{}">not evaluated</text>', y + 27))
            continue
        width = max(1.0, mean * BAR_W)
        parts.append(format_html('<rect class="bar {}" x="0" y="{}" width="{}" height="12" rx="2"/>',
                                 heat(mean), y + 17, f"{width:.1f}"))
        if std:
            lo, hi = max(0.0, mean - std) * BAR_W, min(1.0, mean + std) * BAR_W
            parts.append(format_html('<line class="whisker" x1="{}" x2="{}" y1="{}" y2="{}"/>',
                                     f"{lo:.1f}", f"{hi:.1f}", y + 23, y + 23))
        parts.append(format_html('<text class="bar-value" x="{}" y="{}">{}{}</text>', BAR_W + 8, y + 28,
                                 f"{mean:.2f}", f" ± {std:.2f}" if std else ""))
    parts.append(mark_safe("</svg>"))
    return mark_safe("".join(str(p) for p in parts))


@register.filter
def percent(value) -> str:
    """A fraction as a whole percentage: 0.8333 -> "83%"."""
    value = number(value)
    return "–" if value is None else f"{value * 100:.0f}%"


@register.simple_tag
def grid_url(query, **changes) -> str:
    """The results grid's query string with ``changes`` (``runs.grid.GridQuery.url``)."""
    return query.url(**changes)


@register.filter
def signed2(value) -> str:
    """A difference with its sign, two places: +0.25, -0.10, 0.00."""
    value = number(value)
    if value is None:
        return "–"
    return "0.00" if abs(value) < 0.005 else f"{value:+.2f}"


@register.filter
def times(value) -> str:
    """A weight as people write it: 0.67, 2, 1.5 (never 0.6666666666666666)."""
    value = number(value)
    return "–" if value is None else (f"{value:.2f}".rstrip("0").rstrip(".") or "0")


MIN_ALPHA_POINTS = 10  # fewer points scored by two judges than this, and alpha says nothing


@register.filter
def too_few_for_alpha(agreement) -> bool:
    """Whether an agreement figure rests on too few points to read (alpha over 3 points is noise)."""
    points = number((agreement or {}).get("points"))
    return points is None or points < MIN_ALPHA_POINTS


@register.simple_tag
def min_alpha_points() -> int:
    return MIN_ALPHA_POINTS


@register.filter
def as_html(rendered, label) -> str:
    """A rendered text as every page shows it (``runs.rendering.Rendered.as_html``)."""
    return mark_safe(rendered.as_html(str(label)))
