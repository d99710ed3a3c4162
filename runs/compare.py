# Over 500 lines: one page's figures (two runs cell by cell, a run's variants against each other, their bounds).
"""Two runs of one blueprint, cell by cell (scores read off each run's matrix), decisions with intervals
(model variant against model variant in one run, or a variant against itself in a baseline run), and a word
diff of two responses.

Every score here is a matrix cell's (``Cell.score``, its prompt's trial rule applied); the statistics are
``runs.engine.stats``'s. Prompts whose content changed between two runs' revisions are named and left out of
the statistics: their scores answer different questions.
"""

from __future__ import annotations

import difflib
import gc
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations

import numpy as np

from runs.engine import bounds as deal_breakers
from runs.engine import cellcompare
from runs.engine import robustness as flips
from runs.engine import stats
from runs.engine.matrix import CellFigures, Matrix, figure_bounds, trials_by_variant
from runs.engine.scoring import round2

from .models import PairJudgement, Run
from .records import cell_figures_for, critical_failed, robustness_answers, run_matrix
from .spec import parsed_blueprint

COMPARE_PAGE_SIZE = 100
LISTED_MAX = 50  # cells the compare page lists as changed (the JSON has them all)


@dataclass
class Change:
    prompt_id: str
    prompt_index: int
    variant_id: str
    before: float | None
    after: float | None
    before_id: int | None
    after_id: int | None

    @cached_property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return round2(self.after - self.before)


def cell_response(run: Run, prompt_id: str, variant_id: str) -> int | None:
    """The response a run's cell stands for (``matrix.representative_trial``), or None."""
    prompts = parsed_blueprint(run.revision).prompts
    index = next((i for i, p in enumerate(prompts) if p.id == prompt_id), None)
    if index is None:
        return None
    cell = run_matrix(run, prompts, indices=[index]).cell(index, variant_id)
    return cell.response_id if cell else None


class CellChanges(Sequence):
    """Every cell of two runs (``Change``), largest regression first, unmatched last, each made as it is read: a
    page shows 100 of 20,000 (``cellcompare.SideBySide.cells``)."""

    def __init__(self, found: cellcompare.SideBySide):
        self._found, self._cells = found, found.cells

    def __len__(self) -> int:
        return len(self._cells["delta"])

    def __getitem__(self, at):
        if isinstance(at, slice):
            return self._made(range(len(self))[at])
        if not -len(self) <= at < len(self):
            raise IndexError("no such change")
        return self._made([at % len(self)])[0]

    def __iter__(self):
        for start in range(0, len(self), 1000):
            yield from self[start:start + 1000]

    def _made(self, rows) -> list[Change]:
        rows = np.asarray(rows, dtype=np.int64)
        ids, names, cells = self._found.ids, self._found.names, self._cells
        return [Change(ids[p], i, names[v], None if b != b else b, None if a != a else a, None if bi < 0 else bi,
                       None if ai < 0 else ai)
                for p, i, v, b, a, bi, ai in zip(*(cells[k][rows].tolist() for k in (
                    "prompt", "index", "variant", "before", "after", "before_id", "after_id")))]

    @cached_property
    def counts(self) -> dict[str, int]:
        """Cells that got worse, better, stayed, and those without a score in one of the runs."""
        delta = self._cells["delta"]
        scored = int(np.count_nonzero(~np.isnan(delta)))
        return {"worse": int(np.count_nonzero(delta < 0)), "better": int(np.count_nonzero(delta > 0)),
                "same": int(np.count_nonzero(delta == 0)), "unmatched": len(delta) - scored}


# --- decisions with intervals ----------------------------------------------------------------


def scores_by_variant(matrix: Matrix) -> dict[str, dict[str, float | None]]:
    """``{variant: {prompt id: cell score}}``: the matrix's unrounded cell scores (None: no score)."""
    out: dict[str, dict[str, float | None]] = {v: {} for v in matrix.variants}
    for cell in matrix.cells.values():
        out.setdefault(cell.variant_id, {})[cell.prompt_id] = cell.score
    return out


def prompt_weights(prompts) -> dict[str, float | None]:
    return {p.id: p.weight for p in prompts}


def _unmarked(block):
    """Points as they score: ``critical`` (a deal-breaker mark for the bounds) changes no score, so two revisions
    that differ only in it ask and score the same."""
    if isinstance(block, list):
        return [_unmarked(item) for item in block]
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "critical"}
    return block


