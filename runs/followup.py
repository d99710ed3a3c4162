"""The cheapest evidence to settle a "can't tell": a follow-up run of two model variants on the prompts where they
disagree most, sized, priced, started, and decided with an anytime-valid interval (runs/engine/sequential.py).

``suggest``: what would settle it and what it costs. The prompts and the number of answers come from the
original run's matrix (the cell scores of the two, prompt by prompt); the calls are the estimate's
(``runs.engine.estimate.estimate_run`` over just those prompts, each variant with its own temperature and
system, fresh: a follow-up never takes an answer from the response cache, or it would learn nothing new); the
dollars are *expected* (what these same cells cost in the original run, per answer, times the answers) and *at
most* (the estimate with every answer as long as its model's limit); the time is the original run's pace per
item.

``start``: a normal run (``start.start_run``) restricted to those prompts and the two variants, with the planned
trials and a budget; its options record ``followupOf`` (the original run) and the pair. A worker looks at its
results after each batch it stores and stops it once the confidence sequence decides; the verdict is from the
follow-up's own answers alone (runs/followup_look.py says how and why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from runs.engine import sequential, stats
from runs.engine.estimate import estimate_run

from . import start as run_start
from .compare import scores_by_variant, variant_pairs
from .followup_look import STOP_REASON, after_batch, is_followup, paired_differences, verdict  # noqa: F401
from .models import Response, ResponseStatus, Run
from .records import run_matrix
from .spec import RunRefused, parsed_blueprint



class FollowupRefused(RunRefused):
    """A follow-up that cannot be suggested or started (no such variant, nothing to settle)."""


@dataclass
class Suggestion:
    run: Run
    a: str
    b: str
    comparison: stats.Comparison  # the original run's verdict on the pair
    plan: sequential.Plan
    indices: list[int] = field(default_factory=list)  # the chosen prompts' positions
    calls: int = 0  # the estimate's calls (generation and judges), every answer asked
    cost_expected: float | None = None
    cost_most: float | None = None
    seconds: float | None = None

    @property
    def answers(self) -> int:
        return self.plan.answers

    @property
    def line(self) -> str:
        if not self.plan.prompts:
            return f"Nothing to follow up: {self.plan.problem}."
        head = (f"To settle it, ask {len(self.plan.prompts)} prompt{'s' if len(self.plan.prompts) != 1 else ''} "
                f"where the two disagree most again, {self.plan.trials} time{'s' if self.plan.trials != 1 else ''} "
                f"each ({self.answers} answers of each model): {self.calls:,} calls")
        if self.cost_expected is not None:
            head += f", ${self.cost_expected:.4g} expected"
        if self.cost_most is not None:
            head += f", at most ${self.cost_most:.4g}"
        if self.seconds is not None:
            head += f", about {_duration(self.seconds)}"
        head += "; it stops by itself once decided"
        return head + (f" ({self.plan.problem})" if self.plan.problem else "") + "."

    def to_dict(self) -> dict:
        return {"run": self.run.pk, "a": self.a, "b": self.b, **{"original": self.comparison.to_dict()},
                **self.plan.to_dict(), "calls": self.calls, "costExpectedUsd": self.cost_expected,
                "costMostUsd": self.cost_most, "seconds": self.seconds, "line": self.line,
                "method": sequential.METHOD}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} minutes"
    return f"{seconds / 3600:.1f} hours"


def _variants_of(run: Run, bp, wanted: list[str]) -> dict:
    """The run's ``ModelVariant`` behind each wanted variant id (by any prompt's id for it)."""
    found = {}
    for variant in run.variants(bp):
        for prompt in bp.prompts:
            vid = variant.id_for(prompt)
            if vid in wanted and vid not in found:
                found[vid] = variant
    return found


def suggest(run: Run, a: str, b: str) -> Suggestion:
    """What would settle ``a`` against ``b`` in ``run``, and what it costs; refused for an unknown variant."""
    bp = parsed_blueprint(run.revision)
    matrix = run_matrix(run, bp.prompts)
    for v in (a, b):
        if v not in matrix.variants:
            raise FollowupRefused(f"run {run.pk} has no model variant {v!r}",
                                  [f"its variants: {', '.join(matrix.variants) or 'none'}; pass one with --a/--b"])
    if a == b:
        raise FollowupRefused("a follow-up compares two different model variants; --a and --b are the same")
    scores = scores_by_variant(matrix)
    comparison = _shown(matrix, bp.prompts, a, b)
    diffs = {pid: scores[a][pid] - scores[b][pid] for pid in scores[a]
             if scores[a][pid] is not None and scores[b].get(pid) is not None}
    plan = sequential.plan(diffs, comparison.delta)
    position = {p.id: i for i, p in enumerate(bp.prompts)}
    found = Suggestion(run, a, b, comparison, plan, [position[pid] for pid in plan.prompts])
    if plan.prompts:
        _price(found, bp, matrix)
    return found


def _shown(matrix, prompts, a: str, b: str) -> stats.Comparison:
    """The pair's comparison as the compare page shows it (``compare.variant_pairs``), ``a`` minus ``b``."""
    for pair in variant_pairs(matrix, prompts):
        if (pair.a, pair.b) == (a, b):
            return pair.comparison
        if (pair.a, pair.b) == (b, a):  # the page puts the better mean first: the same figures the other way round
            c = pair.comparison
            flipped = {"better": "worse", "worse": "better"}.get(c.verdict, c.verdict)
            return stats.Comparison(None if c.delta is None else -c.delta, None if c.high is None else -c.high,
                                    None if c.low is None else -c.low, c.n, flipped, c.mean_b, c.mean_a)
    raise FollowupRefused(f"no comparison of {a!r} and {b!r}: pass two model variants of the run")


