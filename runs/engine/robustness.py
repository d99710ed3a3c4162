"""What would flip a decision: a pair's verdict re-decided under each plausible alternative, from stored results.

A verdict ("B better than A") rests on choices: who judged, which prompts were asked, how points were weighed,
which trials happened to come out. Each alternative below changes one choice, re-scores from what is stored (no
call is made), and re-decides the pair with the same paired bootstrap (``stats.paired_many``) the page shows:

* ``judge``: each judge alone instead of the consensus (only with two or more judges): every judged point takes
  that judge's own first answer (inverted for a should-not point), and a point it did not answer is an error, as
  in a run with that judge alone; a reviewer's override stays (a person decided it). Each response's score is
  then worked out again by the engine's own rules (``scoring.calculate``, rounded as stored, the pass/fail layer
  ``assess.verdict_layer`` where the prompt has one; a response none of whose judged points has a score is not
  evaluated, as when every judge failed), and each cell's trials are combined by the matrix's
  ``cell_outcome`` (the prompt's rule).
* ``tag``: the prompts with a tag left out, for each tag (the ``TAGS_MAX`` most common).
* ``group``: each kind of point group left out of every prompt: the required points, the alternative paths
  (``should`` paths) or the should-not points (a prompt's groups, ``scoring.calculate``).
* ``weights``: judged points at half and at double their weight against function points (where a rubric mixes
  them); every point at weight 1 (where a point has its own weight); every prompt at weight 1 (where a prompt
  has its own). Halving or doubling every weight at once changes no mean, so weights move against each other.
* ``trials``: each cell's trials drawn again with replacement (``TRIAL_RESAMPLES`` draws, seeded), combined by
  the prompt's rule (only where some cell has two or more trials).
* ``style``: for Pairs, the verdict of the style-controlled rating instead of the scores: when people judged
  both models of the pair on the Pairs page, ``ratings.style_verdicts`` (Bradley-Terry with answer length and
  markdown as covariates, its bootstrap interval of the two strengths' difference) says better, worse or can't
  tell; the caller passes it (``style``), and the pair gains this one alternative. Without such judgements (or
  across two runs, whose answers no Pairs judgement sets side by side) there is none.

Pure Python (and NumPy through stats): no Django here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from . import stats
from .assess import PointAssessment, verdict_layer
from .matrix import ResponseRecord, cell_outcome
from .scoring import ScoredPoint, calculate, group_kind, round2

KINDS = ("judge", "tag", "group", "weights", "trials", "style")
TRIAL_RESAMPLES = 20
TAGS_MAX = 30
SEED = 35  # issue 35: the trials' draws are the same for the same data
GROUP_WORDS = {"required": "the required points", "should": "the alternative paths",
               "should_not": "the should-not points"}
VERDICT_WORDS = {"better": "better", "worse": "worse", "cant_tell": "can't tell"}


@dataclass(frozen=True, slots=True)
class PointRow:
    """One stored point assessment, as the alternatives need it."""

    kind: str  # function, judged
    path_id: str | None
    multiplier: float | None
    inverted: bool
    score: float | None  # final, as stored (the consensus, inverted for should-not; a reviewer's override)
    judges: tuple[tuple[str, float | None], ...] = ()  # each primary judge's first answer on the scale (None: failed)
    overridden: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """One stored response: where it sits, its stored score and verdict, and its points in rubric order."""

    prompt_index: int
    variant_id: str
    trial: int
    score: float | None
    verdict: str | None = None
    points: tuple[PointRow, ...] = ()


@dataclass(frozen=True, slots=True)
class Alternative:
    kind: str
    what: str  # in words: "judge X alone decides", "without the tag 'safety'"
    param: object = None


@dataclass(frozen=True, slots=True)
class Flip:
    what: str
    kind: str
    verdict: str

    def to_dict(self) -> dict:
        return {"what": self.what, "kind": self.kind, "verdict": self.verdict}


@dataclass
class Robustness:
    """A pair's verdict (``a`` against ``b``) and how many alternatives keep it."""

    a: str
    b: str
    verdict: str
    alternatives: int
    same: int
    flips: list[Flip] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"alternatives": self.alternatives, "same": self.same, "flips": [f.to_dict() for f in self.flips],
                "line": self.line}

    @property
    def line(self) -> str:
        """One line: "A better than B under 47 of 50 alternatives; it flips if judge X alone decides, or ..."."""
        if self.verdict == "cant_tell":
            head = f"can't tell {self.a} from {self.b}"
        else:
            head = f"{self.a} {VERDICT_WORDS[self.verdict]} than {self.b}"
        if not self.alternatives:
            return f"{head}; no alternative to try (one judge, no tag, no point group to leave out, one trial)"
        head += f" under {self.same} of {self.alternatives} alternative{'s' if self.alternatives != 1 else ''}"
        if not self.flips:
            return f"{head}; no single alternative flips it"
        shown = self.flips[:3]
        more = len(self.flips) - len(shown)
        if self.verdict == "cant_tell":
            parts = [f"{f.what} ({VERDICT_WORDS[f.verdict]})" for f in shown]
            tail = "it would be decided if " + ", or ".join(parts)
        else:
            parts = [f.what + ("" if f.verdict == "cant_tell" else f" ({VERDICT_WORDS[f.verdict]})") for f in shown]
            tail = "it flips if " + ", or ".join(parts)
        return f"{head}; {tail}" + (f", and {more} more" if more else "")


