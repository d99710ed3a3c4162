# Over 500 lines: the one door to a run (prepare, plan, refuse, make items), so every door starts a run alike.
"""Starting a run: refusal, model resolution, the judge plan, and its items (the first phase of a run's life).

Views, commands and the API call ``start_run``; the run is then the workers' (runs/work.py), and what
they produce is stored and finished by runs/records.py.
"""

from __future__ import annotations

import hashlib
from itertools import islice
from dataclasses import dataclass, field, replace
from typing import Sequence

from django.conf import settings
from django.db import IntegrityError, transaction

from blueprints.models import Blueprint, BlueprintRevision
from blueprints.spec.collections import resolve_models
from blueprints.spec.schema import Blueprint as SpecBlueprint
from blueprints.spec.schema import CustomModel
from runs.engine.estimate import CacheProbe, RunEstimate, estimate_run  # noqa: F401 (the bench uses estimate_run)
from blueprints.spec.model_ids import provider_of
from runs.engine.generate import expand_variants
from runs.engine.judge import MAX_JUDGE_REPEATS, JudgePlan, judges_from_models, plan_for_run
from runs.engine.providers import SqliteCache, check_models
from runs.engine.providers import fixtures_from_blueprint

from evalsite.engine import engine_config

from .bulk import insert
from .cache import response_cache
from .models import Response, Run, RunStatus

from .records import finish_run, plan_to_json
from .request import RunRequest
from .spec import RunRefused, custom_models, parsed_blueprint, remember
from .work import enqueue_making, enqueue_pending, settle


def resolve_run_models(bp: SpecBlueprint, requested: list[str] | None, collections) -> list[str | CustomModel]:
    """The models a run uses: ``requested`` (ids, custom model ids, collections) or the blueprint's."""
    customs = custom_models(bp)
    if requested:
        wanted = [customs.get(m, m) for m in requested]
    else:
        wanted = list(bp.models) if bp.models_given else ["CORE"]
    models, missing = resolve_models(wanted, collections)
    if missing:
        raise RunRefused(
            f"unknown model collection{'s' if len(missing) > 1 else ''}: {', '.join(missing)}",
            [f"'{name}' is neither a stored collection nor a models/{name}.json beside the blueprint; import it "
             f"(.venv/bin/python manage.py import_blueprints DIR reads DIR/models/*.json) or list models explicitly"
             for name in missing],
        )
    if not models:
        raise RunRefused("No models to evaluate after resolving collections.")
    return models


def judge_plan_for(bp: SpecBlueprint, requested: list[str] | None = None, keep: list[str] | None = None,
                   add: Sequence[str] = (), backup: str | None = None) -> JudgePlan:
    """The run's judges (``runs.engine.judge.plan_for_run``) with the site's default and backup judges.

    ``add``: ``provider:model`` judges after the others (the run form's "Add judges"; one already in the
    plan is not asked twice); ``backup``: the judge asked when every judge failed on a point (None: the
    site's, when the blueprint names no judges; "": none)."""
    config = engine_config()
    try:
        plan = plan_for_run(bp.coverage, default_judges=config.default_judges, backup_judge=config.backup_judge,
                            description=bp.description, replace_with=requested, keep=keep)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    if add:
        have = {j.judge_id for j in plan.judges}
        plan = replace(plan, judges=(*plan.judges, *(j for j in judges_from_models(add) if j.judge_id not in have)))
    if backup is not None:
        plan = replace(plan, backup=next(iter(judges_from_models([backup], prefix="backup")), None) if backup
                       else None)
    return plan


def run_label(revision: BlueprintRevision) -> str:
    """Deviation 12: the label hashes the whole revision text (and its companion files)."""
    digest = hashlib.sha256(revision.text.encode("utf-8"))
    for name in sorted(revision.files or {}):
        digest.update(f"\0{name}\0{revision.files[name]}".encode("utf-8"))
    return digest.hexdigest()[:16]


@dataclass
class StartPlan:
    """What a run of these choices would be, worked out without starting it (``start_run`` and the estimate)."""

    revision: BlueprintRevision
    blueprint: SpecBlueprint
    models: list
    plan: JudgePlan
    embedding_model: str | None
    problems: list[str]
    # The same problems as values: (role, engine Problem), role candidate | judge | embedding (key warnings).
    provider_problems: list = field(default_factory=list)


