"""Try a response: one prompt's points scored against pasted text, the way a run scores them.

The pasted text is assessed by the engine's ``assess_response``, the function a run calls:
function points by their functions, judged points by the judges a run of this blueprint
would use (the same plan), and the score by the same weighted arithmetic. Judges are asked
only when the person asks for them and at least one judge has its API key; otherwise the
judged points are listed as skipped, with the reason. A judge that fails is shown failed,
never as a pass or a fail. Everything is bounded by the item budget a run has.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from blueprints.preview import PointGroup, PointView, point_groups, run_judges
from blueprints.spec import Blueprint as SpecBlueprint
from blueprints.spec import Prompt
from evalsite.engine import engine_config
from runs.engine.assess import PointAssessment, ResponseAssessment, assess_response
from runs.engine.judge import JudgePlan, JudgeVerdict
from runs.engine.providers import Router, check_models, fixtures_from_blueprint
from runs.engine.types import GeneratedResponse, Turn

TRY_VARIANT = "pasted"  # the model variant a tried response stands for


@dataclass
class PointTrial:
    view: PointView
    assessed: PointAssessment | None = None
    skipped: str | None = None  # why a judged point was not scored

    @property
    def inverted(self) -> bool:
        return self.view.point.inverted

    @property
    def score(self) -> float | None:
        """As the function or the judges gave it, before a `should_not` inversion."""
        return self.assessed.raw_score if self.assessed is not None else None

    @property
    def effective(self) -> float | None:
        """The score the point contributes: a `should_not` point counts 1 - score."""
        return self.assessed.score if self.assessed is not None else None

    @property
    def explain(self) -> str | None:
        return self.assessed.reflection if self.assessed is not None else None

    @property
    def error(self) -> str | None:
        """Why the point has no score. A skipped judged point was not asked: it says why, never the engine's
        'no judges are configured' (the blueprint may name several)."""
        if self.skipped:
            return f"Not scored: {self.skipped}."
        return self.assessed.error if self.assessed is not None else None

    @property
    def verdicts(self) -> tuple[JudgeVerdict, ...]:
        return self.assessed.verdicts if self.assessed is not None else ()

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
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
    score: float | None = None  # the group's weighted mean, as the run's calculation has it


@dataclass
class TryOutcome:
    groups: list[TrialGroup]
    assessment: ResponseAssessment
    judges: list[str] = field(default_factory=list)  # the judges asked
    skipped: str | None = None  # why judged points were not scored

    @property
    def score(self) -> float | None:
        return self.assessment.score


def judges_for_try(bp: SpecBlueprint) -> tuple[JudgePlan, list[str]]:
    """The plan a run would use, and what keeps its judges from answering (a missing key, say)."""
    plan = run_judges(bp)
    config = engine_config()
    problems = [p.message for p in check_models([j.model for j in plan.judges], config.providers,
                                                custom_models=bp.custom_models)]
    return plan, problems


def try_response(bp: SpecBlueprint, prompt: Prompt, response: str, *, with_judges: bool = False,
                 files: dict | None = None) -> TryOutcome:
    """Score ``response`` as the answer to ``prompt``; judged points too when ``with_judges``."""
    config = engine_config()
    judged = any(p.kind == "judged" for p in prompt.all_points())
    plan, problems = judges_for_try(bp)
    skipped = None
    if judged and not with_judges:
        skipped = "not asked: tick \"Ask the judges\" to have them score the judged points (they make model calls)"
    elif judged and not plan.judges:
        skipped = plan.unavailable_reason
    elif judged and len(problems) == len(plan.judges):
        skipped = "no judge can be asked: " + "; ".join(problems)
    if skipped:
        plan = JudgePlan(judges=(), scale=plan.scale, configured=True, description=plan.description)
    generated = pasted_response(bp, prompt, response)
    assessment = asyncio.run(_assess(bp, prompt, generated, plan, files or {}, config))
    by_point = dict(zip((id(p) for p in prompt.all_points()), assessment.point_assessments))
    calculation = assessment.calculation
    groups_by_path = {g.path_id: g for g in ((calculation.required,) + calculation.paths + calculation.not_paths
                                             if calculation else ()) if g is not None}
    groups = []
    for group in point_groups(prompt):
        trials = [PointTrial(view, by_point.get(id(view.point)),
                             skipped if skipped and view.point.kind == "judged" else None) for view in group.points]
        calculated = groups_by_path.get(group.points[0].point.path_id) if group.points else None
        # The engine's mean of the group this one belongs to; a group none of whose own points was scored
        # (all skipped or not evaluated) has no mean, whatever its neighbours in the engine's group scored.
        mean = calculated.mean if calculated is not None and any(t.effective is not None for t in trials) else None
        groups.append(TrialGroup(group, trials, mean))
    return TryOutcome(groups, assessment, [j.judge_id for j in plan.judges], skipped)


def pasted_response(bp: SpecBlueprint, prompt: Prompt, text: str) -> GeneratedResponse:
    """The pasted text as the engine's generation: the authored turns, then the text as the answer."""
    system = prompt.system if prompt.system_set else bp.system
    turns = [Turn("system", system)] if system else []
    turns += [Turn(m.role, m.content) for m in prompt.messages if not m.to_generate and m.content is not None]
    turns.append(Turn("assistant", text, generated=True))
    return GeneratedResponse(prompt_id=prompt.id, model_variant_id=TRY_VARIANT, conversation=tuple(turns),
                             text=text, final_text=text, system_prompt=system)


async def _assess(bp, prompt, generated, plan: JudgePlan, files, config) -> ResponseAssessment:
    fixtures, _ = fixtures_from_blueprint(bp.fixtures, files)
    async with Router(config.providers, custom_models=bp.custom_models, fixtures=fixtures,
                      blueprint_concurrency=bp.concurrency) as router:
        async with asyncio.timeout(config.limits.item_budget_s):
            return await assess_response(prompt, generated, judges=plan, complete=router.complete,
                                         external_services=bp.external_services, files=files, config=config)
