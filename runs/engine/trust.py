"""How far to trust each judge, learned from what reviewers changed or confirmed (pure: no Django).

A point is *reviewed* when a reviewer overrode its score or confirmed that the judges are right; nothing
else counts (an override on one point says nothing of the response's other points, and silence is not
agreement). On a reviewed point the reviewer's score holds: the override, or the judges' score they
confirmed. Against it, each judge model's own verdict (on the point's score scale, so a should-not point
is compared after inversion) either *stands* (within ``TOLERANCE``: one step of the five-step scale) or
does not. Per judge model: the share that stands, the mean bias (positive: kinder than the reviewer), and
the points it got wrong, worst first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .judge import JudgeVerdict

TOLERANCE = 0.25  # one step of the 5-step scale
SHOWN_WRONG = 10  # the worst points listed per judge


@dataclass(frozen=True)
class WrongPoint:
    run_id: int
    response_id: int
    position: int
    prompt_id: str
    variant_id: str
    text: str
    judge_score: float
    human_score: float

    @property
    def off_by(self) -> float:
        return self.judge_score - self.human_score


@dataclass
class JudgeTrust:
    model: str
    points: int = 0  # judged points on reviewed responses this judge scored
    stands: int = 0
    overridden: int = 0  # of those, points a reviewer overrode
    bias_sum: float = 0.0
    runs: set = field(default_factory=set)
    wrong: list[WrongPoint] = field(default_factory=list)
    wrong_count: int = 0

    @property
    def agreement(self) -> float | None:
        return self.stands / self.points if self.points else None

    @property
    def mean_bias(self) -> float | None:
        return self.bias_sum / self.points if self.points else None

    @property
    def leaning(self) -> str:
        bias = self.mean_bias
        if bias is None or abs(bias) < 0.05:
            return "no lean"
        return "kinder than the reviewers" if bias > 0 else "harsher than the reviewers"


@dataclass
class TrustReport:
    judges: list[JudgeTrust]
    reviewed_responses: int
    overrides: int

    @property
    def empty(self) -> bool:
        return not self.judges


@dataclass(frozen=True, slots=True)
class ReviewedPoint:
    """A judged point a reviewer overrode (``override`` set) or confirmed."""

    run_id: int
    response_id: int
    position: int
    prompt_id: str
    variant_id: str
    text: str
    inverted: bool
    score: float | None  # the judges' consensus, after inversion
    verdicts: tuple[JudgeVerdict, ...]
    override: float | None = None
    confirmed: bool = False


def judge_trust(points: Iterable[ReviewedPoint]) -> TrustReport:
    by_model: dict[str, JudgeTrust] = {}
    responses: set[int] = set()
    overrides = 0
    for p in points:
        if p.override is None and not p.confirmed:
            continue  # not reviewed: says nothing either way
        human = p.override if p.override is not None else p.score
        if human is None:
            continue  # confirmed, but the judges gave no score: nothing to compare with
        responses.add(p.response_id)
        overrides += p.override is not None
        for verdict in p.verdicts:
            if not verdict.ok or verdict.role != "primary" or verdict.score is None:
                continue
            mine = 1 - verdict.score if p.inverted else verdict.score
            model = verdict.judge.model or verdict.judge.label or "?"
            trust = by_model.setdefault(model, JudgeTrust(model))
            trust.points += 1
            trust.runs.add(p.run_id)
            trust.overridden += p.override is not None
            trust.bias_sum += mine - human
            if abs(mine - human) <= TOLERANCE + 1e-9:
                trust.stands += 1
                continue
            trust.wrong_count += 1
            trust.wrong.append(WrongPoint(p.run_id, p.response_id, p.position, p.prompt_id, p.variant_id, p.text,
                                          round(mine, 2), round(human, 2)))
    for trust in by_model.values():
        trust.wrong.sort(key=lambda w: -abs(w.off_by))
        del trust.wrong[SHOWN_WRONG:]
    judges = sorted(by_model.values(), key=lambda t: (t.agreement if t.agreement is not None else 2, t.model))
    return TrustReport(judges=judges, reviewed_responses=len(responses), overrides=overrides)