def check_judge_repeats(value) -> int:
    """Judge repeats as sent: how many times each judge is asked about each point, a whole number from 1 to
    ``MAX_JUDGE_REPEATS`` (text is read as a number)."""
    problem = f"judge repeats is a whole number from 1 to {MAX_JUDGE_REPEATS}"
    if isinstance(value, bool):
        raise ValueError(problem)
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 3:
        value = int(value)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_JUDGE_REPEATS:
        shown = repr(value)
        raise ValueError(f"{problem}, not {shown if len(shown) <= 40 else shown[:37] + '...'}")
    return value


def plan_start(blueprint: Blueprint, *, revision: BlueprintRevision | None = None, models: list[str] | None = None,
               judges: list[str] | None = None, keep_judges: list[str] | None = None, collections=None,
               judge_repeats: int | None = None, parsed: SpecBlueprint | None = None,
               add_judges: Sequence[str] = (), backup_judge: str | None = None) -> StartPlan:
    """The revision, models, judges and problems of a run, as ``start_run`` would make it; raises RunRefused.

    ``judge_repeats`` (None: 1) goes into the judge plan, so the estimate counts what the run will ask.
    ``parsed``: the revision's blueprint when the caller parsed it already (the blueprint page), else it is
    parsed here."""
    try:
        repeats = 1 if judge_repeats is None else check_judge_repeats(judge_repeats)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    revision = revision or blueprint.current_revision
    if revision is None:
        raise RunRefused("the blueprint has no saved text yet")
    lookup = revision.collections(collections)  # the collections its file came with, then the stored ones
    bp = parsed
    if bp is None:
        result = revision.parse(collections=lookup)
        if result.blueprint is None:
            raise RunRefused(f"'{blueprint.slug}' has errors; fix them before running",
                             [e.format(blueprint.slug) for e in result.errors])
        bp = result.blueprint
    remember(revision, bp)  # the workers read it from here (in this process) rather than parse it again
    resolved = resolve_run_models(bp, models, lookup)
    plan = replace(judge_plan_for(bp, judges, keep_judges, add_judges, backup_judge), repeats=repeats)
    judged = any(p.fn is None for prompt in bp.prompts for p in prompt.all_points())
    if judged and not plan.judges:
        raise RunRefused("no judge would score the judged points: tick at least one judge")
    fixtures, fixture_problems = fixtures_from_blueprint(bp.fixtures, revision.files)
    # Similarity to ideals: the blueprint's embeddingModel wins over the site's; none means no similarity.
    embedding_model = (bp.embedding_model or settings.EVALSITE_EMBEDDINGS_MODEL or None) \
        if any(p.ideal_response for p in bp.prompts) else None
    providers, customs = engine_config().providers, custom_models(bp)
    found = [("candidate", p) for p in check_models(resolved, providers, custom_models=customs, fixtures=fixtures)]
    if judged:
        found += [("judge", p) for p in check_models([j.model for j in plan.judges], providers, custom_models=customs)]
    if embedding_model:
        found += [("embedding", p) for p in check_models([embedding_model], providers, custom_models=customs)]
    # Simulated users' models (docs/blueprints.md "Simulated users"): a missing key is said before the run starts.
    user_models = sorted({p.simulated_user.model for p in bp.prompts if p.simulated_user is not None})
    if user_models:
        found += [("user", p) for p in check_models(user_models, providers, custom_models=customs, fixtures=fixtures)]
    # Worded as runs.engine.providers.run_problems words them: a started run keeps the same sentences.
    words = {"judge": "judge", "embedding": "embeddings", "user": "simulated user"}
    problems = [p.message if role == "candidate" else f"{words[role]} {p.message}" for role, p in found]
    problems += fixture_problems
    # Checked before expanding: a collection may have grown since the blueprint was saved.
    product = len(resolved) * max(len(bp.temperatures or ()), 1) * max(len(bp.systems or ()), 1)
    if product > settings.EVALSITE_LIMITS.max_variants:
        raise RunRefused(f"this run would expand to {product:,} model variants, more than the limit of "
                         f"{settings.EVALSITE_LIMITS.max_variants:,}; choose fewer models, or raise the limit with "
                         "the setting EVALSITE_MAX_VARIANTS")
    return StartPlan(revision, bp, resolved, plan, embedding_model, problems, found)


