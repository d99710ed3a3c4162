"""python manage.py compare RUN [--base BASE] [--json] [--markdown [--base-url URL]] [--fail-on-regression]

Without ``--base``: every two model variants of RUN against each other. With it: each variant of RUN against the
same variant of BASE (a run of the same blueprint; prompts matched by id, those whose content changed left out).
Each pair: the difference of the means (a minus b), its 95% interval, the number of prompts, and a verdict:
better or worse when the interval excludes 0, else cant_tell (``runs.engine.stats``).

Exit status: 0, or 1 with ``--fail-on-regression`` when some variant is a regression: worse than in BASE by the
gate's stricter rule (``runs.engine.stats.gate``: a one-sided paired sign-flip test per variant, Holm-adjusted
over the variants compared, at the family-wise level 0.1%, on a variant whose verdict is also "worse"), so that a
re-run with no true change fails at most 0.1% of the time however many variants it has; 2 when the runs cannot
be compared (no such run, another blueprint).
"""

from __future__ import annotations

import json
import re

from django.core.management.base import BaseCommand

from runs import compare as run_compare
from runs.engine import stats
from runs.engine.scoring import round2
from runs.models import Run
from runs.spec import RunRefused

MARKDOWN_LINES = 60
VERDICT_WORDS = {"better": "better", "worse": "**worse**", "cant_tell": "can't tell"}


def _signed(x: float | None) -> str:
    if x is None:
        return "–"
    x = round2(x)
    return f"+{x:.2f}" if x > 0 else f"{x:.2f}"


def _plain(x: float | None) -> str:
    return "–" if x is None else f"{round2(x):.2f}"


def _interval(pair) -> str:
    return "too few prompts" if pair.low is None else f"{_plain(pair.low)} to {_plain(pair.high)}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _inline(text: str) -> str:
    """Text from a blueprint or a model id as plain markdown: no link, emphasis, code or HTML of its own."""
    return re.sub(r"([\\`*_\[\]()<>#!|~])", r"\\\1", " ".join(str(text).split()))


def markdown(found: run_compare.Decisions, base_url: str = "") -> str:
    """A summary for a pull-request comment: at most ``MARKDOWN_LINES`` lines, each regression linked to its diffs."""
    run, base = found.run, found.base
    base_url = base_url.rstrip("/")
    lines: list[str] = []
    if base is None:
        lines += [f"### Run {run.pk}: model variants against each other", "",
                  "| A | B | A − B | 95% interval | prompts | verdict |", "|---|---|---:|---|---:|---|"]
        rows = [f"| `{_cell(p.a)}` | `{_cell(p.b)}` | {_signed(p.delta)} | {_interval(p)} | {p.n} | "
                f"{VERDICT_WORDS[p.verdict]} |" for p in found.pairs]
    else:
        worse = found.regressions
        shown_worse = sum(1 for p in found.pairs if p.verdict == "worse")
        head = (f"**{len(worse)} regression{'s' if len(worse) != 1 else ''}**" if worse else "No regression")
        if shown_worse > len(worse):
            head += (f" ({shown_worse - len(worse)} variant{'s' if shown_worse - len(worse) != 1 else ''} worse at 95% "
                     f"but not beyond the gate's {1 - stats.GATE_LEVEL:.1%})")
        lines += [f"### Run {run.pk} against baseline run {base.pk}: {head}", "", gate_line(found), "",
                  "| model variant | baseline | this run | change | 95% interval | prompts | verdict |",
                  "|---|---:|---:|---:|---|---:|---|"]
        rows = [f"| `{_cell(p.a)}` | {_plain(p.mean_b)} | {_plain(p.mean_a)} | {_signed(p.delta)} | {_interval(p)} | "
                f"{p.n} | {VERDICT_WORDS[p.verdict]} |" for p in found.pairs]
    budget = MARKDOWN_LINES - len(lines) - 8  # room for the notes and the regressions' links below
    if len(rows) > budget:
        # keep every regression's row, then the rest in order
        keep = [r for r, p in zip(rows, found.pairs) if p.verdict == "worse"][:budget]
        keep += [r for r, p in zip(rows, found.pairs) if p.verdict != "worse"][:budget - len(keep)]
        rows = keep + [f"| … {len(found.pairs) - len(keep)} more pairs | | | | | | |"]
    lines += rows
    robust = [p.robustness.line for p in found.pairs if p.robustness is not None]
    room = MARKDOWN_LINES - len(lines) - 12  # keep room for the cells that got worse and the notes
    if robust and room > 2:
        lines += ["", "What would flip it (each verdict decided again under each alternative, from stored results):"]
        lines += [f"- {_inline(line)}" for line in robust[:room - 2]]
        if len(robust) > room - 2:
            lines.append(f"- … {len(robust) - (room - 2)} more pairs (`--json` has them all)")
    if base is not None and found.result is not None:
        result = found.result
        if result.changed_prompts:
            lines += ["", f"{len(result.changed_prompts)} prompt(s) changed between the revisions and are left out: "
                      + ", ".join(f"`{_cell(p)}`" for p in result.changed_prompts[:10])
                      + (" …" if len(result.changed_prompts) > 10 else "")]
        cells = [c for c in result.listed if c.delta < 0]  # every cell that got worse under the FDR rule
        room = MARKDOWN_LINES - len(lines) - 3
        if cells and room > 0:
            lines += ["", f"Cells that got worse (Benjamini–Hochberg, FDR {result.level:.0%}), most certain first:"]
            for c in cells[:room]:
                url = base_url + run_compare.diff_url(run.pk, base.pk, c.prompt_id, c.variant_id)
                lines.append(f"- [`{_cell(c.prompt_id)}` × `{_cell(c.variant_id)}`]({url}): "
                             f"{_plain(c.before)} → {_plain(c.after)} ({_signed(c.delta)})")
        moved = result.movement
        if moved.alike is not None:
            lines += ["", f"All {moved.tested} cells moved, each by {_signed(moved.alike)}: the whole run shifted "
                      "alike, so no single cell stands out from the others."]
        elif found.regressions and not cells:
            lines += ["", "No single cell stands out; the regression is spread over many prompts."]
    gate_note = (f" _A regression (the gate) only when a variant is worse beyond doubt: a one-sided paired sign-flip "
                 f"test, Holm-adjusted over the variants, at the family-wise {1 - stats.GATE_LEVEL:.1%} level._")
    lines += ["", "_Better or worse only when the whole 95% interval (a paired bootstrap over prompts; for pass/fail "
              "scores Newcombe's score interval) is on one side of 0._" + (gate_note if base is not None else "")]
    return "\n".join(lines[:MARKDOWN_LINES]) + "\n"