# --- re-scoring one response ---------------------------------------------------------------------------------

# A point as the score needs it: (final score, weight, path id, kind); None: the point is left out.
Scored = tuple
PointMap = Callable[[PointRow], "Scored | None"]


class Rescorer:
    """Responses scored again from changed points, by the engine's rules; equal inputs are worked out once."""

    def __init__(self, prompts: Sequence):
        self.prompts = prompts
        self.memo: dict = {}
        self.layered = {i for i, p in enumerate(prompts) if p.has_verdicts}
        self.authored = {i: prompts[i].all_points() for i in self.layered}

    def score(self, prompt_index: int, points: tuple, *, judged_needed: bool = False
              ) -> tuple[float | None, str | None]:
        """``points``: ``(position, Scored)`` of what is kept. ``judged_needed``: a response none of whose judged
        points has a score is not evaluated (every judge it had failed)."""
        layered = prompt_index in self.layered
        key = (prompt_index if layered else -1, judged_needed, points)
        found = self.memo.get(key)
        if found is not None:
            return found
        scored = [ScoredPoint(*p) for _, p in points]
        if judged_needed and any(p.kind == "judged" for p in scored) and not any(
                p.kind == "judged" and p.score is not None for p in scored):
            found = (None, None)
        else:
            calc = calculate(scored) if scored else None
            score = round2(calc.score) if calc is not None and calc.score is not None else None
            if layered:
                authored = self.authored[prompt_index]
                assessed = tuple(PointAssessment(point=authored[i], score=p.score) for (i, _), p in zip(points, scored)
                                 if i < len(authored))
                layer = verdict_layer(self.prompts[prompt_index], assessed, score)
                found = (layer["score"], layer.get("verdict"))
            else:
                found = (score, None)
        self.memo[key] = found
        return found


def _as_is(row: PointRow) -> Scored:
    return (row.score, row.multiplier, row.path_id, row.kind)


def judge_alone(judge: str) -> PointMap:
    def change(row: PointRow) -> Scored:
        if row.kind != "judged" or row.overridden:
            return (row.score, row.multiplier, row.path_id, row.kind)
        said = None
        for j, s in row.judges:
            if j == judge:
                said = s
                break
        final = None if said is None else (1 - said if row.inverted else said)
        return (final, row.multiplier, row.path_id, row.kind)
    return change


def without_group(kind: str) -> PointMap:
    return lambda row: None if group_kind(row.path_id) == kind else (row.score, row.multiplier, row.path_id, row.kind)


def judged_weight(factor: float) -> PointMap:
    def change(row: PointRow) -> Scored:
        weight = 1.0 if row.multiplier is None else float(row.multiplier)
        return (row.score, weight * factor if row.kind == "judged" else weight, row.path_id, row.kind)
    return change


