"""Try a response: every point of one prompt scored against pasted text, without a run."""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.preview import PointGroup, PointView, point_groups
from blueprints.spec import Blueprint as SpecBlueprint
from blueprints.spec import Prompt
from evalsite.engine import engine_config

# --------------------------------------------------------------------------------------
# Try a response: every deterministic point of one prompt against pasted text


@dataclass
class PointTrial:
    view: PointView
    score: float | None = None  # as the function gave it
    explain: str | None = None
    error: str | None = None
    judged: bool = False

    @property
    def inverted(self) -> bool:
        return self.view.point.inverted

    @property
    def effective(self) -> float | None:
        """The score the point contributes: a `should_not` point counts 1 - score."""
        if self.score is None:
            return None
        return 1 - self.score if self.inverted else self.score

    @property
    def verdict(self) -> str:
        if self.judged:
            return "judged"
        if self.error or self.effective is None:
            return "not-evaluated"
        if self.effective >= 1:
            return "pass"
        if self.effective <= 0:
            return "fail"
        return "partial"


@dataclass
class TrialGroup:
    group: PointGroup
    trials: list[PointTrial]

    @property
    def mean(self) -> float | None:
        scores = [t.effective for t in self.trials if not t.judged and t.effective is not None]
        return sum(scores) / len(scores) if scores else None


def point_evaluator():
    """`runs.engine.points.evaluate_point`, or None while the engine does not have it."""
    try:
        from runs.engine.points import evaluate_point
    except ImportError:
        return None
    return evaluate_point


def try_response(bp: SpecBlueprint, prompt: Prompt, response: str, evaluate=None) -> list[TrialGroup]:
    evaluate = evaluate or point_evaluator()
    messages = [{"role": m.role, "content": m.content} for m in prompt.messages if m.content is not None]
    messages.append({"role": "assistant", "content": response})
    groups = []
    for group in point_groups(prompt):
        trials = []
        for view in group.points:
            point = view.point
            if point.kind == "judged":
                trials.append(PointTrial(view, judged=True))
                continue
            if evaluate is None:
                trials.append(PointTrial(view, error="point functions are not available in this version"))
                continue
            outcome = evaluate(point.fn, point.fn_args if point.has_args else None, response, messages=messages,
                               prompt_id=prompt.id, external_services=bp.external_services, config=engine_config())
            trials.append(PointTrial(view, score=outcome.score, explain=outcome.explain, error=outcome.error))
        groups.append(TrialGroup(group, trials))
    return groups
