# Over 500 lines: every score rule in one place by design, one pure function per rule (docs/scoring.md).
"""Scores from point assessments: groups and paths, per-model statistics, similarity, judge agreement.

Pure functions over plain values; docs/scoring.md explains each with a worked
example. Where results must compare with the upstream's, the formulas are
its formulas (reference sections 3.10 and 4), except for the deviations
DESIGN.md lists:

1. No scorable point means no score ("not evaluated"), never 0; a group
   whose points all errored is left out, not counted as 0.
2. ``should_not`` paths (``not_path_<i>``) are groups of their own, and the
   worst of them counts: a response fails if it meets any "should not" path.
6. Required points and the best path combine as two groups (their mean).
13. Beside the upstream's agreement figures, the textbook interval
    Krippendorff's alpha.
"""

from __future__ import annotations

import hashlib
import math
from decimal import ROUND_HALF_UP, Decimal
from dataclasses import dataclass
from functools import lru_cache
from typing import Awaitable, Callable, Iterable, Literal, NamedTuple, Protocol, Sequence

GroupKind = Literal["required", "should", "should_not"]


def round_half_up(value: float, places: int = 2) -> float:
    """Round as JavaScript's ``Math.round(x * 10**places) / 10**places`` does: halves go up (0.125 -> 0.13)."""
    factor = 10 ** places
    return math.floor(value * factor + 0.5) / factor


def round_to_fixed(value: float, places: int = 2) -> float:
    """``parseFloat(x.toFixed(places))``, as the upstream rounds scores: the float's exact binary value, halves up.

    0.585 is stored as 0.58499999999999996447... and so becomes 0.58 (``Math.round(x * 100) / 100``
    would give 0.59); 0.595 becomes 0.59.
    """
    if not math.isfinite(value):
        return value
    # ``round`` rounds the float's exact value too, correctly, with halves to even: it differs from halves up only
    # where the exact value is a half at the last place (0.125, 0.375, 0.625...), where x * 2 * 10**places is an odd
    # integer, and exactly so (a product that is a small integer is exact). Only those take the exact decimal path
    # (rounding 20,000 changes through Decimal was a third of a big compare's first view).
    twice = value * (2 * 10 ** places)
    if not (twice.is_integer() and int(twice) % 2):
        return round(value, places) + 0.0  # -0.0 prints as 0
    exact = Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return float(exact) + 0.0


def round2(value: float) -> float:
    """A score to 2 places, as the upstream's consensus and final scores are (``toFixed(2)``)."""
    return round_to_fixed(value, 2)


def population_std(values: Sequence[float]) -> float | None:
    """The population standard deviation, or None for fewer than 2 values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def sample_std(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1), or None for fewer than 2 values."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


# --------------------------------------------------------------------------
# One response: points -> groups -> score


class Scorable(Protocol):
    """Anything with a final score (None: no score), a multiplier and a path id."""

    @property
    def score(self) -> float | None: ...

    @property
    def multiplier(self) -> float | None: ...

    @property
    def path_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ScoredPoint:
    score: float | None  # after should_not inversion; None: the point errored
    multiplier: float | None = 1.0
    path_id: str | None = None
    kind: str | None = None  # function or judged: function points are added up first, as the upstream does


def group_kind(path_id: str | None) -> GroupKind:
    if not path_id:
        return "required"
    return "should_not" if path_id.startswith("not_") else "should"


@dataclass(frozen=True, slots=True)
class GroupScore:
    """One group's weighted mean. ``mean`` is None when every point in it errored (it is then left out)."""

    path_id: str | None  # None: the required points
    mean: float | None
    points: int
    scored: int

    @property
    def kind(self) -> GroupKind:
        return group_kind(self.path_id)

    def to_dict(self) -> dict:
        return {"pathId": self.path_id, "mean": self.mean, "points": self.points, "scored": self.scored}


