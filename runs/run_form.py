"""The run form: its boxes, its live estimate, its confirmation, as ``runs.views.run_form`` shows them.

The blueprint page embeds the form by its address (``runs:form``); every change posts the form back for a
new estimate (``runs/run_form.html#estimate``) and Start posts to the same address. Each post is read
once (``RunRequest.from_form``), planned once and estimated once (``start.prepare``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blueprints.models import Blueprint, BlueprintRevision, ModelCollection
from blueprints.preview import collection_origins
from runs.engine.providers.prices import price_table

from . import start as run_start
from .request import MAX_CHOSEN, RunRequest, RunRequestError
from .spec import RunRefused


@dataclass
class Box:
    value: str
    label: str
    checked: bool
    source: str = ""  # the collection a model came from


@dataclass
class FormState:
    """What the form shows: its boxes and fields as offered or posted, the estimate or why it cannot run."""

    blueprint: Blueprint
    revision: BlueprintRevision | None
    models: list[Box] = field(default_factory=list)
    judges: list[Box] = field(default_factory=list)
    values: dict = field(default_factory=dict)  # add_models, add_judges, backup_judge, trials, ... as posted
    prepared: run_start.Prepared | None = None
    refused: str | None = None  # why the run cannot start as the form stands
    blocked: str | None = None  # why no run of this blueprint can start (no form)
    judges_are_default: bool = False
    site_backup: str = ""

    @property
    def estimate(self):
        return self.prepared.estimate if self.prepared else None

    @property
    def plan(self):
        return self.prepared.planned.plan if self.prepared else None


def known_models() -> list[str]:
    """Model ids with a known price, and the stored collections: what "Add models" suggests."""
    return sorted(price_table()) + sorted(ModelCollection.objects.values_list("name", flat=True))


def _pairs(data, name: str) -> list[str]:
    return [str(v)[:400] for v in data.getlist(name)[:MAX_CHOSEN]]


def form_state(blueprint: Blueprint, revision: BlueprintRevision | None, data=None) -> FormState:
    """The form for ``data`` (a POST), or as first offered (None): one parse, one plan, one estimate."""
    from evalsite.engine import engine_config

    state = FormState(blueprint, revision, site_backup=engine_config().backup_judge or "")
    if revision is None:
        state.blocked = "the blueprint has no saved text yet"
        return state
    try:
        request = RunRequest.from_form(data) if data is not None else RunRequest()
    except RunRequestError as exc:
        request, state.refused = None, exc.message
    if request is not None:
        try:
            state.prepared = run_start.prepare(blueprint, request, revision=revision, door="form")
        except RunRefused as refused:
            state.refused = refused.message + "".join(f" {p}" for p in refused.problems[:3])
    if data is None:  # as first offered: the boxes are the plan's
        lookup = revision.collections()  # the files its text came with first, then the stored ones
        if state.prepared is not None:
            bp, models, plan = (state.prepared.planned.blueprint, state.prepared.planned.models,
                                state.prepared.planned.plan)
        else:  # refused as it stands (no judge for judged points, too many variants): still offer the boxes
            result = revision.parse(collections=lookup)
            try:
                if result.blueprint is None:
                    raise RunRefused(state.refused or "the blueprint has errors")
                bp = result.blueprint
                models, plan = run_start.resolve_run_models(bp, None, lookup), run_start.judge_plan_for(bp)
            except RunRefused:
                state.blocked = state.refused
                return state
        origins = collection_origins(bp, lookup)
        ids = [m if isinstance(m, str) else m.id for m in models]
        state.models = [Box(m, m, True, origins.get(m, "")) for m in ids]
        state.judges = [Box(j.judge_id, f"{j.judge_id} · {j.approach}", True) for j in plan.judges]
        state.judges_are_default = not plan.configured
        state.values = {"backup_judge": plan.backup.model if plan.backup else ""}
        if not ids:
            state.blocked = "This blueprint lists no models to run."
        return state
    ticked, judges_ticked = set(data.getlist("models")), set(data.getlist("judges"))
    sources = _pairs(data, "models_source")
    state.models = [Box(m, m, m in ticked, sources[i] if i < len(sources) else "")
                    for i, m in enumerate(_pairs(data, "models_offered"))]
    labels = _pairs(data, "judges_label")
    state.judges = [Box(j, labels[i] if i < len(labels) else j, j in judges_ticked)
                    for i, j in enumerate(_pairs(data, "judges_offered"))]
    state.judges_are_default = data.get("judges_default") == "1"
    state.values = {key: str(data.get(key) or "")[:2000] for key in
                    ("add_models", "add_judges", "backup_judge", "trials", "judge_repeats", "budget_usd")}
    state.values["fresh"] = bool(data.get("fresh"))
    return state