def _content(prompt) -> str:
    """What a prompt asks and how it is scored, as authored (its place in the file left out)."""
    data = prompt.to_upstream()
    for key in ("points", "should_not"):
        if key in data:
            data[key] = _unmarked(data[key])
    data["evalsite"] = {"trials": prompt.trials, "rule": prompt.trial_aggregation, "threshold": prompt.trial_threshold,
                        "verdicts": prompt.verdicts.model_dump() if prompt.verdicts is not None else None,
                        "checks": [c.model_dump(exclude={"origin"}) for c in prompt.checks]}
    return json.dumps(data, sort_keys=True, default=str)


def changed_prompts(base_prompts, run_prompts) -> list[str]:
    """Ids of prompts in both revisions whose content differs (in the run's order)."""
    before = {p.id: p for p in base_prompts}
    return [p.id for p in run_prompts if p.id in before and _content(before[p.id]) != _content(p)]


@dataclass
class Pair:
    """Model variant ``a`` against ``b`` (``a`` minus ``b``): in one run, or ``a`` this run's and ``b`` the base's."""

    a: str
    b: str
    comparison: stats.Comparison
    trials_a: stats.TrialFigures | None = None
    trials_b: stats.TrialFigures | None = None
    robustness: flips.Robustness | None = None  # what would flip the verdict (``with_robustness``)

    delta = property(lambda self: self.comparison.delta)
    low = property(lambda self: self.comparison.low)
    high = property(lambda self: self.comparison.high)
    n = property(lambda self: self.comparison.n)
    verdict = property(lambda self: self.comparison.verdict)
    mean_a = property(lambda self: self.comparison.mean_a)
    mean_b = property(lambda self: self.comparison.mean_b)

    @property
    def verdict_words(self) -> str:
        return {"better": "better", "worse": "worse", "cant_tell": "can't tell"}[self.verdict]

    def to_dict(self) -> dict:
        out = {"a": self.a, "b": self.b, **self.comparison.to_dict(), "meanA": self.mean_a, "meanB": self.mean_b}
        if self.trials_a is not None and self.trials_a.cells:
            out["trialsA"] = self.trials_a.to_dict()
        if self.trials_b is not None and self.trials_b.cells:
            out["trialsB"] = self.trials_b.to_dict()
        if self.robustness is not None:
            out["robustness"] = self.robustness.to_dict()
        return out


def variant_pairs(matrix: Matrix, prompts) -> list[Pair]:
    """Every two model variants of one run, the better mean first in each pair (columns in the matrix's order)."""
    scores, trials = scores_by_variant(matrix), trials_by_variant(matrix)
    pairs = list(combinations(matrix.variants, 2))
    results = stats.paired_many([(scores[a], scores[b]) for a, b in pairs], prompt_weights(prompts))
    return [Pair(a, b, c, trials.get(a), trials.get(b)) for (a, b), c in zip(pairs, results)]


@dataclass
class ListedChange:
    """A cell whose change from the base stands out from the others' under the FDR rule."""

    prompt_id: str
    prompt_index: int
    variant_id: str
    before: float | None  # shown scores
    after: float | None
    delta: float  # unrounded cell scores, after minus before
    q: float

    @property
    def shown_delta(self) -> float:
        return round2(self.delta)


