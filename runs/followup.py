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

**A model across two runs** (``suggest_across``, ``start_across``): a "can't tell" on the compare page between a
run and its base is one model variant under two runs' conditions (the blueprint revision each ran, with its
system prompt and settings, and the judges each asked; prompts whose content changed are left out, as the
compare page leaves them out). The follow-up asks the variant again under both: two runs, one of the run's
revision and judges and one of the base's, each of just the prompts where the two runs disagree most, the same
trials; each names the other (``followupPartner``), and the paired differences pair their answers by prompt id
and trial. The ``--budget`` is split evenly between them. When the two runs asked the variant with the same
revision and the same judges, only *when* they ran differs, which no new run can repeat: refused, saying so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from runs.engine import sequential, stats
from runs.engine.estimate import estimate_run

from . import start as run_start
from .compare import CannotCompare, compare_with_base, scores_by_variant, variant_pairs
from .followup_look import STOP_REASON, after_batch, is_followup, paired_differences, verdict  # noqa: F401
from .models import Response, ResponseStatus, Run
from .records import cell_figures_for, run_matrix
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
    base: Run | None = None  # across two runs: ``a`` is the variant in ``run``, ``b`` the same variant in ``base``
    base_indices: list[int] = field(default_factory=list)  # the chosen prompts' positions in the base's revision

    @property
    def answers(self) -> int:
        return self.plan.answers

    @property
    def line(self) -> str:
        if not self.plan.prompts:
            return f"Nothing to follow up: {self.plan.problem}."
        many = len(self.plan.prompts) != 1
        if self.base is not None:
            head = (f"To settle it, ask {self.a} {len(self.plan.prompts)} prompt{'s' if many else ''} where run "
                    f"{self.run.pk} and run {self.base.pk} disagree most again, {self.plan.trials} "
                    f"time{'s' if self.plan.trials != 1 else ''} each under each run's blueprint revision and judges "
                    f"({self.answers} answers under each): {self.calls:,} calls")
        else:
            head = (f"To settle it, ask {len(self.plan.prompts)} prompt{'s' if many else ''} "
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
        return {"run": self.run.pk, "base": self.base.pk if self.base is not None else None, "a": self.a, "b": self.b,
                **{"original": self.comparison.to_dict()},
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


def _price(found: Suggestion, bp, matrix, *, variants_wanted: list[str] | None = None,
           cells_per_prompt: int = 2) -> None:
    """Calls and the most it can cost (the estimate), what it is expected to cost (the original cells' own cost per
    answer), and the time (the original run's pace). ``variants_wanted``: the variants asked (the pair's two by
    default; one for a side of a follow-up across runs, ``cells_per_prompt`` 1)."""
    wanted_variants = variants_wanted or [found.a, found.b]
    variants = _variants_of(found.run, bp, wanted_variants)
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
            run=found.run, prompt_index__in=wanted, variant_id__in=wanted_variants,
            status=ResponseStatus.DONE).values_list("prompt_index", "variant_id", "cost_usd", "judge_usage"):
        judge = (judge_usage or {}).get("costUsd")
        if cost is None or judge is None and (judge_usage or {}).get("calls"):
            spent.setdefault((index, variant_id), []).append(math.nan)
        else:
            spent.setdefault((index, variant_id), []).append(cost + (judge or 0.0))
    per_cell = [sum(v) / len(v) for v in spent.values() if v]
    if per_cell and all(math.isfinite(c) for c in per_cell) and \
            len(per_cell) == cells_per_prompt * len(found.indices):
        found.cost_expected = sum(per_cell) * found.plan.trials
    elapsed = found.run.elapsed_s()
    if elapsed and found.run.items_total:
        found.seconds = elapsed / found.run.items_total * cells_per_prompt * found.answers


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


def _judging(run: Run) -> tuple:
    options = run.options or {}
    return (options.get("requestedJudges"), options.get("keptJudges"), options.get("addedJudges"),
            options.get("backupJudge"))


def suggest_across(run: Run, base: Run, variant: str, *, result=None) -> Suggestion:
    """What would settle ``variant`` in ``run`` against the same variant in ``base`` (the compare page's pair),
    and what it costs (both sides); refused for runs of two blueprints, a variant not in both, or two runs that
    differ only in when they ran."""
    if base.pk == run.pk:
        raise FollowupRefused("a follow-up across two runs needs two different runs; --baseline is RUN itself",
                              [f"pass --a and --b for two variants of run {run.pk}"])
    if base.blueprint_id != run.blueprint_id:
        raise FollowupRefused(f"run {base.pk} is of another blueprint than run {run.pk}",
                              ["compare and follow up runs of the same blueprint"])
    if base.revision_id == run.revision_id and _judging(base) == _judging(run):
        raise FollowupRefused(
            f"runs {run.pk} and {base.pk} asked {variant!r} with the same blueprint revision and the same judges: "
            "only when they ran differs, and a new run cannot ask at that time again",
            ["a follow-up across runs settles a change of revision (system prompt, settings) or of judges"])
    try:
        result = result or compare_with_base(run, base)  # ``result``: the compare page's, when it has it
    except CannotCompare as exc:
        raise FollowupRefused(str(exc)) from exc
    pair = next((p for p in result.pairs if p.a == variant), None)
    if pair is None:
        both = [p.a for p in result.pairs]
        raise FollowupRefused(f"model variant {variant!r} is not in both run {run.pk} and run {base.pk}",
                              [f"variants in both: {', '.join(both) or 'none'}; pass one with --model"])
    bp, base_bp = parsed_blueprint(run.revision), parsed_blueprint(base.revision)
    after, before = _variant_scores(run, bp.prompts, variant), _variant_scores(base, base_bp.prompts, variant)
    skip = set(result.changed_prompts)
    diffs = {pid: after[pid] - before[pid] for pid in after
             if pid not in skip and after[pid] is not None and before.get(pid) is not None}
    plan = sequential.plan(diffs, pair.comparison.delta)
    position = {p.id: i for i, p in enumerate(bp.prompts)}
    base_position = {p.id: i for i, p in enumerate(base_bp.prompts)}
    found = Suggestion(run, variant, variant, pair.comparison, plan, [position[pid] for pid in plan.prompts],
                       base=base, base_indices=[base_position[pid] for pid in plan.prompts])
    if plan.prompts:
        _price_sides(found, [(run, bp, found.indices), (base, base_bp, found.base_indices)])
    return found


def _variant_scores(run: Run, prompts, variant: str) -> dict[str, float | None]:
    """``{prompt id: cell score}`` of ``variant`` in ``run`` (``compare.scores_by_variant``'s), read off the run's
    stored cell figures when it has them (``records.cell_figures_for``): building both runs' whole matrices took
    seconds of compare's first view on runs of 100,000 responses."""
    return {prompt_id: score for _, prompt_id, variant_id, score, _, _ in cell_figures_for(run, prompts).cells
            if variant_id == variant}


def _price_sides(found: Suggestion, sides) -> None:
    """``_price`` for a variant across runs: each side's estimate (its revision, its judges), expected cost and
    pace, added up (a figure unknown on either side is unknown)."""
    parts = []
    for run, bp, indices in sides:
        part = Suggestion(run, found.a, found.b, found.comparison, found.plan, list(indices))
        _price(part, bp, None, variants_wanted=[found.a], cells_per_prompt=1)
        parts.append(part)
    found.calls = sum(part.calls for part in parts)
    found.cost_most = _total([part.cost_most for part in parts])
    found.cost_expected = _total([part.cost_expected for part in parts])
    found.seconds = _total([part.seconds for part in parts])


def _total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)


