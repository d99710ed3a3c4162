"""The preview of a blueprint: its prompts, points and paths as the pages show them, the model
variants a run would make, its calls and its estimated cost."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Callable

from django.conf import settings

from blueprints.spec import Blueprint as SpecBlueprint
from blueprints.spec import Point, Prompt
from blueprints.spec import functions
from blueprints.spec.collections import resolve_models
from blueprints.spec.limits import Limits
from blueprints.spec.model_ids import effective_id, format_js_number, is_collection_name
from evalsite.engine import engine_config
from runs.engine.judge import plan_for_run
from runs.engine.estimate import ModelEstimate, RunEstimate, estimate_run, generations_per_variant
from runs.engine.providers.prices import price_table


# --------------------------------------------------------------------------------------
# Preview: what the blueprint asks, and what a run of it would do



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
class ModelLine(ModelEstimate):
    """One model of the run (or a judge), and what its calls would cost (``runs.engine.estimate``)."""

    source: str = ""  # the collection it came from, if any

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
    generation_calls: int  # generated turns, those answered from fixtures included
    judge_calls: int
    prices_known: bool
    variant_total: int = 0
    estimate: RunEstimate | None = None  # the engine's bill of a run with the blueprint's own choices

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


def _line(estimate: ModelEstimate, source: str = "") -> ModelLine:
    line = ModelLine(**{f.name: getattr(estimate, f.name) for f in fields(ModelEstimate)}, source=source)
    if line.canned:  # the preview counts fixtures' turns as the model's generations (at no cost)
        line.calls = estimate.canned_answers
    return line


def build_preview(bp: SpecBlueprint, collections: Callable[[str], list[str] | None] | None,
                  limits: Limits | None = None) -> Preview:
    """Prompts as the run will see them, the model variants, and the calls and tokens they take.

    At most ``limits.max_variants`` variant ids are listed (``variant_total`` counts them all). The calls
    and tokens are ``runs.engine.estimate.estimate_run``'s for the blueprint's own choices (its trials
    included), no cache assumed.
    """
    limits = limits or settings.EVALSITE_LIMITS
    prompts = [prompt_view(bp, p) for p in bp.prompts]
    models, missing = resolve_models(bp.models if bp.models_given else [], collections)
    origins = collection_origins(bp, collections)
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
    plan = run_judges(bp)
    estimate = None
    if variant_total <= limits.max_variants:  # a run past the limit is refused: nothing to estimate
        estimate = estimate_run(bp, models, plan)
    lines = [_line(m, origins.get(m.model_id, "")) for m in estimate.candidates] if estimate else []
    judge_lines = [_line(j) for j in estimate.judges] if estimate else []
    return Preview(
        blueprint=bp, prompts=prompts, models=lines, missing_collections=missing, temperatures=temperatures,
        systems=bp.systems, variants=variants, judges=judge_lines, judges_are_default=not plan.configured,
        generation_calls=estimate.generated_turns if estimate else 0,
        judge_calls=estimate.judge_calls if estimate else 0, prices_known=bool(price_table()),
        variant_total=variant_total, estimate=estimate,
    )


def collection_origins(bp: SpecBlueprint, collections) -> dict[str, str]:
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
