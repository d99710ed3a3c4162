"""The preview of a blueprint: its prompts, points and paths as the pages show them, the model
variants a run would make, its calls and its estimated cost."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from django.conf import settings

from blueprints.models import ModelCollection
from blueprints.spec import Blueprint as SpecBlueprint
from blueprints.spec import Point, Prompt
from blueprints.spec.schema import CustomModel
from blueprints.spec import functions
from blueprints.spec.collections import resolve_models
from blueprints.spec.limits import Limits
from blueprints.spec.model_ids import effective_id, format_js_number, is_collection_name, provider_of
from evalsite.engine import engine_config
from runs.engine.judge import plan_for_run
from runs.engine.estimate import CallEstimate, generations_per_variant, max_tokens_of
from runs.engine.providers.prices import price_table


# --------------------------------------------------------------------------------------
# Preview: what the blueprint asks, and what a run of it would do

CANNED_PROVIDERS = ("fixtures",)  # answered from the blueprint's fixtures: no call, no cost


def format_args(value) -> str:
    """A function argument as the author would recognise it: JSON-like, compact, with
    strings shown as written (a regex's backslashes are not doubled)."""
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(format_args(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_args(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def point_label(point: Point) -> str:
    if point.fn:
        if not point.has_args:
            return f"{point.fn}()"
        if point.fn == "js" and isinstance(point.fn_args, str):
            return f"js({point.fn_args.strip()})"
        if isinstance(point.fn_args, list):
            return f"{point.fn}({', '.join(format_args(a) for a in point.fn_args)})"
        return f"{point.fn}({format_args(point.fn_args)})"
    return point.text or ""


@dataclass
class PointView:
    point: Point
    label: str
    help: str = ""

    @property
    def kind(self):
        return self.point.kind


@dataclass
class PointGroup:
    kind: str  # "required", "path", "not_required", "not_path"
    title: str
    points: list[PointView]

    @property
    def is_path(self) -> bool:
        return self.kind in ("path", "not_path")


@dataclass
class MessageView:
    role: str
    content: str | None

    @property
    def to_generate(self) -> bool:
        return self.role == "assistant" and self.content is None


@dataclass
class PromptView:
    prompt: Prompt
    system: str | None
    messages: list[MessageView]
    groups: list[PointGroup]
    generations: int  # model calls per model variant
    judged_points: int
    function_points: int

    @property
    def id(self):
        return self.prompt.id

    @property
    def ends_with_user(self) -> bool:
        """The run generates the scored response after the last message."""
        return bool(self.messages) and self.messages[-1].role == "user"


def point_groups(prompt: Prompt) -> list[PointGroup]:
    """Required points, then each alternative path as its own group; `should` before `should_not`."""
    groups: list[PointGroup] = []

    def add(block, negative: bool):
        required = [p for p in _flatten(block) if p.path_id is None]
        if required:
            groups.append(PointGroup("not_required" if negative else "required",
                                     "Should not" if negative else "Should", [_view(p) for p in required]))
        paths: dict[str, list[Point]] = {}
        for p in _flatten(block):
            if p.path_id is not None:
                paths.setdefault(p.path_id, []).append(p)
        for number, (path_id, points) in enumerate(paths.items(), start=1):
            title = (f"Should not, path {number}" if negative else f"Path {number}") + f" ({path_id})"
            groups.append(PointGroup("not_path" if negative else "path", title, [_view(p) for p in points]))

    add(prompt.points, negative=False)
    add(prompt.should_not or [], negative=True)
    return groups


def _flatten(block):
    for item in block:
        if isinstance(item, list):
            yield from item
        else:
            yield item


def _view(point: Point) -> PointView:
    return PointView(point, point_label(point), functions.describe(point.fn) if point.fn else "")


def prompt_view(bp: SpecBlueprint, prompt: Prompt) -> PromptView:
    if bp.systems:
        system = None  # a variant each; shown with the variants
    elif prompt.system_set:
        system = prompt.system
    else:
        system = bp.system
    points = prompt.all_points()
    return PromptView(
        prompt=prompt, system=system,
        messages=[MessageView(m.role, m.content) for m in prompt.messages],
        groups=point_groups(prompt), generations=generations_per_variant(prompt),
        judged_points=sum(1 for p in points if p.kind == "judged"),
        function_points=sum(1 for p in points if p.kind == "function"),
    )


@dataclass
class ModelLine(CallEstimate):
    """One model of the run (or a judge), and what its calls would cost (``runs.engine.estimate``)."""

    source: str = ""  # the collection it came from, if any
    priced: bool = False  # the engine's price table knows this model

    @property
    def id(self) -> str:
        return self.model_id


@dataclass
class Preview:
    blueprint: SpecBlueprint
    prompts: list[PromptView]
    models: list[ModelLine]
    missing_collections: list[str]
    temperatures: list[float | None]
    systems: list[str | None] | None
    variants: list[str]  # the first Limits.max_variants ids; variant_total counts them all
    judges: list[ModelLine]
    judges_are_default: bool
    generation_calls: int
    judge_calls: int
    prices_known: bool
    variant_total: int = 0

    @property
    def variant_count(self) -> int:
        return max(self.variant_total, len(self.variants))

    @property
    def variants_truncated(self) -> bool:
        return self.variant_count > len(self.variants)

    @property
    def point_count(self) -> int:
        return self.blueprint.point_count

    @property
    def temperature_labels(self) -> list[str]:
        return ["default (0)" if t is None else format_js_number(t) for t in self.temperatures]

    @property
    def prompt_temperatures(self) -> bool:
        return self.temperatures == [None] and any(p.prompt.temperature is not None for p in self.prompts)

    @property
    def input_tokens(self) -> int:
        return sum(m.input_tokens for m in self.models + self.judges)

    @property
    def output_tokens(self) -> int:
        return sum(m.output_tokens for m in self.models + self.judges)

    @property
    def cost(self) -> float | None:
        costs = [m.cost for m in self.models + self.judges if m.calls]
        if any(c is None for c in costs):
            return None
        return sum(costs)

    @property
    def unpriced(self) -> list[str]:
        return [m.id for m in self.models + self.judges if m.calls and m.cost is None]


def _model_id(model) -> str:
    return model if isinstance(model, str) else model.id


def build_preview(bp: SpecBlueprint, collections: Callable[[str], list[str] | None] | None,
                  limits: Limits | None = None) -> Preview:
    """Prompts as the run will see them, the model variants, and the calls and tokens they take.

    At most ``limits.max_variants`` variant ids are listed (``variant_total`` counts them all).
    """
    limits = limits or settings.EVALSITE_LIMITS
    prompts = [prompt_view(bp, p) for p in bp.prompts]
    models, missing = resolve_models(bp.models if bp.models_given else [], collections)
    origins = _collection_origins(bp, collections)
    temperatures: list[float | None] = list(bp.temperatures) if bp.temperatures else [bp.temperature]
    system_count = len(bp.systems) if bp.systems else 1
    variants = []
    variant_total = len(models) * len(temperatures) * system_count
    for model in models:
        if len(variants) >= limits.max_variants:
            break
        for temperature in temperatures:
            for index in range(system_count):
                if len(variants) >= limits.max_variants:
                    break
                variants.append(effective_id(_model_id(model), temperature=temperature or 0,
                                             system_index=index if system_count > 1 else None,
                                             system_count=system_count))
    per_model = len(temperatures) * system_count
    prices = price_table()
    lines = []
    judges_ids, judges_default = _judges(bp)
    judge_lines = [ModelLine(j, priced=j in prices) for j in judges_ids]
    judge_calls = 0
    for model in models:
        model_id = _model_id(model)
        line = ModelLine(model_id, source=origins.get(model_id, ""), canned=provider_of(model_id) in CANNED_PROVIDERS,
                         priced=model_id in prices)
        max_out = max_tokens_of(model)
        for view in prompts:
            line.add_candidate(view.prompt, bp, variants=per_model, max_out=max_out)
            for judge in judge_lines:
                judge.add_judging(view.prompt, bp, judged=view.judged_points * per_model, max_out=max_out)
            judge_calls += view.judged_points * per_model * len(judge_lines)
        lines.append(line)
    return Preview(
        blueprint=bp, prompts=prompts, models=lines, missing_collections=missing, temperatures=temperatures,
        systems=bp.systems, variants=variants, judges=judge_lines, judges_are_default=judges_default,
        generation_calls=sum(m.calls for m in lines), judge_calls=judge_calls, prices_known=bool(prices),
        variant_total=variant_total,
    )


def _collection_origins(bp: SpecBlueprint, collections) -> dict[str, str]:
    origins: dict[str, str] = {}
    if collections is None:
        return origins
    for entry in (bp.models if bp.models_given else ["CORE"]):
        if isinstance(entry, str) and is_collection_name(entry):
            for model_id in collections(entry) or []:
                origins.setdefault(model_id, entry)
    return origins


def run_judges(bp: SpecBlueprint):
    """The judges a run of this blueprint uses unless told otherwise: the same plan the runs app builds."""
    config = engine_config()
    return plan_for_run(bp.coverage, default_judges=config.default_judges, backup_judge=config.backup_judge,
                        description=bp.description)


def run_problems(preview: "Preview", revision) -> list[str]:
    """What would fail if the run started now (a model or judge without its key, say), in the run's own words."""
    from runs.engine.providers import fixtures_from_blueprint
    from runs.engine.providers import run_problems as problems_of

    bp = preview.blueprint
    judged = any(p.fn is None for prompt in bp.prompts for p in prompt.all_points())
    fixtures, fixture_problems = fixtures_from_blueprint(bp.fixtures, revision.files or {})
    customs = {m.id: m for m in bp.models if isinstance(m, CustomModel)}
    models = [customs.get(m.id, m.id) for m in preview.models]
    embedding = (bp.embedding_model or settings.EVALSITE_EMBEDDINGS_MODEL or None) \
        if any(p.ideal_response for p in bp.prompts) else None
    return problems_of(models, engine_config().providers, judge_models=[j.id for j in preview.judges] if judged else (),
                       embedding_model=embedding, custom_models=customs, fixtures=fixtures) + fixture_problems


def known_models() -> list[str]:
    """Model ids with a known price, and the stored collections: what the run form suggests."""
    return sorted(price_table()) + sorted(ModelCollection.objects.values_list("name", flat=True))


def _judges(bp: SpecBlueprint) -> tuple[list[str], bool]:
    plan = run_judges(bp)
    return [j.model for j in plan.judges], not plan.configured