def _planned(run: Run, bp, variants: dict):
    models = list(dict.fromkeys(v.base_model_id for v in variants.values()))
    return run_start.plan_start(run.blueprint, revision=run.revision, models=models, parsed=bp,
                                judges=(run.options or {}).get("requestedJudges"),
                                keep_judges=(run.options or {}).get("keptJudges"))


def _price(found: Suggestion, bp, matrix) -> None:
    """Calls and the most it can cost (the estimate), what it is expected to cost (the original cells' own cost per
    answer), and the time (the original run's pace)."""
    variants = _variants_of(found.run, bp, [found.a, found.b])
    planned = _planned(found.run, bp, variants)
    chosen = [bp.prompts[i] for i in found.indices]
    calls, most, complete = 0, 0.0, True
    for variant in variants.values():
        narrowed = bp.model_copy(update={
            "prompts": chosen,
            "temperatures": [variant.temperature] if bp.temperatures else bp.temperatures,
            "systems": [variant.system_prompt] if bp.systems else bp.systems})
        models = [m for m in planned.models if (m if isinstance(m, str) else m.id) == variant.base_model_id]
        estimate = estimate_run(narrowed, models, planned.plan, trials=found.plan.trials, fresh=True,
                                embedding_model=planned.embedding_model)
        calls += estimate.total_calls
        if estimate.cost is None or not estimate.cost_complete:
            complete = False
        else:
            most += estimate.cost
    found.calls = calls
    found.cost_most = most if complete else None
    wanted = set(found.indices)
    spent: dict[tuple[int, str], list[float]] = {}
    for index, variant_id, cost, judge_usage in Response.objects.filter(
            run=found.run, prompt_index__in=wanted, variant_id__in=[found.a, found.b],
            status=ResponseStatus.DONE).values_list("prompt_index", "variant_id", "cost_usd", "judge_usage"):
        judge = (judge_usage or {}).get("costUsd")
        if cost is None or judge is None and (judge_usage or {}).get("calls"):
            spent.setdefault((index, variant_id), []).append(math.nan)
        else:
            spent.setdefault((index, variant_id), []).append(cost + (judge or 0.0))
    per_cell = [sum(v) / len(v) for v in spent.values() if v]
    if per_cell and all(math.isfinite(c) for c in per_cell) and len(per_cell) == 2 * len(found.indices):
        found.cost_expected = sum(per_cell) * found.plan.trials
    elapsed = found.run.elapsed_s()
    if elapsed and found.run.items_total:
        found.seconds = elapsed / found.run.items_total * 2 * found.answers


def start(run: Run, a: str, b: str, *, budget_usd: float | None = None, source: str = "cli",
          suggestion: Suggestion | None = None, enqueue: bool = True) -> tuple[Run, Suggestion]:
    """Start the follow-up (a normal run of the chosen prompts and the two variants); refused when there is
    nothing to follow up."""
    found = suggestion or suggest(run, a, b)
    if not found.plan.prompts:
        raise FollowupRefused(f"nothing to follow up: {found.plan.problem}")
    bp = parsed_blueprint(run.revision)
    variants = _variants_of(run, bp, [a, b])
    planned = _planned(run, bp, variants)
    follow = run_start.start_run(
        run.blueprint, revision=run.revision, fresh=True, trials=found.plan.trials, source=source,
        budget_usd=budget_usd, planned=planned, only_prompts=found.indices, only_variants=[a, b], enqueue=enqueue,
        judges=(run.options or {}).get("requestedJudges"), keep_judges=(run.options or {}).get("keptJudges"),
        extra_options={"followupOf": run.pk, "followupPair": {"a": a, "b": b},
                       "followupPlan": {"prompts": found.plan.prompts, "trials": found.plan.trials,
                                        "answers": found.answers, "calls": found.calls,
                                        "costExpectedUsd": found.cost_expected, "costMostUsd": found.cost_most}})
    return follow, found


def followups_of(run: Run):
    """The follow-up runs started from ``run``, newest first."""
    return Run.objects.filter(options__followupOf=run.pk).order_by("-created_at", "-id")
