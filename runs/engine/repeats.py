"""How often a judge changes its mind about the same answer: the flip rate of a run's judge repeats (pure).

A run with judge repeats K > 1 asks each judge K times about each judged point of each response, with the
same request (runs/engine/judge.py ``judge_point``). The first asking scores; the others are kept as
verdicts with role ``repeat``. From those stored verdicts, per judge and point:

- its *askings* are the first verdict and the re-askings, in order; it *counts* when at least two of them
  answered (a failed asking says nothing either way);
- it *flipped* when the askings that answered gave different labels: different classes of the scale, so
  two spellings of one class (the 9-point scale also reads the 5-point names) are one label;
- its *spread* is the highest score the askings gave minus the lowest (0 when it did not flip).

A point's flip rate is the share of its counted judges that flipped; a point *flipped* when any of them
did. A judge's and a run's flip rate is the share of (point, judge) pairs that flipped, with the pairs
counted (n). The backup judge is never asked again and plays no part. This module is the one place the
rule lives: the run page, the response page, the judges page and the API all read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .judge import JudgeVerdict

Verdict = JudgeVerdict | dict  # a verdict, or one as stored (``JudgeVerdict.to_dict``)


@dataclass(frozen=True, slots=True)
class Asking:
    """One asking of one judge about one point."""

    repeat: int  # 0: the first asking, the one that scores
    label: str | None
    score: float | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.score is not None


@dataclass(frozen=True, slots=True)
class JudgeAskings:
    """Every asking of one judge about one point, in repeat order."""

    judge_id: str
    model: str
    askings: tuple[Asking, ...]

    @property
    def answered(self) -> tuple[Asking, ...]:
        return tuple(a for a in self.askings if a.ok)

    @property
    def counted(self) -> bool:
        return len(self.answered) >= 2

    @property
    def flipped(self) -> bool:
        return self.counted and len({a.score for a in self.answered}) > 1

    @property
    def spread(self) -> float | None:
        """Highest minus lowest score over the askings that answered; None when fewer than two did."""
        if not self.counted:
            return None
        scores = [a.score for a in self.answered]
        return max(scores) - min(scores)


def _fields(v: Verdict) -> tuple[str, str, str, int, str | None, float | None, str | None]:
    """(role, judge id, model, repeat, label, score, error) of a verdict or a stored one."""
    if isinstance(v, JudgeVerdict):
        return v.role, v.judge_id, v.judge.model, v.repeat, v.label, v.score, v.error
    return (v.get("role") or "primary", v.get("judgeId") or "", v.get("model") or "", v.get("repeat") or 0,
            v.get("label"), v.get("score"), v.get("error"))


def judge_askings(verdicts: Iterable[Verdict]) -> list[JudgeAskings]:
    """The judges of one point that were asked more than once, in the order they were first asked."""
    by_judge: dict[str, tuple[str, list[Asking]]] = {}
    for verdict in verdicts or ():
        role, judge_id, model, repeat, label, score, error = _fields(verdict)
        if role not in ("primary", "repeat"):
            continue  # the backup is asked once, and only when every judge failed
        by_judge.setdefault(judge_id, (model, []))[1].append(
            Asking(repeat=repeat if role == "repeat" else 0, label=label, score=score, error=error))
    return [JudgeAskings(judge_id, model, tuple(sorted(askings, key=lambda a: a.repeat)))
            for judge_id, (model, askings) in by_judge.items() if len(askings) > 1]


@dataclass(frozen=True, slots=True)
class PointFlips:
    """One point's re-asked judges and how many of them changed their mind."""

    judges: tuple[JudgeAskings, ...] = ()

    @property
    def pairs(self) -> int:
        """Judges whose askings answered at least twice: the ones that could flip."""
        return sum(1 for j in self.judges if j.counted)

    @property
    def flips(self) -> int:
        return sum(1 for j in self.judges if j.flipped)

    @property
    def flipped(self) -> bool:
        return self.flips > 0

    @property
    def rate(self) -> float | None:
        return self.flips / self.pairs if self.pairs else None


def point_flips(verdicts: Iterable[Verdict]) -> PointFlips:
    return PointFlips(tuple(judge_askings(verdicts)))


@dataclass
class FlipCount:
    """How many of ``n`` things flipped, and how far the scores spread where they were asked again."""

    flipped: int = 0
    n: int = 0
    spread_sum: float = 0.0
    spread_max: float = 0.0

    @property
    def rate(self) -> float | None:
        return self.flipped / self.n if self.n else None

    @property
    def mean_spread(self) -> float | None:
        return self.spread_sum / self.n if self.n else None

    def add(self, flipped: bool, spread: float) -> None:
        self.n += 1
        self.flipped += flipped
        self.spread_sum += spread
        self.spread_max = max(self.spread_max, spread)

    def to_json(self) -> dict:
        return {"flipped": self.flipped, "n": self.n, "rate": _r(self.rate), "meanSpread": _r(self.mean_spread),
                "maxSpread": _r(self.spread_max) if self.n else None}


@dataclass
class JudgeFlips:
    """One judge's (point, judge) pairs over a run or more."""

    judge_id: str
    model: str
    count: FlipCount = field(default_factory=FlipCount)


@dataclass
class FlipReport:
    """A run's flip rate: over (point, judge) pairs, over points, and per judge."""

    repeats: int
    pairs: FlipCount = field(default_factory=FlipCount)  # (point, judge) pairs: the run's flip rate
    points: FlipCount = field(default_factory=FlipCount)  # points with a counted pair; flipped if any judge did
    judges: list[JudgeFlips] = field(default_factory=list)  # in the order first met
    asked_points: int = 0  # judged points whose judges were asked again, counted or not

    @property
    def empty(self) -> bool:
        return not self.pairs.n

    def to_json(self) -> dict:
        return {"repeats": self.repeats, "pairs": self.pairs.to_json(), "points": self.points.to_json(),
                "askedPoints": self.asked_points,
                "judges": [{"judgeId": j.judge_id, "model": j.model, **j.count.to_json()} for j in self.judges]}


def flip_report(verdict_lists: Iterable[Iterable[Verdict]], repeats: int) -> FlipReport:
    """The flip rate over the verdict lists of many judged points (``PointAssessment.verdicts``)."""
    report = FlipReport(repeats=repeats)
    judges: dict[str, JudgeFlips] = {}
    for verdicts in verdict_lists:
        point = point_flips(verdicts)
        if not point.judges:
            continue
        report.asked_points += 1
        spreads = []
        for askings in point.judges:
            if not askings.counted:
                continue
            spread = askings.spread or 0.0
            spreads.append(spread)
            report.pairs.add(askings.flipped, spread)
            judge = judges.get(askings.judge_id)
            if judge is None:
                judge = judges[askings.judge_id] = JudgeFlips(askings.judge_id, askings.model)
            judge.count.add(askings.flipped, spread)
        if spreads:
            report.points.add(point.flipped, max(spreads))
    report.judges = list(judges.values())
    return report


def _r(value: Any) -> Any:
    return None if value is None else round(value, 4)


__all__ = ["Asking", "FlipCount", "FlipReport", "JudgeAskings", "JudgeFlips", "PointFlips", "flip_report",
           "judge_askings", "point_flips"]