@dataclass
class RunComparison:
    run: Run
    base: Run
    pairs: list[Pair]  # per variant in both runs: this run's (a) minus the base's (b)
    changes: Sequence[Change]  # every cell, largest regression first (``CellChanges``)
    listed: list[ListedChange]  # cells that changed under the FDR rule, most significant first
    tested: int  # cells the FDR rule looked at
    changed_prompts: list[str]  # prompt ids whose content changed: left out of the figures
    only_run: list[str] = field(default_factory=list)  # variants only in this run
    only_base: list[str] = field(default_factory=list)
    level: float = stats.FDR_LEVEL
    gate: list[stats.GateTest] = field(default_factory=list)  # per variant in both runs, the gate's test
    gate_level: float = stats.GATE_LEVEL
    movement: stats.Movement = stats.Movement(0, 0, None, None)  # how the tested cells moved as a whole

    @property
    def regressions(self) -> list[Pair]:
        """Variants that fail the gate (``stats.gate``): a drop that a one-sided paired sign-flip test finds at
        the family-wise level ``GATE_LEVEL`` after Holm's adjustment over the variants compared, on a variant
        whose shown verdict is "worse". Stricter than the verdicts: a "worse" at 95% is not a regression by
        itself."""
        failing = {g.key for g in self.gate if g.fails}
        return [p for p in self.pairs if p.a in failing]

    @property
    def counts(self) -> dict[str, int]:
        """Cells that got worse, better, stayed the same (as shown), and those without a score in one of the runs."""
        return self.changes.counts

    @property
    def gate_fails(self) -> bool:
        return any(g.fails for g in self.gate)

    @property
    def gate_level_words(self) -> str:
        """The gate's level as the pages and the markdown say it: "0.1% (99.9%)"."""
        return f"{self.gate_level:.1%} ({1 - self.gate_level:.1%})"

    def gate_dict(self) -> dict:
        return {"rule": stats.GATE_RULE, "level": self.gate_level,
                "variants": {g.key: g.to_dict() for g in self.gate}}

    def to_dict(self) -> dict:
        return {"run": self.run.pk, "base": self.base.pk, "pairs": [p.to_dict() for p in self.pairs],
                "changedPrompts": self.changed_prompts, "leftOut": len(self.changed_prompts),
                "onlyInRun": self.only_run, "onlyInBase": self.only_base,
                "changed": {"level": self.level, "tested": self.tested,
                            "moved": self.movement.moved, "allMovedBy": self.movement.alike,
                            "cells": [{"prompt": c.prompt_id, "variant": c.variant_id, "before": c.before,
                                       "after": c.after, "delta": c.delta, "q": c.q} for c in self.listed]},
                "gate": self.gate_dict(), "method": stats.METHOD}


_COMPARED: OrderedDict[tuple, RunComparison] = OrderedDict()
_COMPARED_KEPT = 4
_COMPARED_LOCK = threading.Lock()


def compare_with_base(run: Run, base: Run) -> RunComparison:
    """Each model variant of ``run`` against the same variant of ``base`` (prompts matched by id), and the
    cells whose change stands out (Benjamini-Hochberg over every matched cell).

    Kept in this process for two finished runs, by both runs' ``results_version`` and status (what their
    matrices are kept by): every view of a big run's comparison after the first reads it (the paired bootstrap
    and the cells' changes over 20,000 cells took seconds a view)."""
    key = (run.pk, run.results_version, run.status, base.pk, base.results_version, base.status)
    kept = run.is_finished and base.is_finished
    if kept:
        with _COMPARED_LOCK:
            found = _COMPARED.get(key)
            if found is not None:
                _COMPARED.move_to_end(key)
                return found
    result = _compare_with_base(run, base)
    if kept:
        with _COMPARED_LOCK:
            _COMPARED[key] = result
            while len(_COMPARED) > _COMPARED_KEPT:
                _COMPARED.popitem(last=False)
    return result


def _compare_with_base(run: Run, base: Run) -> RunComparison:
    run_prompts, base_prompts = parsed_blueprint(run.revision).prompts, parsed_blueprint(base.revision).prompts
    # What the two matrices say of each cell: for finished runs, stored when their figures were (no matrix built).
    after_m, before_m = cell_figures_for(run, run_prompts), cell_figures_for(base, base_prompts)
    # One revision asks the same of every prompt (the content of 2,000 prompts, twice, was 0.2 s).
    changed_ids = [] if run.revision_id == base.revision_id else changed_prompts(base_prompts, run_prompts)
    return RunComparison(run, base, changed_prompts=changed_ids,
                         **compared_figures(after_m, before_m, prompt_weights(run_prompts), changed_ids))


def compared_figures(after_m: CellFigures, before_m: CellFigures, weights: dict[str, float | None],
                     changed_ids: list[str]) -> dict:
    """A run's cell figures (``after_m``) against its base's (``before_m``): ``RunComparison``'s figures."""
    in_run = {*after_m.variants, *after_m.columns.names}
    in_base = {*before_m.variants, *before_m.columns.names}
    common = [v for v in after_m.variants if v in in_base]
    found = cellcompare.side_by_side(after_m.columns, before_m.columns, common, weights, changed_ids)
    trials_a, trials_b = after_m.trials, before_m.trials
    pairs = [Pair(v, v, c, trials_a.get(v), trials_b.get(v)) for v, c in zip(common, found.comparisons)]
    deltas, at = found.changes, found.changes_at
    _, q, changed = stats.change_tests(deltas)
    listed = []
    for row in np.flatnonzero(changed).tolist():
        prompt_id, v = found.ids[at["prompt"][row]], found.names[at["variant"][row]]
        listed.append(ListedChange(prompt_id, int(at["index"][row]), v, float(at["before"][row]),
                                   float(at["after"][row]), float(deltas[row]), float(q[row])))
    listed.sort(key=lambda c: stats.change_order(c.q, c.delta, (c.prompt_id, c.variant_id)))
    return {"pairs": pairs, "changes": CellChanges(found), "listed": listed, "tested": len(deltas),
            "only_run": [v for v in after_m.variants if v not in in_base],
            "only_base": [v for v in before_m.variants if v not in in_run],
            "gate": stats.gate(found.aligned, {p.a: p.verdict for p in pairs}), "movement": stats.movement(deltas)}


