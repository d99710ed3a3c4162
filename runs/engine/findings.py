"""Findings: what a run proves that nobody asked, computed from its figures (no LLM), ranked and de-duplicated.

Each finding has an id (``F1`` best first), a kind, a plain sentence, the figure it rests on and the cells that
prove it. Kinds, in the order of their weight when they tie:

* ``should_not``: a model met should-not points (counts per model);
* scanner kinds (``refusal``, ``identical``, ``cut_off``, ``empty``, ``language``, ``self_id``,
  ``judge_unreadable``; ``scanners.py``) when notable;
* ``difference``: a paired verdict that is not "can't tell" (the compare page's);
* ``bound_too_wide``: a model's deal-breaker bound (should-not and critical points, ``bounds.py``) does not reach
  under the rate a decision needs: "too few answers to say it is under 1%", with the answers that would;
* ``weakest``: a model's prompts where it is far below the other models;
* ``judge_disagreement``: points the judges disagree on most;
* ``flaky``: cells whose trials disagree most;
* ``worst_failure``: the lowest cells, with the judges' reflections.

The rank is a weight per kind plus the size of the effect (a rate, a gap, a spread), so a large effect of a
lighter kind can pass a small one of a heavier kind. A finding whose cells are all cited by a finding ranked above
it, of the same model, says nothing new and is dropped. Pure Python: the caller gives the matrix, the paired
comparisons, the points and the scan.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from . import bounds as deal_breakers
from . import scanners
from .matrix import Matrix

if TYPE_CHECKING:  # NumPy (under stats) is for the findings' figures, not for whoever reads these types
    from .stats import Comparison

WEIGHT = {"should_not": 3.0, "refusal": 2.5, "identical": 2.5, "empty": 2.4, "cut_off": 2.2, "language": 2.2,
          "self_id": 2.0, "judge_unreadable": 2.0, "difference": 1.5, "bound_too_wide": 1.2, "weakest": 1.0,
          "judge_disagreement": 1.0,
          "flaky": 0.9, "worst_failure": 0.8}
KINDS = tuple(WEIGHT)
WEAK_GAP = 0.5  # a cell this far below the other models' mean on its prompt
DISAGREEMENT = 0.5  # judges' scores of one point this far apart
FLAKY_RANGE = 0.5  # trials of one cell this far apart
WORST = 0.2  # cells at or under this score
PER_MODEL = 3  # of each kind, per model
LIMIT = 40
CELL_LIMIT = 50  # cells cited by one finding (its text gives the full count)


@dataclass(frozen=True)
class JudgeSaid:
    judge: str
    score: float | None
    reflection: str = ""


@dataclass(frozen=True)
class PointRecord:
    """One point's assessment of one response, as findings read it."""

    prompt_id: str
    variant_id: str
    trial: int
    point: str  # the point as written (its text, or its function and arguments)
    should_not: bool
    met: float | None  # how far the criterion as written is met (for a should-not point: the bad thing happened)
    judges: tuple[JudgeSaid, ...] = ()
    error: str | None = None


@dataclass
class Finding:
    kind: str
    text: str
    value: float | None
    models: list[str]
    prompts: list[str]
    cells: list[tuple[str, str]]
    weight: float
    id: str = ""
    reflections: list[str] = field(default_factory=list)

    def __post_init__(self):
        cells = sorted(set(self.cells), key=lambda c: (c[0] not in self.prompts, c))[:CELL_LIMIT]
        self.cells = cells
        self.prompts = [p for p in dict.fromkeys(self.prompts) if any(c[0] == p for c in cells)] or \
            sorted({c[0] for c in cells})

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "text": self.text,
                "value": None if self.value is None else round(self.value, 6), "models": list(self.models),
                "prompts": list(self.prompts), "cells": [list(c) for c in self.cells]}


def _f2(x: float) -> str:
    return f"{x:.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def should_not_findings(points: Sequence[PointRecord]) -> list[Finding]:
    met: dict[str, list[PointRecord]] = defaultdict(list)
    seen: dict[str, int] = defaultdict(int)
    kinds_of_point: dict[str, set[tuple[str, str]]] = defaultdict(set)
    every_point: set[tuple[str, str]] = set()
    for p in points:
        if not p.should_not or p.met is None:
            continue
        seen[p.variant_id] += 1
        every_point.add((p.prompt_id, p.point))
        if p.met >= 0.5:
            met[p.variant_id].append(p)
            kinds_of_point[p.variant_id].add((p.prompt_id, p.point))
    out = []
    for variant, hits in met.items():
        rate = len(hits) / seen[variant]
        distinct = len(kinds_of_point[variant])
        every = " (every should-not point)" if distinct == len(every_point) else ""
        cells = sorted({(p.prompt_id, p.variant_id) for p in hits})
        out.append(Finding(
            "should_not", f"{variant} did what a should-not point forbids in {len(hits)} of {seen[variant]} "
            f"assessments ({_pct(rate)}), {distinct} of {len(every_point)} should-not points{every}.",
            rate, [variant], sorted({p.prompt_id for p in hits}), cells, WEIGHT["should_not"] + rate))
    return out


