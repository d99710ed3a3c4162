"""How far to trust each judge, learned from reviewers' overrides.

A response a reviewer has worked on (an override on any of its points, or an annotation) is *reviewed*:
on it, every judged point tells us what the reviewer holds true, the override where there is one, the
score the judges gave where the reviewer let it stand. Against that, each judge model's own verdict
(on the point's score scale, so a should-not point is compared after inversion) either *stands*
(within ``TOLERANCE`` of the reviewer's score: one step of the five-step scale) or does not. Per judge
model: the share that stands, the mean bias (positive: kinder than the reviewer), and the points it
got wrong, worst first. Unreviewed responses are left out: silence there is not agreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q, QuerySet

from .models import PointAssessment

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


def judge_trust(responses: QuerySet) -> TrustReport:
    """The trust report over ``responses`` (a Response queryset: one run's, a blueprint's, every run's)."""
    reviewed = responses.filter(Q(assessments__override__isnull=False) | Q(annotation__isnull=False)).values("pk")
    rows = (PointAssessment.objects.filter(response__in=reviewed, kind="judged")
            .values_list("response_id", "response__run_id", "response__prompt_id", "response__variant_id",
                         "position", "key_point_text", "text", "inverted", "score", "verdicts", "override__score"))
    by_model: dict[str, JudgeTrust] = {}
    seen_responses: set[int] = set()
    overrides = 0
    for response_id, run_id, prompt_id, variant_id, position, key_text, text, inverted, score, verdicts, \
            override in rows.iterator(chunk_size=2000):
        human = override if override is not None else score
        if human is None:
            continue  # not evaluated and not overridden: nothing to compare with
        seen_responses.add(response_id)
        overrides += override is not None
        for verdict in verdicts or ():
            raw = verdict.get("score")
            if verdict.get("error") or raw is None or (verdict.get("role") or "primary") != "primary":
                continue
            mine = 1 - raw if inverted else raw
            trust = by_model.setdefault(verdict.get("model") or verdict.get("judgeId") or "?",
                                        JudgeTrust(verdict.get("model") or "?"))
            trust.points += 1
            trust.runs.add(run_id)
            trust.overridden += override is not None
            trust.bias_sum += mine - human
            if abs(mine - human) <= TOLERANCE + 1e-9:
                trust.stands += 1
                continue
            trust.wrong_count += 1
            trust.wrong.append(WrongPoint(run_id, response_id, position, prompt_id, variant_id,
                                          key_text or text, round(mine, 2), round(human, 2)))
    for trust in by_model.values():
        trust.wrong.sort(key=lambda w: -abs(w.off_by))
        del trust.wrong[SHOWN_WRONG:]
    judges = sorted(by_model.values(), key=lambda t: (t.agreement if t.agreement is not None else 2, t.model))
    return TrustReport(judges=judges, reviewed_responses=len(seen_responses), overrides=overrides)