class CannotCompare(ValueError):
    """Two runs that cannot be compared (of different blueprints)."""


@dataclass
class Decisions:
    """What ``manage.py compare`` and ``GET /api/runs/<id>/compare`` say: pairs of variants with their verdicts."""

    run: Run
    base: Run | None
    pairs: list[Pair]
    result: RunComparison | None = None  # with a base
    models: dict[str, stats.MeanInterval] = field(default_factory=dict)  # without one: each variant's mean
    bounds: dict[str, deal_breakers.Bound] = field(default_factory=dict)  # run's should-not failure-rate bounds

    @property
    def regressions(self) -> list[Pair]:
        """Variants that fail the gate (``RunComparison.regressions``; none without a base)."""
        return self.result.regressions if self.base is not None and self.result is not None else []

    def to_dict(self) -> dict:
        out = {"pairs": [p.to_dict() for p in self.pairs], "run": self.run.pk,
               "base": self.base.pk if self.base else None, "regression": bool(self.regressions),
               "method": stats.METHOD, "finished": self.run.is_finished and (self.base is None or self.base.is_finished)}
        if self.result is not None:
            extra = self.result.to_dict()
            out.update({k: extra[k] for k in ("changedPrompts", "leftOut", "onlyInRun", "onlyInBase", "changed",
                                              "gate")})
        else:
            out["models"] = {v: m.to_dict() for v, m in self.models.items()}
        out["bounds"] = {v: b.to_dict() for v, b in self.bounds.items()}
        return out


def decisions(run: Run, base: Run | None = None) -> Decisions:
    """Without ``base``: every two variants of ``run``. With it: each variant of ``run`` against the same
    variant of ``base`` (``a`` is ``run``'s, ``b`` the base's)."""
    if base is None:
        prompts = parsed_blueprint(run.revision).prompts
        matrix = run_matrix(run, prompts)
        columns: dict[str, dict[int, float | None]] = {v: {} for v in matrix.variants}
        for (index, variant_id), cell in matrix.cells.items():
            columns.setdefault(variant_id, {})[index] = cell.score
        models = stats.mean_intervals(columns, {i: p.weight for i, p in enumerate(prompts)},
                                      items=range(len(prompts)))
        pairs = with_robustness(run, variant_pairs(matrix, prompts))
        return Decisions(run, None, pairs, models={v: models[v] for v in matrix.variants},
                         bounds=run_bounds(run, matrix))
    if base.blueprint_id != run.blueprint_id:
        raise CannotCompare(f"run {base.pk} is of another blueprint ({base.blueprint.slug}) than run {run.pk} "
                            f"({run.blueprint.slug}); compare runs of the same blueprint")
    result = compare_with_base(run, base)
    with_robustness(run, result.pairs, base, result.changed_prompts)
    return Decisions(run, base, result.pairs, result, bounds=run_bounds(run))


_ROBUSTNESS: dict[tuple, list] = {}
_ROBUSTNESS_KEPT = 8


def forget_robustness() -> None:
    """Drop what this process keeps of every run's comparisons and robustness (what a new process would see)."""
    _ROBUSTNESS.clear()
    with _COMPARED_LOCK:
        _COMPARED.clear()