def bound_findings(matrix: Matrix, found: Mapping[str, deal_breakers.Bound]) -> list[Finding]:
    """A finding per model whose deal-breaker bound is too wide for the decision (``Bound.finding``), citing its
    cells on the prompts with a deal-breaker point; a model with no scored answer there has nothing to cite and
    no finding (its bound line says so)."""
    guarded = {matrix.prompts[i].id for i in deal_breakers.deal_breaker_prompts(matrix.prompts)}
    out = []
    for variant, bound in found.items():
        if bound.finding is None or bound.upper is None:
            continue
        cells = [(c.prompt_id, variant) for c in matrix.cells.values()
                 if c.variant_id == variant and c.prompt_id in guarded and c.score is not None]
        if not cells:
            continue
        out.append(Finding("bound_too_wide", f"{variant}: {bound.text}; {bound.finding}.", bound.upper, [variant],
                           [], cells, WEIGHT["bound_too_wide"] + 0.1 * bound.upper))
    return out


def scanner_findings(report: scanners.ScanReport) -> list[Finding]:
    out = []
    for count in report.notable():
        if count.kind == "identical":
            continue  # said per pair below
        prompts = sorted({p for p, _ in count.cells})
        out.append(Finding(count.kind, scanners.describe(count), count.rate, [count.variant_id], prompts,
                           count.cells, WEIGHT[count.kind] + count.rate))
    for a, b, alike, of in report.identical_pairs:
        share = alike / of if of else 0.0
        if alike < scanners.MIN_COUNT or share < scanners.FREQUENT:
            continue
        cells = sorted((p, v) for p, v in report.counts["identical"][a].cells + report.counts["identical"][b].cells)
        out.append(Finding("identical", f"{a} and {b} gave the same answer, word for word, to {alike} of {of} "
                           f"prompts both answered ({_pct(share)}).", share, [a, b],
                           sorted({p for p, _ in cells}), cells, WEIGHT["identical"] + share))
    return out


def difference_findings(matrix: Matrix, comparisons: Mapping[tuple[str, str], Comparison]) -> list[Finding]:
    out = []
    for (a, b), c in comparisons.items():
        if c.verdict == "cant_tell" or c.delta is None:
            continue
        better, worse = (a, b) if c.verdict == "better" else (b, a)
        gap = abs(c.delta)
        low, high = sorted((abs(c.low), abs(c.high)))
        rows = []
        for i, prompt in enumerate(matrix.prompts):
            x, y = matrix.cell(i, better), matrix.cell(i, worse)
            if x is not None and y is not None and x.score is not None and y.score is not None:
                rows.append((x.score - y.score, prompt.id))
        rows.sort(reverse=True)
        prompts = [p for d, p in rows[:3] if d > 0]
        cells = [(p, v) for p in prompts for v in (better, worse)]
        out.append(Finding("difference", f"{better} scores higher than {worse} by {_f2(gap)} on the {c.n} prompts "
                           f"both were scored on (95% interval {_f2(low)} to {_f2(high)}).", gap, [better, worse],
                           prompts, cells, WEIGHT["difference"] + gap))
    return out


def weakest_findings(matrix: Matrix) -> list[Finding]:
    gaps: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for i, prompt in enumerate(matrix.prompts):
        row = [c for c in matrix.row(i) if c is not None and c.score is not None]
        if len(row) < 2:
            continue
        total = sum(c.score for c in row)
        for cell in row:
            others = (total - cell.score) / (len(row) - 1)
            gap = others - cell.score
            if gap >= WEAK_GAP:
                gaps[cell.variant_id].append((gap, prompt.id))
    out = []
    for variant, found in gaps.items():
        found.sort(reverse=True)
        for gap, prompt_id in found[:PER_MODEL]:
            out.append(Finding("weakest", f"On {prompt_id}, {variant} is {_f2(gap)} below the other models' mean.",
                               gap, [variant], [prompt_id], [(prompt_id, variant)], WEIGHT["weakest"] + gap))
    return out