def flat_points(row: PointRow) -> Scored:
    return (row.score, 1.0, row.path_id, row.kind)


# --- columns: per variant, per prompt, the cell score under an alternative ----------------------------------------


Columns = dict[str, dict[str, float | None]]


def _rule_key(prompt) -> tuple:
    """What a cell's score depends on besides its trials: its prompt's rule (``matrix.cell_outcome``)."""
    if prompt is None:
        return (None,)
    verdicts = prompt.verdicts
    return (prompt.trial_aggregation, None if verdicts is None else repr(verdicts), bool(prompt.has_verdicts),
            prompt.trial_threshold)


class Side:
    """One run's stored answers, ready to be scored under alternatives."""

    def __init__(self, answers: Sequence[Answer], prompts: Sequence, variants: Iterable[str] | None = None):
        self.prompts = prompts
        self.rescorer = Rescorer(prompts)
        self.cells: dict[tuple[int, str], list[Answer]] = {}
        wanted = None if variants is None else set(variants)
        for a in answers:
            if wanted is None or a.variant_id in wanted:
                self.cells.setdefault((a.prompt_index, a.variant_id), []).append(a)
        for trials in self.cells.values():
            trials.sort(key=lambda t: t.trial)
        kept = [a for trials in self.cells.values() for a in trials]
        self.as_is = {id(a): tuple(map(_as_is, a.points)) for a in kept}
        self.variants = sorted({v for _, v in self.cells})
        self.flat = [(index, variant, self._prompt_id(index), trials)
                     for (index, variant), trials in self.cells.items()]
        self.judges = sorted({j for a in kept for p in a.points for j, _ in p.judges})
        self.groups = {group_kind(p.path_id) for a in kept for p in a.points}
        self.mixed = any({p.kind for p in a.points} >= {"judged", "function"} for a in kept)
        self.weighted_points = any(p.multiplier not in (None, 1, 1.0) for a in kept for p in a.points)
        self.many_trials = any(len(t) > 1 for t in self.cells.values())
        self.rule_keys = [_rule_key(p) for p in prompts]
        self.cell_memo: dict = {}
        self._base: Columns | None = None

    def _prompt_id(self, index: int) -> str:
        return self.prompts[index].id if 0 <= index < len(self.prompts) else str(index)

    def _cell(self, index: int, trials: tuple[tuple[int, float | None, str | None], ...]) -> float | None:
        """A cell's score from its trials by its prompt's rule (``matrix.cell_outcome``); equal cells once."""
        inside = 0 <= index < len(self.prompts)
        key = (self.rule_keys[index] if inside else None, trials)
        found = self.cell_memo.get(key, self)
        if found is self:
            records = [ResponseRecord(index, "", trial, score, verdict=verdict) for trial, score, verdict in trials]
            found = self.cell_memo[key] = cell_outcome(records, self.prompts[index] if inside else None).score
        return found

    def base(self) -> Columns:
        """The cell scores as stored (the matrix's)."""
        if self._base is None:
            out: Columns = {}
            for (index, variant), trials in self.cells.items():
                out.setdefault(variant, {})[self._prompt_id(index)] = self._cell(
                    index, tuple((t.trial, t.score, t.verdict) for t in trials))
            self._base = out
        return self._base

    def rescored(self, change: PointMap, *, judged_needed: bool = False) -> Columns:
        out: Columns = {v: {} for v in self.variants}
        score_of, as_is, cell = self.rescorer.score, self.as_is, self._cell
        for index, variant, prompt_id, trials in self.flat:
            outcome = []
            for t in trials:
                if t.points:
                    changed = tuple(map(change, t.points))
                    if changed != as_is[id(t)]:  # else nothing moved: the stored score stands
                        points = tuple((i, p) for i, p in enumerate(changed) if p is not None)
                        outcome.append((t.trial, *score_of(index, points, judged_needed=judged_needed)))
                        continue
                outcome.append((t.trial, t.score, t.verdict))
            out[variant][prompt_id] = cell(index, tuple(outcome))
        return out

    def resampled(self, rng: np.random.Generator) -> Columns:
        out: Columns = {}
        for (index, variant), trials in sorted(self.cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            if len(trials) > 1:
                drawn = rng.integers(0, len(trials), size=len(trials))
                chosen = tuple((j, trials[int(d)].score, trials[int(d)].verdict) for j, d in enumerate(drawn))
            else:
                chosen = tuple((t.trial, t.score, t.verdict) for t in trials)
            out.setdefault(variant, {})[self._prompt_id(index)] = self._cell(index, chosen)
        return out

    def columns(self, alt: Alternative, draws: dict[int, Columns]) -> Columns:
        if alt.kind == "judge":
            return self.rescored(judge_alone(alt.param), judged_needed=True)
        if alt.kind == "group":
            return self.rescored(without_group(alt.param))
        if alt.kind == "weights" and alt.param in (0.5, 2.0):
            return self.rescored(judged_weight(alt.param))
        if alt.kind == "weights" and alt.param == "points":
            return self.rescored(flat_points)
        if alt.kind == "trials":
            return draws[alt.param]
        return self.base()  # tags and prompt weights change what is compared, not the cells


STYLE_WHAT = "the Pairs rating controlled for style decides"
NAME_MAX = 60  # a tag or a judge as a line names it (both come from a blueprint or a model's id)


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= NAME_MAX else text[:NAME_MAX - 1] + "…"


def _judge_name(judge_id: str, all_ids: Sequence[str]) -> str:
    """A judge as a line names it: its id without the model, unless two judges share that id."""
    short = judge_id[:judge_id.rfind("(")] if judge_id.endswith(")") and "(" in judge_id else judge_id
    clash = sum(1 for j in all_ids if (j[:j.rfind("(")] if j.endswith(")") and "(" in j else j) == short)
    return short if short and clash == 1 else judge_id


def alternatives_for(sides: Sequence[Side], prompts: Sequence) -> list[Alternative]:
    """The alternatives that change something for these runs, in a stable order."""
    out: list[Alternative] = []
    judges = sorted({j for s in sides for j in s.judges})
    if len(judges) >= 2:
        out += [Alternative("judge", f"judge {_short(_judge_name(j, judges))} alone decides", j) for j in judges]
    counts: dict[str, int] = {}
    for p in prompts:
        for tag in dict.fromkeys(p.tags or ()):
            counts[tag] = counts.get(tag, 0) + 1
    tags = sorted((t for t, n in counts.items() if n < len(prompts)), key=lambda t: (-counts[t], t))[:TAGS_MAX]
    out += [Alternative("tag", f"without the tag '{_short(t)}'", t) for t in tags]
    groups = set().union(*(s.groups for s in sides)) if sides else set()
    if len(groups) >= 2:  # leaving out the only kind of group there is leaves nothing
        out += [Alternative("group", f"without {GROUP_WORDS[g]}", g) for g in ("required", "should", "should_not")
                if g in groups]
    if any(s.mixed for s in sides):
        out += [Alternative("weights", "judged points weigh half as much", 0.5),
                Alternative("weights", "judged points weigh twice as much", 2.0)]
    if any(s.weighted_points for s in sides):
        out.append(Alternative("weights", "every point weighs the same", "points"))
    if any(p.weight is not None and p.weight != 1 for p in prompts):
        out.append(Alternative("weights", "every prompt weighs the same", "prompts"))
    if any(s.many_trials for s in sides):
        out += [Alternative("trials", f"trials drawn again ({r + 1} of {TRIAL_RESAMPLES})", r)
                for r in range(TRIAL_RESAMPLES)]
    return out


class Study:
    """Every alternative's columns for one run (``pairs_within``) or a run and its base (``pairs_across``)."""

    def __init__(self, sides: Sequence[Side], prompts: Sequence):
        self.sides = list(sides)
        self.prompts = prompts
        self.alternatives = alternatives_for(self.sides, prompts)
        self._columns: dict[int, list[Columns]] = {}

    def columns(self, side: int) -> list[Columns]:
        if side not in self._columns:
            s = self.sides[side]
            draws = {}
            if any(a.kind == "trials" for a in self.alternatives):
                rng = np.random.Generator(np.random.PCG64(SEED + side))
                draws = {r: s.resampled(rng) for r in range(TRIAL_RESAMPLES)}
            self._columns[side] = [s.columns(a, draws) for a in self.alternatives]
        return self._columns[side]

    def decide(self, a: str, b: str, verdict: str, *, side_a: int = 0, side_b: int = 0,
               exclude: Iterable[str] = (), style: str | None = None) -> Robustness:
        """``a`` (of side ``side_a``) against ``b`` under every alternative, beside the shown ``verdict``;
        ``style``: the style-controlled Pairs rating's verdict on the pair, when there is one (one more
        alternative)."""
        weights = {p.id: p.weight for p in self.prompts}
        flat = {p.id: None for p in self.prompts}
        tagged = {p.id: set(p.tags or ()) for p in self.prompts}
        cols_a, cols_b = self.columns(side_a), self.columns(side_b)
        jobs: dict[str, list[tuple[int, dict, dict]]] = {"weighted": [], "flat": []}
        for i, alt in enumerate(self.alternatives):
            xa, xb = cols_a[i].get(a, {}), cols_b[i].get(b, {})
            if alt.kind == "tag":
                xa = {k: v for k, v in xa.items() if alt.param not in tagged.get(k, ())}
                xb = {k: v for k, v in xb.items() if alt.param not in tagged.get(k, ())}
            jobs["flat" if alt.param == "prompts" else "weighted"].append((i, xa, xb))
        verdicts: dict[int, str] = {}
        for name, todo in jobs.items():
            if todo:
                found = stats.paired_many([(xa, xb) for _, xa, xb in todo], weights if name == "weighted" else flat,
                                          exclude)
                verdicts.update({i: c.verdict for (i, _, _), c in zip(todo, found)})
        flips = [Flip(alt.what, alt.kind, verdicts[i]) for i, alt in enumerate(self.alternatives)
                 if verdicts[i] != verdict]
        count = len(self.alternatives)
        if style is not None:
            count += 1
            if style != verdict:
                flips.append(Flip(STYLE_WHAT, "style", style))
        return Robustness(a, b, verdict, count, count - len(flips), flips)


def pairs_within(answers: Sequence[Answer], prompts: Sequence, pairs: Sequence[tuple[str, str, str]],
                 style: Mapping[tuple[str, str], str] | None = None) -> list[Robustness]:
    """Each ``(a, b, shown verdict)`` of one run's variants, re-decided under every alternative. ``style``: the
    style-controlled Pairs rating's verdict per ``(a, b)`` (``ratings.style_verdicts``), where people judged both."""
    wanted = {v for a, b, _ in pairs for v in (a, b)}
    study = Study([Side(answers, prompts, wanted)], prompts)
    style = style or {}
    return [study.decide(a, b, verdict, style=style.get((a, b))) for a, b, verdict in pairs]


def pairs_across(answers: Sequence[Answer], prompts: Sequence, base_answers: Sequence[Answer], base_prompts: Sequence,
                 pairs: Sequence[tuple[str, str, str]], exclude: Iterable[str] = ()) -> list[Robustness]:
    """Each variant of a run (``a``) against itself in a base run (``b``), re-decided under every alternative.
    ``exclude``: prompt ids left out of the comparison (their content changed). The tags are the run's."""
    wanted = {v for a, b, _ in pairs for v in (a, b)}
    study = Study([Side(answers, prompts, wanted), Side(base_answers, base_prompts, wanted)], prompts)
    exclude = list(exclude)
    return [study.decide(a, b, verdict, side_a=0, side_b=1, exclude=exclude) for a, b, verdict in pairs]


def stored_answers(records: Iterable, points: Mapping[int, Sequence[PointRow]]) -> list[Answer]:
    """Answers from the matrix's ``ResponseRecord``s and each response's point rows (by response id)."""
    return [Answer(r.prompt_index, r.variant_id, r.trial, r.score, r.verdict or None,
                   tuple(points.get(r.response_id, ()))) for r in records]