OBSERVED_ANSWERS = 1000  # the latest answers of a model its expected answer length is the mean of


def observed_answer_tokens(models) -> dict[str, tuple[float, int]]:
    """model id -> (mean output tokens, how many) of its latest stored answers (generated, not from the cache,
    with a token count): what the estimate's expected figure prices a model's answers at. A response of
    several turns counts as one answer of all its turns' tokens. One query for every model (the latest
    ``OBSERVED_ANSWERS`` of each by a window), not one per model: a run of 2,000 models asks once."""
    from django.db.models import Avg, Count, F, Window
    from django.db.models.functions import RowNumber

    ids = list(dict.fromkeys(m.id if isinstance(m, CustomModel) else m for m in models))
    ids = [i for i in ids if isinstance(i, str)]
    found = {}
    for start in range(0, len(ids), 500):  # the database's limit on a statement's parameters
        latest = (Response.objects.filter(model_id__in=ids[start:start + 500], status="done", cached=False,
                                          output_tokens__gt=0)
                  .annotate(latest=Window(RowNumber(), partition_by=[F("model_id")], order_by=F("pk").desc()))
                  .filter(latest__lte=OBSERVED_ANSWERS).values("pk"))
        rows = (Response.objects.filter(pk__in=latest).values("model_id")
                .annotate(mean=Avg("output_tokens"), n=Count("pk")).order_by())
        for row in rows:
            found[row["model_id"]] = (float(row["mean"]), int(row["n"]))
    return found


def estimate_start(planned: StartPlan, *, trials: int | None = None, fresh: bool = False) -> RunEstimate:
    """The bill of a planned run (``runs.engine.estimate.estimate_run``), answers in the response cache free;
    its expected figure prices each model's answers at the mean of its earlier ones when there are some."""
    import time

    from evalsite.deadline import deadline as page_deadline

    cache = response_cache()
    probe = None
    if not fresh and isinstance(cache, SqliteCache):  # the database cache is async: its hits go uncounted
        # The look-up is bounded (EVALSITE_ESTIMATE_LOOKUP_S, and the page's own time limit): past it, what it
        # did not look up is counted as calls, and the estimate says "at least" so many are cached.
        ends = [time.monotonic() + settings.EVALSITE_ESTIMATE_LOOKUP_S, page_deadline()]
        probe = CacheProbe(engine_config().providers, cache.get, custom_models=custom_models(planned.blueprint),
                           deadline=min(e for e in ends if e is not None))
    try:
        return estimate_run(planned.blueprint, planned.models, planned.plan, trials=trials, fresh=fresh,
                            embedding_model=planned.embedding_model, cache=probe,
                            observed=observed_answer_tokens(planned.models))
    finally:
        if isinstance(cache, SqliteCache):
            cache.close()


def over_threshold(estimate: RunEstimate, budget_usd: float | None = None) -> bool:
    """A run this large asks the person starting it to confirm (EVALSITE_CONFIRM_USD, EVALSITE_CONFIRM_CALLS,
    EVALSITE_CONFIRM_ITEMS), judged by the most it can cost; a budget below EVALSITE_CONFIRM_USD has bounded its
    cost already, never its items."""
    if estimate.responses >= settings.EVALSITE_CONFIRM_ITEMS:  # items cost rows and work even when calls are free
        return True
    if budget_usd is not None and budget_usd < settings.EVALSITE_CONFIRM_USD:
        return False
    return ((estimate.most_cost or 0) >= settings.EVALSITE_CONFIRM_USD
            or estimate.total_calls >= settings.EVALSITE_CONFIRM_CALLS)


def confirmation_key(estimate: RunEstimate) -> str:
    """What the confirmation box says it expects, as a value the start can compare: calls, expected and most
    cents, and the calls of no price."""
    return (f"{estimate.responses}:{estimate.total_calls}:{round((estimate.expected_cost or 0) * 100)}:"
            f"{round((estimate.most_cost or 0) * 100)}:{estimate.unpriced_calls}")