@dataclass(frozen=True, slots=True)
class Calculation:
    """The worked calculation of one response's score, for the results page."""

    required: GroupScore | None
    paths: tuple[GroupScore, ...]  # should paths, in path order
    not_paths: tuple[GroupScore, ...]  # should_not paths
    best_path: GroupScore | None  # the best should path that has a score
    worst_not_path: GroupScore | None  # the worst should_not path that has a score
    score: float | None  # mean of the parts below; None: nothing could be scored

    @property
    def parts(self) -> tuple[tuple[str, float], ...]:
        """What the score averages: the required mean, the best path, the worst should_not path."""
        out = []
        if self.required is not None and self.required.mean is not None:
            out.append(("required", self.required.mean))
        if self.best_path is not None:
            out.append((self.best_path.path_id, self.best_path.mean))
        if self.worst_not_path is not None:
            out.append((self.worst_not_path.path_id, self.worst_not_path.mean))
        return tuple(out)

    @property
    def left_out(self) -> tuple[str, ...]:
        """Groups left out because all of their points errored."""
        groups = [g for g in (self.required, *self.paths, *self.not_paths) if g is not None]
        return tuple(g.path_id or "required" for g in groups if g.mean is None)

    def to_dict(self) -> dict:
        return {
            "required": self.required.to_dict() if self.required else None,
            "paths": [g.to_dict() for g in self.paths],
            "notPaths": [g.to_dict() for g in self.not_paths],
            "bestPath": self.best_path.path_id if self.best_path else None,
            "worstNotPath": self.worst_not_path.path_id if self.worst_not_path else None,
            "parts": [{"group": name, "mean": value} for name, value in self.parts],
            "leftOut": list(self.left_out),
            "score": self.score,
        }


def _weight(point: Scorable) -> float:
    return 1.0 if point.multiplier is None else float(point.multiplier)


def _group(path_id: str | None, points: list[Scorable]) -> GroupScore:
    # Added up in the upstream's order (function points, then judged, each in rubric order: reference 3.1
    # step 5), so that a sum that lands on a rounding edge (0.5449999... against 0.545) rounds as it does.
    # The points keep their rubric order everywhere they are shown.
    scored = sorted((p for p in points if p.score is not None), key=lambda p: getattr(p, "kind", None) != "function")
    total_weight = sum(_weight(p) for p in scored)
    mean = sum(p.score * _weight(p) for p in scored) / total_weight if scored and total_weight > 0 else None
    return GroupScore(path_id=path_id, mean=mean, points=len(points), scored=len(scored))


def _path_order(path_id: str) -> tuple[int, str]:
    tail = path_id.rsplit("_", 1)[-1]
    return (int(tail), path_id) if tail.isdigit() else (1 << 30, path_id)


def calculate(points: Iterable[Scorable]) -> Calculation:
    """Group points by path and combine the groups (reference 4.1, DESIGN.md deviations 1, 2 and 6).

    Required points (no path id) give their weighted mean; each path gives its
    own. The score is the mean of the groups that exist: the required mean,
    the best ``should`` path and the worst ``should_not`` path. Errored
    points are left out of every mean; a group with no scored point is left
    out; with nothing left, there is no score.
    """
    by_group: dict[str | None, list[Scorable]] = {}
    for point in points:
        by_group.setdefault(point.path_id or None, []).append(point)
    required = _group(None, by_group.pop(None)) if None in by_group else None
    groups = [_group(pid, pts) for pid, pts in sorted(by_group.items(), key=lambda item: _path_order(item[0]))]
    paths = tuple(g for g in groups if g.kind == "should")
    not_paths = tuple(g for g in groups if g.kind == "should_not")
    best = max((g for g in paths if g.mean is not None), key=lambda g: g.mean, default=None)
    worst = min((g for g in not_paths if g.mean is not None), key=lambda g: g.mean, default=None)
    values = [g.mean for g in (required, best, worst) if g is not None and g.mean is not None]
    return Calculation(required=required, paths=paths, not_paths=not_paths, best_path=best, worst_not_path=worst,
                       score=sum(values) / len(values) if values else None)


def aggregate(points: Iterable[Scorable]) -> float | None:
    """The response's coverage score, unrounded; None when no point could be scored."""
    return calculate(points).score


# --------------------------------------------------------------------------
# Across prompts and models


class ScoreStats(NamedTuple):
    mean: float | None  # weighted by prompt weight; None: nothing evaluated
    std: float | None  # sample std-dev of the unweighted scores; None below 2
    n: int  # scores counted
    n_not_evaluated: int  # responses left out because they have no score


