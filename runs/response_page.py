"""What the response page shows: the cell it is a trial of, the points grouped as the score groups them, and each
group's part."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from runs.engine.repeats import PointFlips, point_flips
from runs.engine.scoring import ScoredPoint, calculate, group_kind, round2

from runs.engine.matrix import Matrix

from .models import PointAssessment, PointOverride, Response
from .verdicts import cell_view


@dataclass
class PointView:
    """One point as the response page shows it."""

    pa: PointAssessment
    number: int  # 1-based, in authored order

    @property
    def override(self) -> PointOverride | None:
        return getattr(self.pa, "override", None)

    @property
    def score(self) -> float | None:
        return self.pa.effective_score

    @property
    def evaluated(self) -> bool:
        return self.score is not None

    @property
    def verdicts(self) -> list[dict]:
        """The verdicts that made the score (each judge's first asking, and the backup's): the re-askings
        are in ``flips``."""
        return [{**v, "failed": bool(v.get("error")) or v.get("score") is None} for v in self.pa.verdicts
                if v.get("role") != "repeat"]

    @cached_property
    def flips(self) -> PointFlips:
        """Each judge asked more than once about this point, with every asking's label (runs.engine.repeats)."""
        return point_flips(self.pa.verdicts)

    @property
    def confirmation(self):
        return getattr(self.pa, "confirmation", None)


@dataclass
class GroupView:
    """Required points, one ``should`` path, or one ``should_not`` path, with its part in the score."""

    path_id: str  # "" for the required points
    kind: str  # required, should, should_not
    title: str
    points: list[PointView]
    mean: float | None
    role: str = ""  # counts, best, lost, worst, spared, left-out
    why: str = ""

    @property
    def scored(self) -> list[PointView]:
        return [p for p in self.points if p.evaluated]

    @property
    def formula(self) -> str:
        """The weighted mean written out: (1 x 1.00 + 2 x 0.50) / 3."""
        scored = self.scored
        if not scored:
            return ""
        weights = [p.pa.multiplier if p.pa.multiplier is not None else 1.0 for p in scored]
        terms = " + ".join(f"{w:g} × {p.score:.2f}" for w, p in zip(weights, scored))
        return f"({terms}) / {sum(weights):g}"

    @property
    def counts(self) -> bool:
        return self.role in ("counts", "best", "worst")


@dataclass
class CalculationView:
    groups: list[GroupView]
    parts: list[tuple[str, float]]  # (what, mean) averaged into the score
    left_out: list[str]
    score: float | None  # unrounded
    rounded: float | None
    overridden: bool
    judged_score: float | None


def _title(kind: str, ordinal: int, path_id: str) -> str:
    if kind == "required":
        return "Required points"
    if kind == "should":
        return f"Alternative path {ordinal}"
    return f"Should-not path {ordinal}"


def review_response(response: Response, assessments: list[PointAssessment]) -> CalculationView:
    """Group the points as the score does and say, for each group, what part it plays (DESIGN.md scoring)."""
    calc = calculate(ScoredPoint(score=pa.effective_score, multiplier=pa.multiplier, path_id=pa.path_id or None,
                                 kind=pa.kind)
                     for pa in assessments)
    views = {pa.pk: PointView(pa, i + 1) for i, pa in enumerate(assessments)}
    by_path: dict[str, list[PointView]] = {}
    for pa in assessments:
        by_path.setdefault(pa.path_id or "", []).append(views[pa.pk])
    best = calc.best_path.path_id if calc.best_path else None
    worst = calc.worst_not_path.path_id if calc.worst_not_path else None
    groups: list[GroupView] = []
    ordinals = {"should": 0, "should_not": 0}
    scores = {g.path_id or "": g.mean for g in (calc.required, *calc.paths, *calc.not_paths) if g is not None}
    for group in (calc.required, *calc.paths, *calc.not_paths):
        if group is None:
            continue
        path_id = group.path_id or ""
        kind = group_kind(group.path_id)
        if kind != "required":
            ordinals[kind] += 1
        view = GroupView(path_id=path_id, kind=kind, title=_title(kind, ordinals.get(kind, 0), path_id),
                         points=by_path.get(path_id, []), mean=group.mean)
        if group.mean is None:
            view.role, view.why = "left-out", "Left out: none of its points could be evaluated."
        elif kind == "required":
            view.role, view.why = "counts", "Counts: the weighted mean of the required points."
        elif kind == "should":
            if path_id == best:
                view.role = "best"
                view.why = ("Counts: the best path." if len(calc.paths) > 1 else
                            "Counts: the only path with a score.")
            else:
                best_mean = scores.get(best)
                view.role = "lost"
                view.why = (f"Tied with {_title('should', _ordinal(calc.paths, best), best)}, which comes first and "
                            "counts." if best_mean is not None and group.mean == best_mean else
                            f"Does not count: {round2(group.mean):.2f} is below the best path's "
                            f"{round2(best_mean):.2f}.")
        else:
            if path_id == worst:
                view.role = "worst"
                view.why = "Counts: the worst should-not path (meeting any should-not path fails the response)."
            else:
                view.role = "spared"
                worst_mean = scores.get(worst)
                view.why = (f"Does not count: {round2(group.mean):.2f} is above the worst should-not path's "
                            f"{round2(worst_mean):.2f}." if worst_mean is not None and group.mean != worst_mean else
                            "Does not count: another should-not path with the same score comes first.")
        groups.append(view)
    names = {g.path_id: g.title for g in groups}
    parts = [(names.get("" if name == "required" else name, name), mean) for name, mean in calc.parts]
    overridden = any(getattr(pa, "override", None) is not None for pa in assessments)
    return CalculationView(
        groups=groups, parts=parts, left_out=[names.get("" if n == "required" else n, n) for n in calc.left_out],
        score=calc.score, rounded=round2(calc.score) if calc.score is not None else None, overridden=overridden,
        judged_score=response.judged_score,
    )


def _ordinal(paths, path_id) -> int:
    return next((i + 1 for i, g in enumerate(paths) if g.path_id == path_id), 0)


def cell_context(matrix: Matrix | None, response: Response, siblings) -> dict:
    """The response's cell as the page leads with it (the matrix's score, rule and whether it passed; then this
    trial, "trial 2 of 3"), its trials' links, and each other model's cell score for the prompt, linked to that
    model's trial with this trial's number (else the trial its cell stands for). ``siblings``: the run's
    responses, read only when the run has no matrix (a blueprint that no longer parses)."""
    if matrix is None:
        here = siblings.filter(prompt_index=response.prompt_index)
        return {"cell": None, "many_trials": False, "trial_number": response.trial + 1,
                "trials": list(here.filter(variant_id=response.variant_id).order_by("trial")
                               .values_list("pk", "trial", "score")),
                "other_models": [{"pk": pk, "variant_id": v, "cell": None, "score": score} for pk, v, score in
                                 here.filter(trial=0).exclude(variant_id=response.variant_id).order_by("variant_id")
                                 .values_list("pk", "variant_id", "score")]}
    cell = matrix.cell(response.prompt_index, response.variant_id)
    others = [c for c in matrix.row(response.prompt_index)
              if c is not None and c.variant_id != response.variant_id and c.response_id]
    return {
        "cell": cell_view(cell),
        "many_trials": cell is not None and cell.k > 1,
        "trial_number": response.trial + 1,
        "trials": [(t.response_id, t.trial, t.score) for t in cell.trials] if cell is not None else [],
        "other_models": [{"pk": next((t.response_id for t in c.trials if t.trial == response.trial), c.response_id),
                          "variant_id": c.variant_id, "cell": cell_view(c)} for c in others],
    }