def confirmation_label(estimate: RunEstimate) -> str:
    """What the person ticks: the calls and the two figures; with calls of no price, how many, and no dollar
    figure (one would leave them out)."""
    items = (f" and {estimate.responses:,} items" if estimate.responses >= settings.EVALSITE_CONFIRM_ITEMS
             else "")
    if estimate.unpriced_calls:
        return (f"I expect {estimate.total_calls:,} calls{items}, {estimate.unpriced_calls:,} of them to models with "
                f"no price, whose cost is unknown")
    return (f"I expect about ${estimate.expected_cost or 0:,.2f} (at most ${estimate.most_cost or 0:,.2f}) for "
            f"{estimate.total_calls:,} calls{items}")


# --- one start, from any door ----------------------------------------------------------------------------


@dataclass
class KeyWarning:
    """One missing key and every model of the run (candidates and judges) that needs it."""

    variable: str
    provider: str
    models: list[str]
    judges: list[str]

    @property
    def message(self) -> str:
        what = [f"'{m}'" for m in self.models] + [f"judge '{j}'" for j in self.judges]
        return f"no API key for {self.provider}: set {self.variable} in the environment to run {', '.join(what)}"


def key_warnings(planned: StartPlan) -> tuple[list[KeyWarning], list[str]]:
    """The plan's own problems with a missing key grouped per provider (one line each); the others as said."""
    groups: dict[str, KeyWarning] = {}
    keyed = set()
    for index, (role, problem) in enumerate(planned.provider_problems):
        if role == "embedding" or not problem.variable or not problem.message.startswith("no API key for "):
            continue
        provider = provider_of(problem.model_id) or problem.model_id
        group = groups.setdefault(problem.variable, KeyWarning(problem.variable, provider, [], []))
        (group.judges if role == "judge" else group.models).append(problem.model_id)
        keyed.add(index)
    others = [p for i, p in enumerate(planned.problems) if i not in keyed]
    return list(groups.values()), others


@dataclass
class Prepared:
    """A run as one request asks it, planned once and estimated once (``prepare``): what every door shows
    before starting, and what ``start_prepared`` starts."""

    request: RunRequest
    planned: StartPlan
    estimate: RunEstimate | None  # None when the door asked for none (``prepare(estimated=False)``)
    key_warnings: list[KeyWarning]
    other_problems: list[str]
    confirm_needed: bool
    confirm_key: str
    confirm_label: str

    @property
    def confirmed(self) -> bool:
        """Below the thresholds, or the person ticked the confirmation of this very estimate."""
        return not self.confirm_needed or self.request.confirm == self.confirm_key

    @property
    def confirm_usd(self) -> float:
        return settings.EVALSITE_CONFIRM_USD

    @property
    def confirm_calls(self) -> int:
        return settings.EVALSITE_CONFIRM_CALLS

    @property
    def confirm_items(self) -> int:
        return settings.EVALSITE_CONFIRM_ITEMS

    @property
    def not_confirmed_message(self) -> str:
        e = self.estimate
        cost = (f", {e.unpriced_calls:,} of them to models with no price" if e.unpriced_calls else
                f" for about ${e.expected_cost or 0:,.2f} (at most ${e.most_cost or 0:,.2f})")
        return (f"Not started: this run would make {e.total_calls:,} calls{cost} for {e.responses:,} items, past "
                f"the amount that asks first (${settings.EVALSITE_CONFIRM_USD:g}, "
                f"{settings.EVALSITE_CONFIRM_CALLS:,} calls or {settings.EVALSITE_CONFIRM_ITEMS:,} items). Tick "
                f"“{self.confirm_label}” and start it again.")