def model_stats(scores_with_weights: Iterable[tuple[float | None, float | None]]) -> ScoreStats:
    """One model variant across prompts (reference 4.3): prompt-weighted mean, sample std-dev.

    Each item is ``(score, prompt weight)``; a missing weight counts 1. A
    response that was not evaluated (score None) is left out and counted.
    """
    scored: list[tuple[float, float]] = []
    not_evaluated = 0
    for score, weight in scores_with_weights:
        if score is None:
            not_evaluated += 1
        else:
            scored.append((score, 1.0 if weight is None else float(weight)))
    total_weight = sum(w for _, w in scored)
    mean = sum(s * w for s, w in scored) / total_weight if scored and total_weight > 0 else None
    return ScoreStats(mean=mean, std=sample_std([s for s, _ in scored]), n=len(scored),
                      n_not_evaluated=not_evaluated)


def run_stats(scores: Iterable[float | None]) -> ScoreStats:
    """The run's overall score (reference 4.4): the flat mean over every cell, unweighted, sample std-dev."""
    return model_stats((score, 1.0) for score in scores)


# --------------------------------------------------------------------------
# Similarity to the ideal response

# The caller's embeddings function: one vector per text, or the reason it failed.
EmbedFn = Callable[[Sequence[str]], Awaitable["list[Sequence[float]] | str"]]


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cosine of the angle between two vectors; None when one is empty, zero, or they differ in length."""
    if not a or len(a) != len(b):
        return None
    norm_a = math.sqrt(sum(x * x for x in a))
    norm_b = math.sqrt(sum(y * y for y in b))
    if norm_a == 0 or norm_b == 0:
        return None
    return sum(x * y for x, y in zip(a, b)) / (norm_a * norm_b)


async def similarity_to_ideal(embed: EmbedFn, text: str, ideal: str) -> tuple[float | None, str | None]:
    """``(similarity, error)`` of a response to its ideal; exactly one of them is None."""
    result = await embed([text, ideal])
    if isinstance(result, str):
        return None, f"embedding failed: {result}"
    if len(result) != 2:
        return None, f"embedding failed: expected 2 vectors, got {len(result)}"
    value = cosine_similarity(result[0], result[1])
    if value is None:
        return None, "embedding failed: the vectors are empty, zero or of different lengths"
    return value, None


# --------------------------------------------------------------------------
# Judge agreement


class Rating(NamedTuple):
    """One judge's score for one point (before any should_not inversion)."""

    judge: str  # the judge's id, or its approach when it has none (the part before "(" in ids)
    score: float
    model: str = ""
    approach: str = ""


@dataclass(frozen=True, slots=True)
class JudgeUse:
    judge_id: str
    model: str
    approach: str
    assessment_count: int


@dataclass(frozen=True, slots=True)
class JudgeAgreement:
    """The upstream's agreement figures for one response (reference 3.10, ``judge_consensus.json``).

    Its "alpha" is 1 - Do/De over squared differences without Krippendorff's
    corrections; the textbook alpha is ``krippendorff_alpha_interval``.
    """

    krippendorffs_alpha: float
    interpretation: str
    num_items: int
    num_judges: int
    num_comparisons: int
    judges_used: tuple[JudgeUse, ...]
    judge_set_fingerprint: str

    def to_upstream(self) -> dict:
        return {
            "krippendorffsAlpha": self.krippendorffs_alpha,
            "interpretation": self.interpretation,
            "numItems": self.num_items,
            "numJudges": self.num_judges,
            "numComparisons": self.num_comparisons,
            "judgesUsed": [{"judgeId": u.judge_id, "model": u.model, "approach": u.approach,
                            "assessmentCount": u.assessment_count} for u in self.judges_used],
            "judgeSetFingerprint": self.judge_set_fingerprint,
        }

    @classmethod
    def from_upstream(cls, data: dict) -> JudgeAgreement:
        return cls(krippendorffs_alpha=data.get("krippendorffsAlpha"), interpretation=data.get("interpretation"),
                   num_items=data.get("numItems"), num_judges=data.get("numJudges"),
                   num_comparisons=data.get("numComparisons"),
                   judges_used=tuple(JudgeUse(u.get("judgeId"), u.get("model"), u.get("approach"),
                                              u.get("assessmentCount")) for u in data.get("judgesUsed") or ()),
                   judge_set_fingerprint=data.get("judgeSetFingerprint"))