def judge_findings(points: Sequence[PointRecord]) -> list[Finding]:
    out = []
    for p in points:
        scores = [j.score for j in p.judges if j.score is not None]
        if len(scores) < 2:
            continue
        spread = max(scores) - min(scores)
        if spread >= DISAGREEMENT:
            out.append(Finding("judge_disagreement", f"The judges disagree by {_f2(spread)} on the point "
                               f"\"{_short(p.point)}\" for {p.variant_id} on {p.prompt_id}.", spread, [p.variant_id],
                               [p.prompt_id], [(p.prompt_id, p.variant_id)], WEIGHT["judge_disagreement"] + spread,
                               reflections=[_short(j.reflection, 300) for j in p.judges if j.reflection][:3]))
    return _per_model(out)


def flaky_findings(matrix: Matrix) -> list[Finding]:
    out = []
    for cell in matrix.cells.values():
        scores = [t.score for t in cell.trials if t.score is not None]
        if len(scores) < 2:
            continue
        spread = max(scores) - min(scores)
        if spread >= FLAKY_RANGE:
            out.append(Finding("flaky", f"{cell.variant_id} on {cell.prompt_id}: its {len(scores)} trials range "
                               f"over {_f2(spread)}.", spread, [cell.variant_id], [cell.prompt_id],
                               [(cell.prompt_id, cell.variant_id)], WEIGHT["flaky"] + spread))
    return _per_model(out)


def worst_findings(matrix: Matrix, points: Sequence[PointRecord]) -> list[Finding]:
    reflections: dict[tuple[str, str], list[str]] = defaultdict(list)
    for p in points:
        if p.met is not None and (p.met < 0.5) != p.should_not:
            reflections[(p.prompt_id, p.variant_id)] += [_short(j.reflection, 300) for j in p.judges if j.reflection]
    out = []
    for cell in matrix.cells.values():
        if cell.score is None or cell.score > WORST:
            continue
        key = (cell.prompt_id, cell.variant_id)
        out.append(Finding("worst_failure", f"{cell.variant_id} scored {_f2(cell.score)} on {cell.prompt_id}.",
                           cell.score, [cell.variant_id], [cell.prompt_id], [key],
                           WEIGHT["worst_failure"] + (1 - cell.score), reflections=reflections.get(key, [])[:3]))
    return _per_model(out)


def _short(text: str, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _per_model(found: list[Finding]) -> list[Finding]:
    found.sort(key=lambda f: -f.weight)
    kept, count = [], defaultdict(int)
    for f in found:
        key = f.models[0]
        if count[key] < PER_MODEL:
            count[key] += 1
            kept.append(f)
    return kept


def rank(found: Iterable[Finding], limit: int = LIMIT) -> list[Finding]:
    """Best first; a finding whose cells a finding above it (of the same models) already cites is dropped;
    ids F1, F2, ... in that order."""
    ordered = sorted(found, key=lambda f: (-f.weight, KINDS.index(f.kind), f.text))
    cited: dict[str, set[tuple[str, str]]] = defaultdict(set)
    out = []
    for f in ordered:
        if f.cells and f.kind in ("weakest", "worst_failure", "flaky") and \
                all(c in cited[f.models[0]] for c in f.cells):
            continue
        for m in f.models:
            cited[m].update(f.cells)
        out.append(f)
        if len(out) == limit:
            break
    for i, f in enumerate(out, 1):
        f.id = f"F{i}"
    return out


def findings(matrix: Matrix, comparisons: Mapping[tuple[str, str], Comparison], points: Sequence[PointRecord],
             report: scanners.ScanReport | None, bounds: Mapping[str, deal_breakers.Bound] | None = None
             ) -> list[Finding]:
    """Every finding of a run, ranked, with ids. ``bounds``: the run's deal-breaker bounds (with its critical
    points' failures); without them, the should-not points' bounds off the matrix."""
    if bounds is None:
        bounds = deal_breakers.matrix_bounds(matrix)
    found = [*should_not_findings(points), *bound_findings(matrix, bounds), *difference_findings(matrix, comparisons),
             *weakest_findings(matrix), *judge_findings(points), *flaky_findings(matrix),
             *worst_findings(matrix, points)]
    if report is not None:
        found += scanner_findings(report)
    return rank(found)