def prepare(blueprint: Blueprint, request: RunRequest, *, revision: BlueprintRevision | None = None,
            parsed: SpecBlueprint | None = None, collections=None, door: str = "api",
            estimated: bool = True) -> Prepared:
    """Plan the run ``request`` asks for once (``plan_start``), estimate it once (``estimate_start``), gather
    its key warnings from the plan's own problems, and say whether starting it needs the confirmation.
    Raises RunRefused; ``door`` (form, api, cli) is how its message names a field.
    ``estimated`` False: a door that shows no estimate and asks no confirmation (``run_blueprint`` without
    ``--dry-run``) is spared it (its cache look-up was 0.2 s of the command on 2,000 prompts); ``estimate`` is
    then None and no confirmation is needed."""
    planned = plan_start(blueprint, revision=revision, models=list(request.models) if request.models else None,
                         judges=list(request.judges) if request.judges else None,
                         keep_judges=list(request.keep_judges) if request.keep_judges is not None else None,
                         add_judges=request.add_judges, backup_judge=request.backup_judge,
                         collections=collections, judge_repeats=request.judge_repeats, parsed=parsed)
    # Counted before the estimate (which walks them): a run past EVALSITE_MAX_ITEMS_PER_RUN is refused here,
    # naming the fields as this door names them.
    per_prompt = [max(1, int(request.trials)) if request.trials is not None else (p.trials or 1)
                  for p in planned.blueprint.prompts]
    n_variants = len(expand_variants(planned.blueprint, planned.models))
    if n_variants * sum(per_prompt) > settings.EVALSITE_MAX_ITEMS_PER_RUN:
        refused = RunRefused(items_refusal(n_variants * sum(per_prompt), len(per_prompt), n_variants, per_prompt,
                                           door))
        refused.field = "trials"
        raise refused
    warnings, others = key_warnings(planned)
    if not estimated:
        return Prepared(request, planned, None, warnings, others, confirm_needed=False, confirm_key="",
                        confirm_label="")
    estimate = estimate_start(planned, trials=request.trials, fresh=request.fresh)
    return Prepared(request, planned, estimate, warnings, others,
                    confirm_needed=over_threshold(estimate, request.budget_usd),
                    confirm_key=confirmation_key(estimate), confirm_label=confirmation_label(estimate))


def start_prepared(blueprint: Blueprint, prepared: Prepared, *, source: str, enqueue: bool = True) -> Run:
    """Start the run ``prepare`` planned (no second plan); the caller checked ``prepared.confirmed``."""
    r = prepared.request
    return start_run(blueprint, revision=prepared.planned.revision, models=list(r.models) if r.models else None,
                     judges=list(r.judges) if r.judges else None,
                     keep_judges=list(r.keep_judges) if r.keep_judges is not None else None, fresh=r.fresh,
                     trials=r.trials, source=source, enqueue=enqueue, budget_usd=r.budget_usd,
                     judge_repeats=r.judge_repeats, planned=prepared.planned,
                     add_judges=r.add_judges, backup_judge=r.backup_judge)