def gate_line(found: run_compare.Decisions) -> str:
    """The gate's decision and its level, as ``--fail-on-regression`` acts on it."""
    result = found.result
    level = result.gate_level_words if result is not None else f"{stats.GATE_LEVEL:.1%}"
    failing = ", ".join(f"`{_cell(p.a)}`" for p in found.regressions)
    decision = f"**fails** on {failing} (exit 1)" if failing else "passes (exit 0)"
    return f"Gate (`--fail-on-regression`, family-wise level {level}): {decision}."


def text(found: run_compare.Decisions) -> str:
    out = []
    if found.base is None:
        out.append(f"Run {found.run.pk}: model variants against each other")
        for v, m in found.models.items():
            out.append(f"  {v}: mean {_plain(m.mean)} (95% interval {_plain(m.low)} to {_plain(m.high)}, n={m.n})")
    else:
        out.append(f"Run {found.run.pk} against run {found.base.pk}")
        if found.result and found.result.changed_prompts:
            out.append(f"  {len(found.result.changed_prompts)} prompt(s) changed between the revisions, left out: "
                       + ", ".join(found.result.changed_prompts[:20]))
    for p in found.pairs:
        label = p.a if found.base is not None else f"{p.a} - {p.b}"
        out.append(f"  {label}: {_signed(p.delta)} [{_interval(p)}] n={p.n} {p.verdict}")
        if p.robustness is not None:
            out.append(f"    {p.robustness.line}")
    if found.base is not None:
        failing = ", ".join(p.a for p in found.regressions)
        out.append(f"  gate ({stats.GATE_RULE}): " + (f"fails on {failing}" if failing else "passes"))
    return "\n".join(out) + "\n"


class Command(BaseCommand):
    help = ("Compare a run's model variants with each other, or (--base) each with the same variant in a baseline "
            "run: the difference with its 95% interval and a verdict (better, worse, cant_tell).")
    # The site's system checks (URLs, templates, every view imported) are `manage.py check`'s and the
    # server's business; here they cost about 0.3 s of every invocation (tests/bench/bench_cli_run.py).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, metavar="RUN")
        parser.add_argument("--base", type=int, metavar="BASE", help="a baseline run of the same blueprint")
        shape = parser.add_mutually_exclusive_group()
        shape.add_argument("--json", action="store_true", help='print {"pairs": [{"a", "b", "delta", "low", "high", '
                           '"verdict", "n", "robustness"}, ...], "bounds": ...} and more')
        shape.add_argument("--markdown", action="store_true", help="print a summary for a pull-request comment")
        parser.add_argument("--base-url", default="", metavar="URL",
                            help="make the markdown's links absolute (the site's address, e.g. https://evals.example)")
        parser.add_argument("--fail-on-regression", action="store_true",
                            help="exit 1 when some variant is a regression: worse than in BASE by a one-sided "
                            "paired sign-flip test, Holm-adjusted over the variants, at the family-wise 99.9%% level "
                            "(stricter than the 95%% verdicts)")

    def handle(self, *args, **options):
        runs = Run.objects.select_related("revision", "blueprint")
        run = runs.filter(pk=options["run_id"]).first()
        if run is None:
            self.stderr.write(f"no run {options['run_id']}")
            raise SystemExit(2)
        base = None
        if options["base"] is not None:
            base = runs.filter(pk=options["base"]).first()
            if base is None:
                self.stderr.write(f"no run {options['base']}")
                raise SystemExit(2)
        try:
            found = run_compare.decisions(run, base)
        except (run_compare.CannotCompare, RunRefused) as exc:
            self.stderr.write(str(getattr(exc, "message", exc)))
            raise SystemExit(2)
        for r in (run, base):
            if r is not None and not r.is_finished:
                self.stderr.write(f"note: run {r.pk} has not finished ({r.status}); the figures cover what is stored")
        if options["json"]:
            self.stdout.write(json.dumps(found.to_dict(), ensure_ascii=False, indent=2) + "\n", ending="")
        elif options["markdown"]:
            self.stdout.write(markdown(found, options["base_url"]), ending="")
        else:
            self.stdout.write(text(found), ending="")
        if options["fail_on_regression"]:
            if base is None:
                self.stderr.write("note: --fail-on-regression needs --base; nothing to gate on")
            elif found.regressions:
                self.stderr.write("regression: " + ", ".join(p.a for p in found.regressions)
                                  + f" worse than in run {base.pk} beyond the gate's family-wise "
                                  f"{1 - stats.GATE_LEVEL:.1%} level")
                raise SystemExit(1)
