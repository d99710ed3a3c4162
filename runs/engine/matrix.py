# Over 500 lines: the one owner of a cell's rules, from records to cells, pages and what a comparison reads.
"""The results matrix: every prompt x model variant cell of a run, built once from plain records.

This is the one owner of the rules a result page, an export or the API shows about a cell:

* ``trial_state``: what one stored response is (scored, not evaluated, failed, pending, running, or
  *not run* when its run was cancelled or stopped before it started);
* ``cell_state``: a cell's state over its trials, in one order (``CELL_STATE_ORDER``);
* the cell's score: its trials combined by the prompt's own rule (``mean``, ``best``, ``pass_at_k``)
  through ``scoring.aggregate_trials``; the rounded figure every surface prints is ``Cell.shown``;
* ``representative_trial``: which trial a cell links to and whose points an upstream-shape export shows;
* ``heat_bucket``: the colour of a score;
* ``Cell.passed`` / ``Cell.pass_state``: whether a cell passed (the one rule: see ``PASS_RULE``), and per
  variant ``Matrix.passes``: cells that passed, did not, are undecided, or have no pass mark;
* ``Cell.rule_text``: how a cell's trials were combined, in words ("pass@k of 3 trials");
* per variant: mean (prompt weights), std, counts of each state.

``run_aggregates`` (stored when a run ends) is built from the same matrix, so the stored figures and
a matrix built later from the same rows never disagree. Pure Python: no Django here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .scoring import CellOutcome, TrialOutcome, aggregate_trials, model_stats, round2

#: A cell's state is the first of these its trials have, after "scored" (a cell with a score is scored).
CELL_STATE_ORDER = ("failed", "running", "pending", "not-run", "not-evaluated")
STATES = ("scored", *CELL_STATE_ORDER)
STATE_LABELS = {"scored": "scored", "failed": "failed", "running": "running", "pending": "pending",
                "not-run": "not run", "not-evaluated": "not evaluated"}

#: What "this cell passed" means, on every page, export and API (docs/results.md, "What passing means").
PASS_RULE = """A cell passed when its verdict, by its prompt's own rule, is pass: the band of the cell score under
`mean` (or the one response's verdict), the best trial's verdict under `best`, and under `pass_at_k` pass@k
reaching `trial_threshold`. A verdict needs a pass mark: the prompt (or the header) sets `threshold`,
`verdicts`, a gate (`required`) or a minimum (`min_score`). Without one the cell has no verdict, neither pass nor
fail: pages say "no threshold set", never a pass rate. With one, a cell with no verdict (not scored yet, not
evaluated, a failure, a check that could not be scored) is undecided: counted apart, never as a pass or a fail.
A variant's pass rate is its passed cells over its decided (passed + did not pass) cells."""
AGGREGATION_WORDS = {"mean": "mean", "best": "best", "pass_at_k": "pass@k"}
PASS_STATES = ("pass", "fail", "undecided", "no-threshold")
PASS_LABELS = {"pass": "passed", "fail": "did not pass", "undecided": "undecided", "no-threshold": "no threshold set"}


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """What the matrix reads of one stored response (a ``Response`` row's small columns)."""

    prompt_index: int
    variant_id: str
    trial: int = 0
    score: float | None = None  # overrides applied; None: not evaluated
    status: str = "done"  # pending, running, done, failed
    failed: bool = False  # generation failed (kept for callers that only know this)
    response_id: int | None = None
    latency_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    judge_usage: dict = field(default_factory=dict)
    violated_should_not: bool = False
    disagreement: bool = False
    verdict: str | None = None
    overridden: bool = False
    thumbs: int | None = None  # 1 up, -1 down, 0 a comment alone, None: no annotation
    reason: str = ""  # the error or the not-evaluated reason


def trial_state(status: str, score: float | None, *, stopped: bool = False) -> str:
    """One response's state. ``stopped``: its run was cancelled or stopped, so what waits will not run."""
    if score is not None:
        return "scored"
    if status == "failed":
        return "failed"
    if status == "done":
        return "not-evaluated"
    if status in ("pending", "running") and stopped:
        return "not-run"
    return status if status in ("pending", "running") else "pending"


def cell_state(states: Iterable[str], score: float | None) -> str:
    """A cell with a score is scored; otherwise the first of ``CELL_STATE_ORDER`` among its trials."""
    if score is not None:
        return "scored"
    present = set(states)
    return next((s for s in CELL_STATE_ORDER if s in present), "pending")


def heat_bucket(score: float | None) -> int | None:
    """One of 11 colour buckets, floor(score x 10), as the upstream's heatmap (10 for a perfect score)."""
    return None if score is None else min(10, max(0, int(score * 10 + 1e-9)))


def heat_class(score: float | None) -> str:
    bucket = heat_bucket(score)
    return "heat-none" if bucket is None else f"heat-{bucket}"


def representative_trial(outcome: CellOutcome) -> int | None:
    """The trial a cell stands for: the best one under ``best`` (the first of equals), else the first
    evaluated trial, else the first trial. Its response is the one a cell links to, and the one whose
    points the upstream-shape export shows (that layout has one response per prompt and model)."""
    if not outcome.trials:
        return None
    scored = [t for t in outcome.trials if t.score is not None]
    if not scored:
        return outcome.trials[0].trial
    if outcome.aggregation == "best":
        best = max(t.score for t in scored)
        return next(t.trial for t in scored if t.score == best)
    return scored[0].trial


@dataclass(slots=True)
class Cell:
    prompt_index: int
    prompt_id: str
    variant_id: str
    trials: list[ResponseRecord]
    outcome: CellOutcome
    state: str
    shown_trial: int | None
    shown: float | None = None  # the score every surface prints: rounded as the upstream rounds (2 places)
    pass_mark: bool = False  # its prompt sets a pass mark (threshold, verdicts, a gate or a minimum)

    def __post_init__(self):
        if self.outcome.score is not None:
            self.shown = round2(self.outcome.score)

    @property
    def score(self) -> float | None:
        """The cell's score by its prompt's rule, unrounded."""
        return self.outcome.score

    @property
    def bucket(self) -> int | None:
        return heat_bucket(self.shown)

    @property
    def heat(self) -> str:
        return heat_class(self.shown)

    @property
    def verdict(self) -> str | None:
        return self.outcome.verdict

    @property
    def k(self) -> int:
        return len(self.trials)

    @property
    def shown_record(self) -> ResponseRecord | None:
        return next((t for t in self.trials if t.trial == self.shown_trial), self.trials[0] if self.trials else None)

    @property
    def response_id(self) -> int | None:
        record = self.shown_record
        return record.response_id if record else None

    @property
    def violated_should_not(self) -> bool:
        return any(t.violated_should_not for t in self.trials)

    @property
    def disagreement(self) -> bool:
        return any(t.disagreement for t in self.trials)

    @property
    def overridden(self) -> bool:
        return any(t.overridden for t in self.trials)

    @property
    def thumbs(self) -> int | None:
        """Over trials, the sternest word: down before a comment alone before up."""
        words = [t.thumbs for t in self.trials if t.thumbs is not None]
        return min(words) if words else None

    @property
    def latency_ms(self) -> float | None:
        values = [t.latency_ms for t in self.trials if t.latency_ms is not None]
        return max(values) if values else None

    @property
    def cost_usd(self) -> float | None:
        values = [t.cost_usd for t in self.trials if t.cost_usd is not None]
        return sum(values) if values else None

    @property
    def reason(self) -> str:
        return next((t.reason for t in self.trials if t.score is None and t.reason), "")

    @property
    def complete(self) -> bool:
        """Every trial finished (done or failed)."""
        return all(t.status in ("done", "failed") for t in self.trials)

    @property
    def pass_state(self) -> str:
        """``pass``, ``fail`` (fail or borderline: it did not pass), ``undecided`` (a pass mark but no verdict)
        or ``no-threshold`` (its prompt sets no pass mark). The one rule: ``PASS_RULE``."""
        if not self.pass_mark:
            return "no-threshold"
        verdict = self.outcome.verdict
        if verdict is None:
            return "undecided"
        return "pass" if verdict == "pass" else "fail"

    @property
    def passed(self) -> bool | None:
        """True when the cell passed, False when it did not, None without a verdict (``pass_state`` says why)."""
        state = self.pass_state
        return True if state == "pass" else False if state == "fail" else None

    @property
    def pass_label(self) -> str:
        return PASS_LABELS[self.pass_state]

    @property
    def rule_word(self) -> str:
        """The prompt's rule in one word: mean, best, pass@k."""
        return AGGREGATION_WORDS.get(self.outcome.aggregation or "mean", "mean")

    @property
    def rule_text(self) -> str:
        """How the cell's score was made, in words: "pass@k of 3 trials", "mean of 3 trials", "best of 3
        trials"; "one response" without trials."""
        return rule_text(self.outcome.aggregation, self.k)


def rule_text(aggregation: str | None, k: int) -> str:
    if k <= 1:
        return "one response"
    return f"{AGGREGATION_WORDS.get(aggregation or 'mean', 'mean')} of {k} trials"


@dataclass(frozen=True, slots=True)
class PassCount:
    """A variant's cells by ``Cell.pass_state``."""

    passed: int = 0
    failed: int = 0  # did not pass
    undecided: int = 0  # a pass mark, but no verdict (yet)
    no_threshold: int = 0  # their prompt sets no pass mark

    @property
    def decided(self) -> int:
        return self.passed + self.failed

    @property
    def rate(self) -> float | None:
        """Passed over decided cells; None when no cell has a verdict."""
        return self.passed / self.decided if self.decided else None

    @property
    def has_threshold(self) -> bool:
        """Some cell of the variant has a pass mark (else pages say "no threshold set")."""
        return self.passed + self.failed + self.undecided > 0

    def to_dict(self) -> dict:
        return {"passed": self.passed, "didNotPass": self.failed, "undecided": self.undecided,
                "noThreshold": self.no_threshold, "passRate": self.rate}


@dataclass(slots=True)
class VariantSummary:
    variant_id: str
    mean: float | None
    std: float | None
    n: int  # cells with a score
    not_evaluated: int  # cells without one
    counts: dict[str, int]  # cells per state
    cells: int


@dataclass
class Matrix:
    """Cells keyed by (prompt index, variant id); variants in column order (best mean first)."""

    prompts: Sequence
    cells: dict[tuple[int, str], Cell]
    variants: list[str]
    summaries: dict[str, VariantSummary]
    stopped: bool = False
    #: False: the cells of some prompts only (``page_matrix``); its summaries, columns and pass counts are still
    #: the whole run's. Only a page that shows those prompts' cells takes one.
    whole: bool = True

    def cell(self, prompt_index: int, variant_id: str) -> Cell | None:
        return self.cells.get((prompt_index, variant_id))

    def row(self, prompt_index: int) -> list[Cell | None]:
        """A prompt's cells in column order (worked out once per matrix: a kept matrix serves many pages)."""
        rows = self.__dict__.get("_rows")
        if rows is None:
            rows = self.__dict__["_rows"] = {}
        row = rows.get(prompt_index)
        if row is None:
            row = rows[prompt_index] = [self.cells.get((prompt_index, v)) for v in self.variants]
        return row

    def row_mean(self, prompt_index: int) -> float | None:
        """The mean of a prompt's shown cell scores across models (sorting and the row's own figure)."""
        means = self.__dict__.get("_row_means")
        if means is None:
            means = self.__dict__["_row_means"] = {}
        if prompt_index not in means:
            scores = [c.shown for c in self.row(prompt_index) if c is not None and c.shown is not None]
            means[prompt_index] = round2(sum(scores) / len(scores)) if scores else None
        return means[prompt_index]

    def row_spread(self, prompt_index: int) -> float | None:
        spreads = self.__dict__.get("_row_spreads")
        if spreads is None:
            spreads = self.__dict__["_row_spreads"] = {}
        if prompt_index not in spreads:
            scores = [c.shown for c in self.row(prompt_index) if c is not None and c.shown is not None]
            spreads[prompt_index] = max(scores) - min(scores) if len(scores) > 1 else None
        return spreads[prompt_index]

    def passes(self, variant_id: str) -> PassCount:
        """One variant's cells by whether they passed (``Cell.pass_state``, the one rule); counted once per matrix."""
        kept = self.__dict__.get("_passes")
        if kept is None:
            tally: dict[str, dict[str, int]] = {}
            for (_, v), c in self.cells.items():
                counts = tally.setdefault(v, dict.fromkeys(PASS_STATES, 0))
                counts[c.pass_state] += 1
            kept = self.__dict__["_passes"] = {
                v: PassCount(t["pass"], t["fail"], t["undecided"], t["no-threshold"]) for v, t in tally.items()}
        return kept.get(variant_id) or PassCount()

    def prompts_with_cells(self) -> tuple[list[int], int]:
        """The positions of the prompts with a cell, in order, and how many cells they have (worked out once)."""
        kept = self.__dict__.get("_with_cells")
        if kept is None:
            if not self.whole:
                raise ValueError("a page matrix has some prompts' cells only: which prompts have one is not known")
            inside = [index for index, _ in self.cells if 0 <= index < len(self.prompts)]
            kept = self.__dict__["_with_cells"] = (sorted(set(inside)), len(inside))
        return kept

    def prompt_order(self, sort: str) -> list[int]:
        """Prompt positions in blueprint order, lowest row mean first (``lowest``/``score``) or widest
        spread first (``spread``); prompts with no score last."""
        indices = list(range(len(self.prompts)))
        if sort in ("lowest", "score", "spread") and not self.whole:
            raise ValueError("a page matrix has some prompts' cells only: sorting by score needs the whole matrix")
        if sort in ("lowest", "score"):
            def key(i):
                mean = self.row_mean(i)
                return (mean is None, mean if mean is not None else 0.0, i)
            return sorted(indices, key=key)
        if sort == "spread":
            def key(i):
                spread = self.row_spread(i)
                return (spread is None, -(spread or 0.0), i)
            return sorted(indices, key=key)
        return indices


def prompt_summary(prompt, limit: int = 120) -> str:
    """A prompt's first user message on one line, cut to ``limit`` characters (rows of the grid and heatmap)."""
    text = next((m.content for m in prompt.messages if m.role == "user" and m.content), "") or ""
    text = " ".join(text[:limit * 4].split())
    return text if len(text) <= limit else text[:limit - 1] + "…"



def _prompt_rule(prompt) -> dict:
    if prompt is None:
        return {"aggregation": None, "verdicts": None, "use_verdicts": False, "threshold": None}
    return {"aggregation": prompt.trial_aggregation, "verdicts": prompt.verdicts,
            "use_verdicts": bool(prompt.has_verdicts), "threshold": prompt.trial_threshold}


def cell_outcome(trials: Sequence[ResponseRecord], prompt, rule: dict | None = None) -> CellOutcome:
    """A cell's trials combined by its prompt's rule (the one function every surface's cell score comes from).
    ``rule``: the prompt's rule when the caller has worked it out already (once per prompt, not per cell)."""
    rule = rule if rule is not None else _prompt_rule(prompt)
    return aggregate_trials([TrialOutcome(t.trial, t.score, t.verdict or None) for t in trials],
                            rule["aggregation"], verdicts=rule["verdicts"], use_verdicts=rule["use_verdicts"],
                            threshold=rule["threshold"])


def column_order(summaries: dict[str, VariantSummary]) -> list[str]:
    """Models best mean first; those with no mean after, in id order."""
    return sorted(summaries, key=lambda v: (summaries[v].mean is None, -(summaries[v].mean or 0.0), v))


def build_matrix(records: Iterable[ResponseRecord], prompts: Sequence, *, stopped: bool = False) -> Matrix:
    """The matrix of a run from its responses' records. ``stopped``: the run was cancelled (what waits is not run)."""
    cells = _cells(records, prompts, stopped)
    summaries = summarise(cells.values(), prompts)
    return Matrix(prompts=prompts, cells=cells, variants=column_order(summaries), summaries=summaries,
                  stopped=stopped)


def page_matrix(records: Iterable[ResponseRecord], prompts: Sequence, whole, *, stopped: bool = False) -> Matrix:
    """A matrix of the cells of some prompts (``records``: every response of those prompts) with the whole run's
    summaries, pass counts and intervals (``whole``: ``aggregates.StoredWhole``, read back from the stored
    aggregates): the cells, columns, means and pass counts a page of a big run shows, without its every cell."""
    matrix = Matrix(prompts=prompts, cells=_cells(records, prompts, stopped), variants=column_order(whole.summaries),
                    summaries=whole.summaries, stopped=stopped, whole=False)
    matrix.__dict__["_passes"] = dict(whole.passes)
    matrix.__dict__["_intervals"] = dict(whole.intervals)
    if whole.cells_of_prompts is not None:  # every prompt has a cell
        matrix.__dict__["_with_cells"] = (list(range(len(prompts))), whole.cells_of_prompts)
    return matrix


def _cells(records: Iterable[ResponseRecord], prompts: Sequence, stopped: bool) -> dict[tuple[int, str], Cell]:
    by_cell: dict[tuple[int, str], list[ResponseRecord]] = {}
    for r in records:
        by_cell.setdefault((r.prompt_index, r.variant_id), []).append(r)
    cells: dict[tuple[int, str], Cell] = {}
    rules: dict[int, dict] = {}
    for (index, variant_id), trials in by_cell.items():
        if len(trials) > 1:
            trials.sort(key=lambda t: t.trial)
        prompt = prompts[index] if 0 <= index < len(prompts) else None
        rule = rules.get(index)
        if rule is None:
            rule = rules[index] = _prompt_rule(prompt)
        outcome = cell_outcome(trials, prompt, rule)
        state = "scored" if outcome.score is not None else cell_state(
            [trial_state("failed" if t.failed else t.status, t.score, stopped=stopped) for t in trials], None)
        cells[(index, variant_id)] = Cell(index, prompt.id if prompt is not None else str(index), variant_id,
                                          trials, outcome, state, representative_trial(outcome),
                                          pass_mark=rule["use_verdicts"])
    return cells


def summarise(cells: Iterable[Cell], prompts: Sequence) -> dict[str, VariantSummary]:
    """Per variant: the weighted mean of its cell scores (``scoring.model_stats``) and its cells per state."""
    by_variant: dict[str, list[Cell]] = {}
    for cell in cells:
        by_variant.setdefault(cell.variant_id, []).append(cell)
    out = {}
    for variant_id, mine in by_variant.items():
        weights = [prompts[c.prompt_index].weight if 0 <= c.prompt_index < len(prompts) else None for c in mine]
        stats = model_stats((c.score, w) for c, w in zip(mine, weights))
        counts = {s: 0 for s in STATES}
        for c in mine:
            counts[c.state] += 1
        out[variant_id] = VariantSummary(variant_id, stats.mean, stats.std, stats.n, stats.n_not_evaluated,
                                         counts, len(mine))
    return out


# --- what a comparison reads of a matrix, stored when a run's figures are ----------------------------------------

CELL_FIGURES_SHAPE = 1  # the stored form's layout: a stored form of another shape is not read (the matrix is built)


class CellFigures:
    """Per cell what the compare page reads of a run's matrix, and per variant its trial figures and deal-breaker
    counts: built from the matrix (``cell_figures``), or read back from the stored form of the same
    (``cell_figures_of``), so a comparison of two finished runs reads two stored forms instead of building two
    whole matrices.

    ``cells``: in the matrix's cell order, ``(prompt index, prompt id, variant id, score, shown, response id)``
    (``Cell.score``, ``Cell.shown``, ``Cell.response_id``); ``columns``: the same as NumPy columns
    (``cellcompare.CellColumns``, what a comparison reads), each made from the other when first asked for;
    ``trials``: per variant with a cell, in the matrix's cell order, its ``stats.TrialFigures`` over its cells
    (``stats.trial_figures``); ``bounds``: per variant in column order, its deal-breaker ``(failures, answers)``
    (``bounds.matrix_bounds``), None when not asked for."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, variants: list[str], cells: list[tuple[int, str, str, float | None, float | None, int | None]]
                 | None = None, trials: dict | None = None, bounds: dict[str, tuple[int, int]] | None = None, *,
                 columns=None):
        self.variants, self.trials, self.bounds = variants, trials if trials is not None else {}, bounds
        self._cells, self._columns = cells, columns

    @property
    def cells(self) -> list[tuple[int, str, str, float | None, float | None, int | None]]:
        if self._cells is None:
            self._cells = self._columns.cells()
        return self._cells

    @property
    def columns(self):
        if self._columns is None:
            from .cellcompare import columns_of_cells  # NumPy: not for every importer of this module

            self._columns = columns_of_cells(self.variants, self._cells)
        return self._columns

    def __eq__(self, other) -> bool:
        if not isinstance(other, CellFigures):
            return NotImplemented
        return (self.variants, self.cells, self.trials, self.bounds) == (other.variants, other.cells, other.trials,
                                                                         other.bounds)

    def __repr__(self) -> str:
        return (f"CellFigures(variants={self.variants!r}, cells={self.cells!r}, trials={self.trials!r}, "
                f"bounds={self.bounds!r})")


def cell_figures(matrix: Matrix, bounds: dict | None = None) -> CellFigures:
    """What a comparison reads of ``matrix`` (``bounds``: its ``bounds.matrix_bounds``, when wanted)."""
    cells = [(c.prompt_index, c.prompt_id, c.variant_id, c.score, c.shown, c.response_id)
             for c in matrix.cells.values()]
    counts = None if bounds is None else {v: (b.failures, b.n) for v, b in bounds.items()}
    return CellFigures(list(matrix.variants), cells, trials_by_variant(matrix), counts)


def trials_by_variant(matrix: Matrix) -> dict:
    """Per model variant with a cell, its trial figures (``stats.trial_figures``: pass@k, pass^k, flakiness)."""
    from .stats import trial_figures  # NumPy: not for every importer of this module

    outcomes: dict[str, list] = {}
    for c in matrix.cells.values():
        outcomes.setdefault(c.variant_id, []).append(c.outcome)
    return {v: trial_figures(found) for v, found in outcomes.items()}


def cell_figures_json(figures: CellFigures) -> dict:
    """The stored form of ``figures``: columns of plain JSON values (prompt ids are not stored: the revision's
    prompts give them back; shown scores are, ``round2`` of 40,000 scores was a fifth of a comparison's time).
    Lists, not objects, where the order matters: PostgreSQL's jsonb keeps an object's keys in an order of its
    own."""
    variant_at = {v: i for i, v in enumerate(figures.variants)}
    for _, _, v, *_ in figures.cells:
        variant_at.setdefault(v, len(variant_at))
    return {
        "shape": CELL_FIGURES_SHAPE, "variants": list(figures.variants),
        "names": list(variant_at),  # every variant with a cell (a variant is in ``variants`` when it has one)
        "index": [c[0] for c in figures.cells], "variant": [variant_at[c[2]] for c in figures.cells],
        "score": [c[3] for c in figures.cells], "shown": [c[4] for c in figures.cells],
        "response": [c[5] for c in figures.cells],
        "trials": [[v, t.cells, t.pass_at_k, t.pass_hat_k, t.flaky, t.flaky_cells] for v, t in figures.trials.items()],
        "bounds": None if figures.bounds is None else [[v, f, n] for v, (f, n) in figures.bounds.items()],
    }


def cell_figures_of(stored: dict | None, prompts: Sequence) -> CellFigures | None:
    """``CellFigures`` back from their stored form (``cell_figures_json``) and the run's ``prompts``; None when it
    is missing or of another shape (the caller builds the matrix)."""
    if not isinstance(stored, dict) or stored.get("shape") != CELL_FIGURES_SHAPE:
        return None
    from .stats import TrialFigures

    from .cellcompare import columns_of_stored

    trials = {v: TrialFigures(cells_, at, hat, flaky, flaky_cells)
              for v, cells_, at, hat, flaky, flaky_cells in stored["trials"]}
    bounds = stored.get("bounds")
    return CellFigures(list(stored["variants"]), None, trials,
                       None if bounds is None else {v: (int(f), int(n)) for v, f, n in bounds},
                       columns=columns_of_stored(stored, [p.id for p in prompts]))


def figure_bounds(figures: CellFigures) -> dict:
    """Per variant its deal-breaker ``bounds.Bound`` from the kept counts, as ``bounds.matrix_bounds`` gives it."""
    from .bounds import Bound, upper_bound  # SciPy's Beta quantile: for the pages that show a bound

    return {v: Bound(v, f, n, upper_bound(f, n)) for v, (f, n) in (figures.bounds or {}).items()}