def start_run(blueprint: Blueprint, *, revision: BlueprintRevision | None = None, models: list[str] | None = None,
              judges: list[str] | None = None, keep_judges: list[str] | None = None, fresh: bool = False,
              trials: int | None = None, source: str = "web", collections=None, enqueue: bool = True,
              budget_usd: float | None = None, judge_repeats: int | None = None,
              planned: StartPlan | None = None, add_judges: Sequence[str] = (),
              backup_judge: str | None = None, only_prompts: list[int] | None = None,
              only_variants: list[str] | None = None, extra_options: dict | None = None) -> Run:
    """Create a run and its items; with ``enqueue``, hand it to the workers once the transaction commits.

    ``budget_usd``: the run's spending cap (docs/runs.md, "Budget"); refused when a model it would call has
    no price.

    ``models`` and ``judges`` replace the blueprint's; ``keep_judges`` (judge ids, the run
    form's ticked boxes) narrows its judges, keeping their approaches and ids. None of
    them given: the blueprint's evaluation, the same from every door.
    Raises RunRefused when the blueprint has errors or names an unknown collection.
    ``trials`` None runs each prompt as many times as the blueprint asks (its ``trials``, else once).
    ``judge_repeats`` K (1 to 5; None: 1) asks each judge K times about each point: the first asking scores,
    the others give the judges' flip rate (runs/engine/repeats.py); refused (RunRefused) outside 1 to 5.
    ``planned``: ``plan_start``'s answer for these same choices, when the caller has it already (the start
    view estimated the run first); else it is planned here.
    ``only_prompts`` (prompt positions) and ``only_variants`` (variant ids) make items for those alone (a follow-up
    run, runs/followup.py); an empty list makes none and is refused. ``extra_options`` are kept in the run's options.
    """
    if only_prompts is not None and not only_prompts or only_variants is not None and not only_variants:
        raise RunRefused("no prompt or no model variant was chosen: choose at least one of each")
    planned = planned or plan_start(blueprint, revision=revision, models=models, judges=judges,
                                    keep_judges=keep_judges, collections=collections, judge_repeats=judge_repeats,
                                    add_judges=add_judges, backup_judge=backup_judge)
    revision, bp, resolved, plan = planned.revision, planned.blueprint, planned.models, planned.plan
    embedding_model, problems = planned.embedding_model, planned.problems
    if budget_usd is not None:
        judged = any(p.fn is None for prompt in bp.prompts for p in prompt.all_points())  # else no judge is asked
        refuse_unpriced_budget(budget_usd, resolved, plan if judged else None, embedding_model, custom_models(bp))
    judged_points = [sum(1 for p in prompt.all_points() if p.fn is None) for prompt in bp.prompts]
    override = max(1, int(trials)) if trials is not None else None
    per_prompt = [override or prompt.trials or 1 for prompt in bp.prompts]
    subset = {"prompts": None if only_prompts is None else sorted(set(only_prompts)),
              "variants": None if only_variants is None else sorted(set(only_variants))}
    all_variants = expand_variants(bp, resolved)
    per_cell = _variants_per_prompt(bp, all_variants, subset)  # variants each prompt runs with
    items = sum(n * t for n, t in zip(per_cell, per_prompt))
    if items > settings.EVALSITE_MAX_ITEMS_PER_RUN:
        chosen = [t for n, t in zip(per_cell, per_prompt) if n] or per_prompt
        raise RunRefused(items_refusal(items, len(chosen), max(per_cell, default=0), chosen))
    later = items > ITEMS_IN_REQUEST  # made by a task (or, without workers, after the run is stored), in batches
    with transaction.atomic():
        run = Run.objects.create(
            revision=revision, blueprint=blueprint, label=run_label(revision), source=source,
            resolved_models=[m.to_upstream() if isinstance(m, CustomModel) else m for m in resolved],
            judges=plan_to_json(plan),
            options={"fresh": fresh, "trials": override or max(per_prompt, default=1), "trialsOverride": override,
                     "problems": problems, "embeddingModel": embedding_model,
                     "requestedModels": models or None, "requestedJudges": judges or None,
                     "keptJudges": keep_judges, **({"addedJudges": list(add_judges)} if add_judges else {}),
                     **({"backupJudge": backup_judge} if backup_judge is not None else {}), **(extra_options or {}),
                     **({MAKING_ITEMS: subset} if later else {})},
            budget_usd=budget_usd,
            manifest=run_manifest(revision, bp, resolved, plan, per_prompt=per_prompt, trials=override,
                                  fresh=fresh, embedding_model=embedding_model),
            items_total=items,
            judge_calls_total=sum(j * n * t for j, n, t in zip(judged_points, per_cell, per_prompt)) * len(plan.judges),
        )
        if not later:
            insert(Response, item_rows(run, bp, per_prompt, subset))
            if not items:
                finish_run(run.pk)
            elif enqueue:
                transaction.on_commit(lambda: enqueue_pending(run.pk))
        elif enqueue:
            transaction.on_commit(lambda: enqueue_making(run.pk))
    if later and not enqueue:
        make_items(run.pk, enqueue=False)
    return run


# --- a run's items ------------------------------------------------------------------------------------------
# A run of more than ITEMS_IN_REQUEST items has them made outside the request that started it: the run is stored
# as queued with ``options[MAKING_ITEMS]``, and a task (runs.tasks.make_items) inserts them in batches of
# ITEM_BATCH, each its own short transaction (other writers wait for one batch, never for the whole run), then
# hands them to the workers. Each batch goes on from the rows already there, so a task that died is
# simply started again (runs.work.recover_stale_items).

ITEMS_IN_REQUEST = 5_000
ITEM_BATCH = 5_000
MAKING_ITEMS = "makingItems"


