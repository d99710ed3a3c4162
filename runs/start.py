"""Starting a run: refusal, model resolution, the judge plan, and its items (the first phase of a run's life).

Views, commands and the API call ``start_run``; the run is then the workers' (runs/work.py), and what
they produce is stored and finished by runs/records.py.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import transaction

from blueprints.models import Blueprint, BlueprintRevision, ModelCollection
from blueprints.spec.collections import resolve_models
from blueprints.spec.schema import Blueprint as SpecBlueprint
from blueprints.spec.schema import CustomModel
from runs.engine.judge import JudgePlan, plan_for_run
from runs.engine.providers import fixtures_from_blueprint, run_problems

from evalsite.engine import engine_config

from .bulk import insert
from .models import Response, Run

from .records import finish_run, plan_to_json
from .spec import RunRefused, custom_models, remember
from .work import enqueue_pending


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


def judge_plan_for(bp: SpecBlueprint, requested: list[str] | None = None, keep: list[str] | None = None
                   ) -> JudgePlan:
    """The run's judges (``runs.engine.judge.plan_for_run``) with the site's default and backup judges."""
    config = engine_config()
    try:
        return plan_for_run(bp.coverage, default_judges=config.default_judges, backup_judge=config.backup_judge,
                            description=bp.description, replace_with=requested, keep=keep)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None


def run_label(revision: BlueprintRevision) -> str:
    """Deviation 12: the label hashes the whole revision text (and its companion files)."""
    digest = hashlib.sha256(revision.text.encode("utf-8"))
    for name in sorted(revision.files or {}):
        digest.update(f"\0{name}\0{revision.files[name]}".encode("utf-8"))
    return digest.hexdigest()[:16]


def start_run(blueprint: Blueprint, *, revision: BlueprintRevision | None = None, models: list[str] | None = None,
              judges: list[str] | None = None, keep_judges: list[str] | None = None, fresh: bool = False,
              trials: int | None = None, source: str = "web", collections=None, enqueue: bool = True) -> Run:
    """Create a run and its items; with ``enqueue``, hand it to the workers once the transaction commits.

    ``models`` and ``judges`` replace the blueprint's; ``keep_judges`` (judge ids, the run
    form's ticked boxes) narrows its judges, keeping their approaches and ids. None of
    them given: the blueprint's evaluation, the same from every door.
    Raises RunRefused when the blueprint has errors or names an unknown collection.
    ``trials`` None runs each prompt as many times as the blueprint asks (its ``trials``, else once).
    """
    revision = revision or blueprint.current_revision
    if revision is None:
        raise RunRefused("the blueprint has no saved text yet")
    lookup = collections or ModelCollection.lookup()
    result = revision.parse(collections=lookup)
    if result.blueprint is None:
        raise RunRefused(f"'{blueprint.slug}' has errors; fix them before running",
                         [e.format(blueprint.slug) for e in result.errors])
    bp = result.blueprint
    remember(revision, bp)  # the workers read it from here (in this process) rather than parse it again
    resolved = resolve_run_models(bp, models, lookup)
    plan = judge_plan_for(bp, judges, keep_judges)
    judged = any(p.fn is None for prompt in bp.prompts for p in prompt.all_points())
    if judged and not plan.judges:
        raise RunRefused("no judge would score the judged points: tick at least one judge")
    fixtures, fixture_problems = fixtures_from_blueprint(bp.fixtures, revision.files)
    # Similarity to ideals: the blueprint's embeddingModel wins over the site's; none means no similarity.
    embedding_model = (bp.embedding_model or settings.EVALSITE_EMBEDDINGS_MODEL or None) \
        if any(p.ideal_response for p in bp.prompts) else None
    problems = run_problems(resolved, engine_config().providers, judge_models=[j.model for j in plan.judges] if judged else (),
                            embedding_model=embedding_model, custom_models=custom_models(bp), fixtures=fixtures)
    problems += fixture_problems
    # Checked before expanding: a collection may have grown since the blueprint was saved.
    product = len(resolved) * max(len(bp.temperatures or ()), 1) * max(len(bp.systems or ()), 1)
    if product > settings.EVALSITE_LIMITS.max_variants:
        raise RunRefused(f"this run would expand to {product:,} model variants, more than the limit of "
                         f"{settings.EVALSITE_LIMITS.max_variants:,}; choose fewer models, or raise the limit with "
                         "the setting EVALSITE_MAX_VARIANTS")
    judged_points = {i: sum(1 for p in prompt.all_points() if p.fn is None) for i, prompt in enumerate(bp.prompts)}
    override = max(1, int(trials)) if trials is not None else None
    per_prompt = [override or prompt.trials or 1 for prompt in bp.prompts]
    with transaction.atomic():
        run = Run.objects.create(
            revision=revision, blueprint=blueprint, label=run_label(revision), source=source,
            resolved_models=[m.to_upstream() if isinstance(m, CustomModel) else m for m in resolved],
            judges=plan_to_json(plan),
            options={"fresh": fresh, "trials": override or max(per_prompt, default=1), "trialsOverride": override,
                     "problems": problems, "embeddingModel": embedding_model,
                     "requestedModels": models or None, "requestedJudges": judges or None,
                     "keptJudges": keep_judges},
        )
        variants = run.variants(bp)
        rows = [
            dict(run_id=run.pk, prompt_id=prompt.id, prompt_index=index, variant_id=variant.id_for(prompt),
                 model_id=variant.base_model_id, variant_index=v, temperature=variant.temperature_for(prompt),
                 system_index=variant.sp_idx, trial=trial)
            for index, prompt in enumerate(bp.prompts) for v, variant in enumerate(variants)
            for trial in range(per_prompt[index])
        ]
        insert(Response, rows)
        run.items_total = len(rows)
        run.judge_calls_total = sum(judged_points[r["prompt_index"]] for r in rows) * len(plan.judges)
        run.save(update_fields=["items_total", "judge_calls_total"])
        if not rows:
            finish_run(run.pk)
        elif enqueue:
            transaction.on_commit(lambda: enqueue_pending(run.pk))
    return run