def start_across(run: Run, base: Run, variant: str, *, budget_usd: float | None = None, source: str = "cli",
                 suggestion: Suggestion | None = None, enqueue: bool = True) -> tuple[Run, Run, Suggestion]:
    """Start the follow-up of ``variant`` across ``run`` and ``base``: two runs (one under each's revision and
    judges) that name each other; the budget is split evenly. Returns (the run's side, the base's side, the
    suggestion)."""
    from django.db import transaction

    from .work import enqueue_pending

    found = suggestion or suggest_across(run, base, variant)
    if not found.plan.prompts:
        raise FollowupRefused(f"nothing to follow up: {found.plan.problem}")
    half = None if budget_usd is None else budget_usd / 2
    plan = {"prompts": found.plan.prompts, "trials": found.plan.trials, "answers": found.answers,
            "calls": found.calls, "costExpectedUsd": found.cost_expected, "costMostUsd": found.cost_most}
    made = []
    with transaction.atomic():
        for side, (origin, indices) in (("a", (run, found.indices)), ("b", (base, found.base_indices))):
            bp = parsed_blueprint(origin.revision)
            variants = _variants_of(origin, bp, [variant])
            made.append(run_start.start_run(
                origin.blueprint, revision=origin.revision, fresh=True, trials=found.plan.trials, source=source,
                budget_usd=half, planned=_planned(origin, bp, variants), only_prompts=indices,
                only_variants=[variant], enqueue=False, judges=(origin.options or {}).get("requestedJudges"),
                keep_judges=(origin.options or {}).get("keptJudges"),
                extra_options={"followupOf": origin.pk, "followupPair": {"a": variant, "b": variant,
                                                                         "aRun": run.pk, "bRun": base.pk},
                               "followupSide": side, "followupPlan": plan}))
        mine, theirs = made
        for one, other in ((mine, theirs), (theirs, mine)):
            one.options = {**one.options, "followupPartner": other.pk}
            Run.objects.filter(pk=one.pk).update(options=one.options)
        if enqueue:
            for one in made:
                transaction.on_commit(lambda pk=one.pk: enqueue_pending(pk))
    return mine, theirs, found


def followups_of(run: Run):
    """The follow-up runs started from ``run`` (and, across two runs, the side asked under its conditions),
    newest first."""
    return Run.objects.filter(options__followupOf=run.pk).order_by("-created_at", "-id")


def links(blueprint_id: int) -> tuple[dict[int, int], dict[int, list[int]]]:
    """A blueprint's follow-up links in one query: each follow-up run's original (``{follow-up: original}``) and
    each original's follow-ups, oldest first (``{original: [follow-ups]}``). The history page's badges."""
    of: dict[int, int] = {}
    listed: dict[int, list[int]] = {}
    rows = (Run.objects.filter(blueprint_id=blueprint_id, options__has_key="followupOf").order_by("created_at", "id")
            .values_list("pk", "options"))
    for pk, options in rows:
        origin = (options or {}).get("followupOf")
        if isinstance(origin, int):
            of[pk] = origin
            listed.setdefault(origin, []).append(pk)
    return of, listed