def items_refusal(items: int, prompts: int, variants: int, per_prompt: Sequence[int], door: str | None = None) -> str:
    """Why a run of this many items is refused, naming the fields to change as ``door`` names them."""
    from .request import FIELDS

    name = (lambda f: FIELDS[f][door]) if door else (lambda f: f)
    trials = f"{min(per_prompt)}" if len(set(per_prompt)) <= 1 else f"{min(per_prompt)} to {max(per_prompt)}"
    return (f"{name('trials')} / {name('models')}: this run would make {items:,} items ({prompts:,} prompt"
            f"{'s' if prompts != 1 else ''} x {variants:,} model variant{'s' if variants != 1 else ''} x {trials} "
            f"trial{'s' if per_prompt and max(per_prompt) != 1 else ''}), more than the most one run may make, "
            f"{settings.EVALSITE_MAX_ITEMS_PER_RUN:,} (the setting EVALSITE_MAX_ITEMS_PER_RUN): lower "
            f"{name('trials')}, choose fewer {name('models')}, or split the blueprint")


def _variants_per_prompt(bp: SpecBlueprint, variants, subset: dict) -> list[int]:
    """How many of the variants each prompt runs with, within ``subset`` (``only_prompts``, ``only_variants``)."""
    prompts, wanted = subset.get("prompts"), subset.get("variants")
    prompts = None if prompts is None else set(prompts)
    wanted = None if wanted is None else set(wanted)
    return [0 if prompts is not None and index not in prompts
            else len(variants) if wanted is None else sum(1 for v in variants if v.id_for(prompt) in wanted)
            for index, prompt in enumerate(bp.prompts)]


def item_rows(run: Run, bp: SpecBlueprint, per_prompt: Sequence[int], subset: dict | None = None):
    """The run's items as rows, in the order they are made and worked (prompt, variant, trial); ``subset``
    (``{"prompts": positions, "variants": ids}``, None for all) as ``start_run``'s ``only_prompts`` and
    ``only_variants``."""
    variants = run.variants(bp)
    prompts = None if not subset or subset.get("prompts") is None else set(subset["prompts"])
    wanted = None if not subset or subset.get("variants") is None else set(subset["variants"])
    for index, prompt in enumerate(bp.prompts):
        if prompts is not None and index not in prompts:
            continue
        for v, variant in enumerate(variants):
            if wanted is not None and variant.id_for(prompt) not in wanted:
                continue
            for trial in range(per_prompt[index]):
                yield dict(run_id=run.pk, prompt_id=prompt.id, prompt_index=index,
                           variant_id=variant.id_for(prompt), model_id=variant.base_model_id, variant_index=v,
                           temperature=variant.temperature_for(prompt), system_index=variant.sp_idx, trial=trial)


def _without_making(run_id: int) -> dict:
    options = dict(Run.objects.filter(pk=run_id).values_list("options", flat=True).first() or {})
    options.pop(MAKING_ITEMS, None)
    return options


def make_items(run_id: int, *, enqueue: bool = True) -> int:
    """Insert the items of a run stored with ``options[MAKING_ITEMS]``, in batches from those already there; then
    hand them to the workers (``enqueue``). Stops when the run is deleted, cancelled or finished meanwhile (then
    it counts what was made). Returns how many it inserted."""
    run = Run.objects.select_related("revision").filter(pk=run_id).first()
    making = (run.options or {}).get(MAKING_ITEMS) if run is not None else None
    if not making:
        return 0
    bp = parsed_blueprint(run.revision)
    per_prompt = ((run.manifest or {}).get("trials") or {}).get("perPrompt") or [1] * len(bp.prompts)
    subset = making if isinstance(making, dict) else None
    rows = islice(item_rows(run, bp, per_prompt, subset), Response.objects.filter(run_id=run_id).count(), None)
    made, stopped = 0, False
    while True:
        batch = list(islice(rows, ITEM_BATCH))
        if not batch:
            break
        if not Run.objects.filter(pk=run_id, cancel_requested=False, status=RunStatus.QUEUED).exists():
            stopped = True
            break
        try:
            with transaction.atomic():
                made += insert(Response, batch)
        except IntegrityError:  # another task makes them (one started again while this one worked): it goes on
            return made
    with transaction.atomic():
        changes = {"options": _without_making(run_id)}
        if stopped:
            changes["items_total"] = Response.objects.filter(run_id=run_id).count()
        Run.objects.filter(pk=run_id).update(**changes)
    if stopped:
        settle(run_id)
    elif enqueue:
        enqueue_pending(run_id)
    return made


# --- a budget, and the manifest -------------------------------------------------------------------------