def _sum_squared_pair_differences(values: Sequence[float]) -> float:
    """Σ (a - b)² over the unordered pairs of ``values``, in linear time: n · Σ (v - mean)²."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return len(values) * sum((v - mean) ** 2 for v in values)


def interpret_alpha(alpha: float, pooled_variance: float) -> str:
    if alpha >= 0.8:
        return "reliable"
    if alpha >= 0.667:
        return "tentative"
    if abs(alpha) < 0.1 and pooled_variance < 0.02:
        return "unstable"
    return "unreliable"


def judge_set_fingerprint(judges: Iterable[str]) -> str:
    """First 12 hex digits of SHA-256 over the sorted, unique judge labels joined by commas."""
    return _fingerprint(",".join(sorted(set(judges))))


@lru_cache(maxsize=64)
def _fingerprint(joined: str) -> str:  # a run's items share a judge set or two: worked out once each
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:12]


def judge_agreement(points: Sequence[Sequence[Rating]]) -> JudgeAgreement | None:
    """The upstream's agreement figures over the points two or more judges scored; None without such a point.

    Do is the mean squared difference over the pairs of scores within a
    point; De the mean over all pairs of the pooled scores; alpha = 1 - Do/De
    rounded to 3 places, and 1 when the scores do not vary at all.
    """
    items = [list(ratings) for ratings in points if len(ratings) >= 2]
    if not items:
        return None
    comparisons = sum(len(r) * (len(r) - 1) // 2 for r in items)
    observed = sum(_sum_squared_pair_differences([x.score for x in r]) for r in items) / comparisons
    pooled = [x.score for r in items for x in r]
    expected = _sum_squared_pair_differences(pooled) / (len(pooled) * (len(pooled) - 1) / 2)
    pooled_mean = sum(pooled) / len(pooled)
    pooled_variance = sum((v - pooled_mean) ** 2 for v in pooled) / len(pooled)
    if expected == 0:
        alpha, interpretation = 1.0, "reliable"
    else:
        alpha = round_half_up(1 - observed / expected, 3)
        interpretation = interpret_alpha(alpha, pooled_variance)
    counts: dict[str, JudgeUse] = {}
    for ratings in points:
        for r in ratings:
            use = counts.get(r.judge)
            counts[r.judge] = JudgeUse(r.judge, r.model, r.approach, (use.assessment_count if use else 0) + 1)
    used = tuple(sorted(counts.values(), key=lambda u: -u.assessment_count))
    return JudgeAgreement(
        krippendorffs_alpha=alpha,
        interpretation=interpretation,
        num_items=len(items),
        num_judges=len(items[0]),
        num_comparisons=comparisons,
        judges_used=used,
        judge_set_fingerprint=judge_set_fingerprint(counts),
    )


def krippendorff_alpha_interval(matrix: Sequence[Sequence[float | None]]) -> float | None:
    """The textbook interval Krippendorff's alpha (Krippendorff 2011, δ² = (a - b)²).

    ``matrix`` is reliability data: one row per judge, one column per point,
    None (or NaN) where a judge gave no score. Only points with two or more
    scores count. Returns None when alpha is undefined: no such point, or no
    variation at all among their scores.

    alpha = 1 - (n - 1) · Σ_u [Σ_{i≠j in u} δ² / (m_u - 1)] / Σ_{i≠j} δ²
    with n the number of pairable scores, m_u the scores of point u.
    """
    width = max((len(row) for row in matrix), default=0)
    units = []
    for column in range(width):
        values = [row[column] for row in matrix if column < len(row)]
        values = [float(v) for v in values if v is not None and not math.isnan(v)]
        if len(values) >= 2:
            units.append(values)
    if not units:
        return None
    pooled = [v for unit in units for v in unit]
    n = len(pooled)
    # Ordered pairs: twice the unordered sums.
    within = sum(2 * _sum_squared_pair_differences(unit) / (len(unit) - 1) for unit in units)
    total = 2 * _sum_squared_pair_differences(pooled)
    if total == 0:
        return None
    return 1 - (n - 1) * within / total


@dataclass(frozen=True, slots=True)
class AlphaResult:
    """The textbook alpha over a run, and what it rests on."""

    alpha: float | None  # None: undefined (no point with two scores, or no variation)
    points: int  # points with scores from two or more judges
    judges: int  # distinct judges among them

    def to_dict(self) -> dict:
        return {"krippendorffsAlphaInterval": self.alpha, "points": self.points, "judges": self.judges}


def textbook_alpha(points: Iterable[Sequence[Rating]]) -> AlphaResult:
    """The textbook interval alpha over all points two or more judges scored (DESIGN.md deviation 13).

    Each item holds one point's ratings, from any response of the run. A
    judge that rated one point twice would be a bug upstream of here.
    """
    rated = [list(ratings) for ratings in points if len(ratings) >= 2]
    judges = sorted({r.judge for ratings in rated for r in ratings})
    row_of = {judge: i for i, judge in enumerate(judges)}
    matrix: list[list[float | None]] = [[None] * len(rated) for _ in judges]
    for column, ratings in enumerate(rated):
        for r in ratings:
            matrix[row_of[r.judge]][column] = r.score
    return AlphaResult(alpha=krippendorff_alpha_interval(matrix), points=len(rated), judges=len(judges))


# --------------------------------------------------------------------------
# The pass/fail layer: checks, gates, verdicts (docs/scoring.md, section 7)

Verdict = Literal["pass", "borderline", "fail"]
VERDICTS: tuple[str, ...] = ("pass", "borderline", "fail")
_EPSILON = 1e-9


class VerdictBands(Protocol):
    """``blueprints.spec.schema.Verdicts``: the pass mark and the optional borderline mark."""

    @property
    def pass_at(self) -> float: ...

    @property
    def borderline_at(self) -> float | None: ...


class CheckSpec(Protocol):
    """``blueprints.spec.schema.Check``."""

    id: str
    label: str
    kind: str
    gate: float | None
    min_score: float | None


@dataclass(frozen=True, slots=True)
class _Bands:
    pass_at: float = 0.8
    borderline_at: float | None = 0.6


DEFAULT_BANDS = _Bands()


def band(score: float, verdicts: VerdictBands | None = None) -> Verdict:
    """pass at or above the pass mark, borderline at or above the borderline mark, else fail (AgentV's 0.8 / 0.6)."""
    verdicts = verdicts or DEFAULT_BANDS
    if score + _EPSILON >= verdicts.pass_at:
        return "pass"
    if verdicts.borderline_at is not None and score + _EPSILON >= verdicts.borderline_at:
        return "borderline"
    return "fail"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check of one response: its score (the weighted mean of its points) against its gate or minimum."""

    id: str
    label: str
    kind: str
    score: float | None  # None: none of its points could be scored
    gate: float | None = None
    min_score: float | None = None
    points: int = 0

    @property
    def threshold(self) -> float | None:
        return self.gate if self.gate is not None else self.min_score

    @property
    def passed(self) -> bool | None:
        """True or False against its gate or minimum; None without one, or without a score."""
        if self.threshold is None or self.score is None:
            return None
        return self.score + _EPSILON >= self.threshold

    def to_dict(self) -> dict:
        return {"id": self.id, "label": self.label, "kind": self.kind, "score": self.score, "gate": self.gate,
                "minScore": self.min_score, "passed": self.passed, "points": self.points}

    @classmethod
    def from_dict(cls, data: dict) -> CheckResult:
        return cls(id=data.get("id") or "", label=data.get("label") or "", kind=data.get("kind") or "",
                   score=data.get("score"), gate=data.get("gate"), min_score=data.get("minScore"),
                   points=data.get("points") or 0)


def check_results(points: Iterable[tuple[str | None, Scorable]], checks: Sequence[CheckSpec]) -> tuple[CheckResult, ...]:
    """Each check's weighted mean over its points (``(check id, point)`` pairs); errored points left out."""
    members: dict[str, list[Scorable]] = {}
    for check_id, point in points:
        if check_id:
            members.setdefault(check_id, []).append(point)
    out = []
    for check in checks:
        mine = members.get(check.id, [])
        group = _group(check.id, mine)
        out.append(CheckResult(id=check.id, label=check.label, kind=check.kind, score=group.mean, gate=check.gate,
                               min_score=check.min_score, points=len(mine)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class VerdictOutcome:
    """The pass/fail layer over one response's score."""

    score: float | None  # after gates: 0 when a gate failed
    score_before_gates: float | None
    verdict: Verdict | None  # None: not evaluated, or a gate or minimum could not be scored
    checks: tuple[CheckResult, ...] = ()
    gates_failed: tuple[str, ...] = ()  # labels of the failed gates
    checks_failed: tuple[str, ...] = ()  # labels of checks below their minimum (not gates)
    reason: str | None = None  # why there is no verdict, or what decided it

    @property
    def passed(self) -> bool | None:
        return None if self.verdict is None else self.verdict == "pass"


def decide_verdict(score: float | None, checks: Sequence[CheckResult],
                   verdicts: VerdictBands | None) -> VerdictOutcome:
    """Gates first, then per-check minimums, then the bands (reference 2.3, seeds 002 and 003).

    A failed gate makes the score 0 and the verdict fail. A check below its minimum
    fails the verdict and leaves the score alone. A gate or minimum whose check could
    not be scored leaves the verdict undecided (None): a failure to score is never a
    pass or a fail. Otherwise the score's band decides (0.8 / 0.6 unless ``verdicts``).
    """
    checks = tuple(checks)
    if score is None:
        return VerdictOutcome(None, None, None, checks, reason="not evaluated")
    gates_failed = tuple(c.label for c in checks if c.gate is not None and c.passed is False)
    below = tuple(c.label for c in checks if c.gate is None and c.min_score is not None and c.passed is False)
    unscored = [c.label for c in checks if c.threshold is not None and c.score is None]
    if gates_failed:
        names = ", ".join(f"'{g}'" for g in gates_failed)
        return VerdictOutcome(0.0, score, "fail", checks, gates_failed, below,
                              f"required check {names} failed, so the score is 0")
    if below:
        names = ", ".join(f"'{c}'" for c in below)
        return VerdictOutcome(score, score, "fail", checks, (), below, f"check {names} scored below its minimum")
    if unscored:
        names = ", ".join(f"'{c}'" for c in unscored)
        return VerdictOutcome(score, score, None, checks,
                              reason=f"check {names} could not be scored, so the verdict is undecided")
    return VerdictOutcome(score, score, band(score, verdicts), checks)


# --------------------------------------------------------------------------
# Trials: one cell (prompt x model variant) run k times

TrialAggregation = Literal["mean", "best", "pass_at_k"]


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    trial: int
    score: float | None
    verdict: str | None = None


@dataclass(frozen=True, slots=True)
class CellOutcome:
    """A cell's trials combined as its prompt asks (reference 2.3 "Trials", 3.5 "Case")."""

    aggregation: str
    trials: tuple[TrialOutcome, ...]
    score: float | None  # mean, or the best trial's score; None: no trial was evaluated
    verdict: str | None
    passed_trials: int  # trials whose verdict is pass
    judged_trials: int  # trials with a verdict
    pass_at_k: float | None = None  # unbiased pass@k (``pass_at_k``): k the cell's trials; None with fewer judged
    pass_hat_k: float | None = None  # unbiased pass^k (``pass_hat_k``): every one of k trials passes
    score_std: float | None = None  # population std-dev of the evaluated trials' scores
    agreement: float | None = None  # share of trials with the most common verdict
    rule_pass_at_k: float | None = None  # AI Eval's own rule, 1 - (1 - p)^k, p = passed / judged (``pass_at_k`` only)

    @property
    def k(self) -> int:
        return len(self.trials)

    def to_dict(self) -> dict:
        return {
            "aggregation": self.aggregation, "k": self.k, "score": self.score, "verdict": self.verdict,
            "passedTrials": self.passed_trials, "judgedTrials": self.judged_trials, "passAtK": self.pass_at_k,
            "passHatK": self.pass_hat_k, "scoreStd": self.score_std, "agreement": self.agreement,
            "rulePassAtK": self.rule_pass_at_k,
            "trials": [{"trial": t.trial, "score": t.score, "verdict": t.verdict} for t in self.trials],
        }


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The unbiased estimate of pass@k, the chance that at least one of k trials passes, from ``c`` passes in
    ``n`` judged trials (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
    1 - C(n - c, k) / C(n, k). With k = n it is 1 when any trial passed, else 0; its mean over cells is the
    mean chance. The plug-in 1 - (1 - c/n)^k is biased (by up to 0.16 at k = 10). None when n < k: from fewer
    trials than k no unbiased estimate exists (its mean is a polynomial of degree n in the pass rate)."""
    if k < 1 or n < k or not 0 <= c <= n:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """The unbiased estimate of pass^k, the chance that all of k trials pass: C(c, k) / C(n, k) (None when n < k)."""
    if k < 1 or n < k or not 0 <= c <= n:
        return None
    return math.comb(c, k) / math.comb(n, k)


def aggregate_trials(trials: Sequence[TrialOutcome], aggregation: str | None = None, *,
                     verdicts: VerdictBands | None = None, use_verdicts: bool = False,
                     threshold: float | None = None) -> CellOutcome:
    """Combine a cell's trials.

    * ``mean`` (the default, and the only meaning of a cell score before trials): the mean
      score; the verdict is the mean's band.
    * ``best`` (AgentV's ``pass_at_k`` strategy): the best trial's score and verdict.
    * ``pass_at_k`` (AI Eval): the mean score; the cell passes when AI Eval's own rule 1 - (1 - p)^k reaches
      ``threshold`` (0.8 by default), p being the share of judged trials that passed and k their number
      (``rule_pass_at_k``; a plug-in figure, kept because the suite's verdicts are defined by it).

    The figures ``pass_at_k`` and ``pass_hat_k`` are the unbiased estimates (``pass_at_k``, ``pass_hat_k``
    below) with k the cell's trials, whatever the rule.

    Trials without a score are left out of every figure; with none left there is no score.
    """
    aggregation = aggregation or "mean"
    if len(trials) == 1 and not use_verdicts and aggregation != "pass_at_k":
        # One trial (most cells): its score and verdict, as the general case below gives them, at a tenth
        # of the cost (a 10,000-cell matrix is built per page view).
        only = trials[0]
        verdict = only.verdict
        judged = verdict is not None
        passed = 1 if verdict == "pass" else 0
        return CellOutcome(aggregation=aggregation, trials=(only,), score=only.score,
                           verdict=verdict if only.score is not None else None, passed_trials=passed,
                           judged_trials=int(judged), pass_at_k=float(passed) if judged else None,
                           pass_hat_k=float(passed) if judged else None,
                           score_std=0.0 if only.score is not None else None, agreement=1.0 if judged else None)
    return _aggregate_trials(trials, aggregation, verdicts=verdicts, use_verdicts=use_verdicts, threshold=threshold)


def _aggregate_trials(trials: Sequence[TrialOutcome], aggregation: str, *, verdicts: VerdictBands | None,
                      use_verdicts: bool, threshold: float | None) -> CellOutcome:
    trials = tuple(sorted(trials, key=lambda t: t.trial))
    scored_trials = [t for t in trials if t.score is not None]
    with_verdict = [t for t in trials if t.verdict is not None]
    passed = sum(1 for t in with_verdict if t.verdict == "pass")
    scores = [t.score for t in scored_trials]
    std = population_std(scores) if len(scores) > 1 else (0.0 if scores else None)
    agreement = None
    if with_verdict:
        counts: dict[str, int] = {}
        for t in with_verdict:
            counts[t.verdict] = counts.get(t.verdict, 0) + 1
        agreement = max(counts.values()) / len(with_verdict)
    p = passed / len(with_verdict) if with_verdict else None
    judged = len(with_verdict)
    rule = None if p is None or aggregation != "pass_at_k" else 1 - (1 - p) ** judged
    common = dict(aggregation=aggregation, trials=trials, passed_trials=passed, judged_trials=judged,
                  pass_at_k=pass_at_k(judged, passed, len(trials)) if judged else None,
                  pass_hat_k=pass_hat_k(judged, passed, len(trials)) if judged else None,
                  score_std=std, agreement=agreement, rule_pass_at_k=rule)
    if not scored_trials:
        return CellOutcome(score=None, verdict=None, **common)
    if aggregation == "best":
        best = max(scored_trials, key=lambda t: t.score)
        return CellOutcome(score=best.score, verdict=best.verdict, **common)
    mean = sum(scores) / len(scores)
    if aggregation == "pass_at_k":
        limit = 0.8 if threshold is None else threshold
        verdict = None if rule is None else ("pass" if rule + _EPSILON >= limit else "fail")
        return CellOutcome(score=mean, verdict=verdict, **common)
    if len(trials) == 1:
        return CellOutcome(score=mean, verdict=trials[0].verdict, **common)
    verdict = band(mean, verdicts) if use_verdicts else None
    return CellOutcome(score=mean, verdict=verdict, **common)