def with_robustness(run: Run, pairs: list[Pair], base: Run | None = None, changed: list[str] = ()) -> list[Pair]:
    """Each pair with what would flip its verdict (``runs/engine/robustness.py``): from stored results, no call.
    Without ``base``: variants of ``run``; with it, each variant of ``run`` against itself in ``base`` (``changed``:
    prompt ids left out). Kept in this process per runs' ``results_version``, as the matrix is."""
    if not pairs:
        return pairs
    judged = _pairs_judged(run) if base is None else None
    key = (run.pk, run.results_version, run.status, base.pk if base else None,
           base.results_version if base else None, base.status if base else None,
           tuple((p.a, p.b, p.verdict) for p in pairs), judged)
    found = _ROBUSTNESS.get(key)
    if found is None:
        found = _robustness(run, pairs, base, changed)
        if run.is_finished and (base is None or base.is_finished):
            while len(_ROBUSTNESS) >= _ROBUSTNESS_KEPT:
                _ROBUSTNESS.pop(next(iter(_ROBUSTNESS)))
            _ROBUSTNESS[key] = found
    for pair, robust in zip(pairs, found):
        pair.robustness = robust
    return pairs


def _robustness(run: Run, pairs: list[Pair], base: Run | None, changed) -> list[flips.Robustness]:
    paused = gc.isenabled()
    # Tens of thousands of small values that all live until the answer is made: the collector would walk them
    # again and again (a third of the time at 10,000 responses, tests/bench/bench_robustness.py).
    gc.disable()
    try:
        prompts = parsed_blueprint(run.revision).prompts
        answers = robustness_answers(run, run_matrix(run, prompts))
        wanted = [(p.a, p.b, p.verdict) for p in pairs]
        if base is None:
            found = flips.pairs_within(answers, prompts, wanted, style_verdicts(run, [(a, b) for a, b, _ in wanted]))
        else:
            base_prompts = parsed_blueprint(base.revision).prompts
            found = flips.pairs_across(answers, prompts, robustness_answers(base, run_matrix(base, base_prompts)),
                                       base_prompts, wanted, changed)
        return found
    finally:
        if paused:
            gc.enable()


def _pairs_judged(run: Run) -> tuple:
    """How many Pairs judgements by people there are about ``run``'s answers, and the newest's id: a judgement
    added or gone (with its answer) changes the style alternative, so it is part of the kept answer's key."""
    from django.db.models import Count, Max

    found = _people_judgements(run).aggregate(n=Count("id"), last=Max("id"))
    return (found["n"], found["last"])


def _people_judgements(run: Run):
    """People's Pairs judgements of ``run``'s answers (an LLM judge's, which have ``judging``, left out)."""
    return PairJudgement.objects.filter(left__run_id=run.pk, judging__isnull=True)


def style_verdicts(run: Run, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The style-controlled Pairs rating's verdict on each ``(a, b)`` of ``run`` (``ratings.style_verdicts``),
    from people's judgements on its Pairs page; a pair that nobody judged both sides of gets none."""
    from runs.engine.ratings import style_verdicts as verdicts_of
    from runs.pairs.scope import comparisons_of

    judgements = _people_judgements(run)
    if not judgements.exists():
        return {}
    return verdicts_of(comparisons_of(judgements), pairs)


def run_bounds(run: Run, matrix: Matrix | None = None) -> dict[str, deal_breakers.Bound]:
    """Per model variant of ``run``, its deal-breaker failure-rate bound (``engine/bounds.py``: should-not and
    critical points), off its matrix (``matrix``: when the caller has it; else the counts stored with the run's
    cell figures, ``records.cell_figures_for``, when they are good, or its matrix)."""
    if matrix is None:
        return figure_bounds(cell_figures_for(run, parsed_blueprint(run.revision).prompts, bounds=True))
    return deal_breakers.matrix_bounds(matrix, critical_failed=critical_failed(run, matrix.prompts))


def diff_url(run_id: int, base_id: int, prompt_id: str, variant_id: str) -> str:
    from urllib.parse import urlencode

    return f"/runs/{run_id}/compare/{base_id}/diff?" + urlencode({"prompt": prompt_id, "variant": variant_id})


# --- a word diff of two responses -----------------------------------------------------------

DIFF_MAX_TOKENS = 20_000


@dataclass
class DiffPiece:
    op: str  # equal, insert, delete
    text: str


def text_diff(before: str, after: str) -> list[DiffPiece]:
    """Words and whitespace that stay, go and come; lines when the texts are too long for a word diff."""
    split = re.compile(r"\s+|[^\s\w]|\w+")
    a, b = split.findall(before or ""), split.findall(after or "")
    if len(a) + len(b) > DIFF_MAX_TOKENS:
        a, b = (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pieces: list[DiffPiece] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pieces.append(DiffPiece("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(DiffPiece("delete", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(DiffPiece("insert", "".join(b[j1:j2])))
    return pieces