def unpriced_models(models, plan: JudgePlan | dict | None, embedding_model: str | None, customs=()) -> list[str]:
    """The models a run may call that have no price in prices.json: custom models (their endpoint is yours),
    and any candidate, judge (the backup judge included) or embedding model the table does not list.
    ``fixtures:`` models send nothing and cost nothing."""
    from blueprints.spec.model_ids import parse_for_api_call, provider_of
    from runs.engine.providers.prices import price_of

    ids = [m.id if isinstance(m, CustomModel) else m.get("id") if isinstance(m, dict) else m for m in models]
    if isinstance(plan, dict):
        judges = [j["model"] for j in [*plan.get("judges", []), plan.get("backup")] if j]
    elif plan is not None:
        judges = [j.model for j in (*plan.judges, plan.backup) if j is not None]
    else:
        judges = []
    missing = []
    for model_id in [*ids, *judges, *([embedding_model] if embedding_model else [])]:
        if not isinstance(model_id, str):
            continue
        base = parse_for_api_call(model_id).original_model_id
        if base in customs or isinstance(next((m for m in models if isinstance(m, dict) and m.get("id") == base),
                                                None), dict):
            missing.append(base)
        elif provider_of(base) != "fixtures" and price_of(base) is None:
            missing.append(base)
    return list(dict.fromkeys(missing))


def check_budget(value) -> float:
    """A budget as sent: a number of US dollars above 0 (text is read as a number)."""
    if isinstance(value, bool):
        raise ValueError("the budget is a number of US dollars above 0")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("the budget is a number of US dollars above 0") from None
    except OverflowError:  # a whole number of hundreds of digits
        raise ValueError("the budget is too large: give a number of US dollars, such as 25") from None
    if not number > 0 or number != number or number == float("inf"):
        raise ValueError("the budget is a number of US dollars above 0")
    return number


def refuse_unpriced_budget(budget_usd, models, plan, embedding_model, customs=()) -> None:
    """A budgeted run must be able to count every call: refused when a model it would call has no price."""
    try:
        check_budget(budget_usd)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    missing = unpriced_models(models, plan, embedding_model, customs)
    if missing:
        raise RunRefused(
            f"a budget of ${float(budget_usd):g} needs a price for every model the run calls, and "
            f"{', '.join(repr(m) for m in missing)} {'has' if len(missing) == 1 else 'have'} none",
            [f"'{m}' has no price in runs/engine/providers/prices.json (a custom model never has one): add its "
             f"price there, leave it out of the run, or run without a budget" for m in missing])


def run_manifest(revision: BlueprintRevision, bp: SpecBlueprint, resolved, plan: JudgePlan, *, per_prompt,
                 trials, fresh: bool, embedding_model: str | None) -> dict:
    """What the run pinned, to rebuild it (runs/replay.py, docs/runs.md "Replay"): the revision (number and
    text sha), models and their parameters, judges with their approach and prompt and how many times each is
    asked about each point (``repeats``; a re-asking's index is in its cache key), the scale, trials. The
    engine draws no random numbers (no seed to keep): repeats differ by their trial index, which is in each
    call's cache key. The cache key of every call the run makes is kept in its call log (``cacheKey``)."""
    from runs.engine.judge import JUDGE_MAX_TOKENS, JUDGE_TEMPERATURE, system_prompt

    def judge(j):
        if j is None:
            return None
        return {"id": j.id, "model": j.model, "approach": j.approach,
                "systemPromptSha256": hashlib.sha256(system_prompt(j, plan).encode("utf-8")).hexdigest()}

    return {
        "version": 1,
        "blueprint": revision.blueprint.slug,
        "revision": {"number": revision.number, "sha256": revision.sha256, "label": run_label(revision)},
        "models": [m.to_upstream() if isinstance(m, CustomModel) else m for m in resolved],
        "parameters": {"temperatures": list(bp.temperatures or ()), "systems": len(bp.systems or ()) or None,
                       "concurrency": bp.concurrency, "fresh": fresh, "embeddingModel": embedding_model},
        "judges": {"judges": [judge(j) for j in plan.judges], "backup": judge(plan.backup),
                   "temperature": JUDGE_TEMPERATURE, "maxTokens": JUDGE_MAX_TOKENS, "repeats": plan.repeats},
        "scale": plan.scale.name,
        "trials": {"override": trials, "perPrompt": list(per_prompt)},
        "seeds": None,
    }
