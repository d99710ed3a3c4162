# Over 500 lines: the blueprint pages' services; the split into editing and importing is open (issue 13, item 3).
"""What the blueprint pages compute, kept out of the views so each view stays a few lines.

Sections: markdown, the editor's check (diagnostics -> editor annotations), the
preview (prompts, points, paths, model variants, call counts and cost estimate),
try-a-response, revision diffs, importing files and folders, and the example
blueprints. Everything here reads the pure `blueprints.spec` and, for trying
points, the pure `runs.engine.points`; nothing here touches the runs app's
models or tasks.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

import nh3
from django.conf import settings
from django.db import transaction
from markdown_it import MarkdownIt

from blueprints.models import (
    Blueprint,
    BlueprintRevision,
    ModelCollection,
    title_from_text,
    validate_blueprint_id,
)
from blueprints.spec import Blueprint as SpecBlueprint
from blueprints.parsing import parse_text
from blueprints.spec import ParseResult, Point, Prompt, parse_any
from blueprints.spec.schema import CustomModel
from blueprints.spec import functions
from blueprints.spec.collections import CollectionError, read_collection_file, resolve_models
from blueprints.spec.files import iter_blueprint_files, read_text
from blueprints.spec.ids import blueprint_id_from_path
from blueprints.spec.limits import Limits
from blueprints.spec.model_ids import effective_id, format_js_number, is_collection_name, provider_of
from evalsite.engine import engine_config
from evalsite.security import defer_outside_images
from runs.engine.judge import JUDGE_MAX_TOKENS, plan_for_run
from runs.engine.providers.prices import DEFAULT_MAX_TOKENS, estimate_usd, price_table

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"

# --------------------------------------------------------------------------------------
# Markdown: descriptions are the author's markdown, never their HTML.

_ALLOWED_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "img",
}
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "code": {"class"},
                       "th": {"style"}, "td": {"style"}}
_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def render_markdown(text: str | None) -> str:
    """Markdown -> HTML that is safe to insert: raw HTML is escaped, then sanitised again (nh3)."""
    if not text:
        return ""
    return defer_outside_images(nh3.clean(
        _markdown.render(text), tags=_ALLOWED_TAGS, attributes=_ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    ))


# --------------------------------------------------------------------------------------
# The editor's check


@dataclass
class Check:
    """One validation of editor text: the parse result, its editor annotations, its preview."""

    result: ParseResult
    preview: "Preview | None"

    @property
    def diagnostics(self):
        return self.result.diagnostics

    @property
    def annotations(self) -> list[dict]:
        return annotations_for(self.result.diagnostics)

    @property
    def annotations_json(self) -> str:
        return json.dumps(self.annotations, ensure_ascii=False)


def annotations_for(diagnostics) -> list[dict]:
    """Ace's gutter annotations: 0-based rows, one per diagnostic."""
    out = []
    for d in diagnostics:
        text = d.message + (f"\nHint: {d.hint}" if d.hint else "")
        out.append({"row": max((d.line or 1) - 1, 0), "column": max((d.column or 1) - 1, 0),
                    "type": "error" if d.is_error else "warning", "text": text})
    return out


def check_text(text: str, *, slug: str | None = None, collections=None, files: dict | None = None) -> Check:
    """Validate editor text in any dialect; a suite's companion files are the blueprint's current ones."""
    lookup = collections if collections is not None else ModelCollection.lookup()
    if files is None and slug:
        files = (Blueprint.objects.filter(slug=slug).values_list("current_revision__files", flat=True).first()
                 or {})
    result = parse_text(text, blueprint_id=slug, collections=lookup, files=files or {})
    preview = build_preview(result.blueprint, lookup) if result.blueprint is not None else None
    return Check(result, preview)


# --------------------------------------------------------------------------------------
# Preview: what the blueprint asks, and what a run of it would do

# Reference section 5.8: candidates get the client's default (1500) unless a custom
# model sets max_tokens; judges are called with 500 tokens at temperature 0.
# The judge's instructions and scale around each criterion, in characters (approximate).
JUDGE_PROMPT_OVERHEAD_CHARS = 2400
CHARS_PER_TOKEN = 4
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

    @property
    def is_negative(self) -> bool:
        return self.kind in ("not_required", "not_path")


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
    def path_groups(self):
        return [g for g in self.groups if g.is_path]

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


def generations_per_variant(prompt: Prompt) -> int:
    """Model calls for one prompt and one model variant (reference 5.4, deviation 14)."""
    to_generate = sum(1 for m in prompt.messages if m.to_generate)
    last = prompt.messages[-1] if prompt.messages else None
    if last is not None and last.role == "user":
        to_generate += 1
    return to_generate


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
class ModelLine:
    """One model of the run, and what its calls would cost."""

    id: str
    source: str = ""  # the collection it came from, if any
    canned: bool = False
    priced: bool = False  # the engine's price table knows this model
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def cost(self) -> float | None:
        if self.canned:
            return 0.0
        return estimate_usd(self.id, self.input_tokens, self.output_tokens)


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


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN) if chars else 0


def _model_id(model) -> str:
    return model if isinstance(model, str) else model.id


def _max_tokens(model) -> int:
    if not isinstance(model, str) and model.parameters:
        value = model.parameters.get("max_tokens") or model.parameters.get("maxTokens")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 10**9:
            return int(value)
    return DEFAULT_MAX_TOKENS


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
        max_out = _max_tokens(model)
        for view in prompts:
            conversation_chars = _conversation_chars(view, bp)
            calls = view.generations
            line.calls += calls * per_model
            # Each call sees the conversation so far, including earlier generated turns.
            line.input_tokens += per_model * sum(_tokens(conversation_chars) + i * max_out for i in range(calls))
            line.output_tokens += per_model * calls * max_out
            judged = view.judged_points * per_model
            for judge in judge_lines:
                judge.calls += judged
                judge.input_tokens += judged * (_tokens(conversation_chars + JUDGE_PROMPT_OVERHEAD_CHARS)
                                                + calls * max_out)
                judge.output_tokens += judged * JUDGE_MAX_TOKENS
            judge_calls += judged * len(judge_lines)
        lines.append(line)
    return Preview(
        blueprint=bp, prompts=prompts, models=lines, missing_collections=missing, temperatures=temperatures,
        systems=bp.systems, variants=variants, judges=judge_lines, judges_are_default=judges_default,
        generation_calls=sum(m.calls for m in lines), judge_calls=judge_calls, prices_known=bool(prices),
        variant_total=variant_total,
    )


def _conversation_chars(view: PromptView, bp: SpecBlueprint) -> int:
    system = view.system or ""
    if bp.systems:
        system = max((s or "" for s in bp.systems), key=len)
    return len(system) + sum(len(m.content or "") for m in view.messages)


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


# --------------------------------------------------------------------------------------
# Diffs between revisions


@dataclass
class DiffRow:
    kind: str  # "same", "add", "del", "gap"
    old: int | None
    new: int | None
    text: str


def diff_rows(old_text: str, new_text: str, context: int = 3) -> list[DiffRow]:
    """A unified diff as rows with both line numbers; unchanged runs longer than the context fold to a gap."""
    old, new = old_text.splitlines(), new_text.splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for index, group in enumerate(matcher.get_grouped_opcodes(context)):
        first = group[0]
        if index > 0 or first[1] > 0 or first[3] > 0:
            rows.append(DiffRow("gap", first[1] + 1, first[3] + 1, ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows.extend(DiffRow("same", i + 1, j1 + k + 1, old[i]) for k, i in enumerate(range(i1, i2)))
                continue
            if tag in ("replace", "delete"):
                rows.extend(DiffRow("del", i + 1, None, old[i]) for i in range(i1, i2))
            if tag in ("replace", "insert"):
                rows.extend(DiffRow("add", None, j + 1, new[j]) for j in range(j1, j2))
    return rows


# --------------------------------------------------------------------------------------
# Importing


@dataclass
class ImportItem:
    name: str  # the file's path as given (relative to the imported folder), or "pasted text"
    slug: str | None
    status: str  # "created", "updated", "unchanged", "refused"
    message: str = ""
    blueprint: Blueprint | None = None
    revision: BlueprintRevision | None = None

    @property
    def is_valid(self) -> bool:
        return bool(self.revision and self.revision.is_valid)


@dataclass
class ImportOutcome:
    items: list[ImportItem] = field(default_factory=list)
    collections: list[tuple[str, str]] = field(default_factory=list)  # (name, "created"/"updated"/"unchanged"/error)

    def count(self, status: str) -> int:
        return sum(1 for item in self.items if item.status == status)

    @property
    def refused(self) -> list[ImportItem]:
        return [item for item in self.items if item.status == "refused"]

    @property
    def drafts(self) -> list[ImportItem]:
        return [item for item in self.items if item.revision is not None and not item.revision.is_valid]

    @property
    def summary(self) -> str:
        """"3 files: 2 new, 1 updated, 0 unchanged, 0 refused (1 saved as a draft with errors)"."""
        n = len(self.items)
        text = (f"{n} file{'s' if n != 1 else ''}: {self.count('created')} new, {self.count('updated')} updated, "
                f"{self.count('unchanged')} unchanged, {self.count('refused')} refused")
        if self.drafts:
            text += f" ({len(self.drafts)} {'is a draft' if len(self.drafts) == 1 else 'are drafts'} with errors)"
        if self.collections:
            text += f"; {len(self.collections)} model collection{'s' if len(self.collections) != 1 else ''}"
        return text + "."


def import_files(files: Iterable[tuple[str, str, dict]], *, via: str, folder_name: str = "") -> ImportOutcome:
    """Import ``(path, text, companion files)`` triples; each path gives its blueprint's id.

    The id is the path's, as upstream (``sub/name.yml`` -> ``sub__name``, a leading
    ``blueprints/`` dropped). Two files that would get the same id are both refused.
    A file whose blueprint exists makes a new revision when its text changed.
    """
    outcome = ImportOutcome()
    files = _store_collection_files(list(files), outcome)
    files = _attach_companions(files, outcome)
    slugs = {path: _import_id(path, text, folder_name) for path, text, _files in files}
    by_slug: dict[str, list[str]] = {}
    for path, slug in slugs.items():
        by_slug.setdefault(slug, []).append(path)
    lookup = ModelCollection.lookup()
    for path, text, companions in files:
        slug = slugs[path]
        clash = by_slug[slug]
        if len(clash) > 1:
            others = " and ".join(f"'{p}'" for p in clash)
            outcome.items.append(ImportItem(path, slug, "refused",
                                            f"{others} would both get the id '{slug}'; rename one of them"))
            continue
        try:
            validate_blueprint_id(slug)
        except Exception:
            outcome.items.append(ImportItem(path, slug, "refused",
                                            f"'{path}' would get the id '{slug}', which is not usable; rename the file "
                                            "to letters, digits, '-', '_' and '.'"))
            continue
        taken = _taken_by_another_suite(slug, path)
        if taken:
            outcome.items.append(ImportItem(path, slug, "refused", taken))
            continue
        outcome.items.append(_import_one(path, slug, text, companions, via=via, lookup=lookup))
    return outcome


# A suite file of these names says nothing about which suite it is (AgentV's EVAL.yaml):
# its id comes from the suite's `name`, else its folder.
GENERIC_SUITE_NAMES = frozenset({"eval", "evals", "suite", "tests", "dataset", "promptfooconfig"})


def _import_id(path: str, text: str, folder_name: str = "") -> str:
    """The id a file is imported under: from its path, as upstream; a generically named suite file
    (AgentV's ``EVAL.yaml``) by the suite's ``name``, else its folder (``folder_name``: the imported
    folder's own name, for a suite at its top)."""
    from blueprints.spec.dialects import WEVAL, detect_dialect_of
    from blueprints.spec.parse import detect_format
    from blueprints.spec.source import SourceError, load

    slug = blueprint_id_from_path(path)
    if PurePosixPath(path).stem.lower() not in GENERIC_SUITE_NAMES:
        return slug
    try:
        documents = load(text, detect_format(text, path), settings.EVALSITE_LIMITS).documents
    except SourceError:
        return slug  # the reader explains the text
    if detect_dialect_of(documents) == WEVAL:
        return slug
    first = documents[0] if documents else None
    name = first.get("name") if isinstance(first, dict) else None
    if isinstance(name, str) and slugify_id(name):
        return slugify_id(name)
    folder = PurePosixPath(path).parent
    if folder.parts:
        return blueprint_id_from_path(folder.as_posix())
    return slugify_id(folder_name) or slug


def slugify_id(text: str) -> str:
    from django.utils.text import slugify

    return slugify(text)[:100]


def _taken_by_another_suite(slug: str, path: str) -> str:
    """Why ``path`` may not become a new revision of the blueprint ``slug``: it was imported from another file."""
    existing = Blueprint.objects.filter(slug=slug).select_related("current_revision").first()
    if existing is None or existing.current_revision is None:
        return ""
    before = (existing.current_revision.import_report or {}).get("path")
    if not before or before == path:
        return ""
    return (f"the id '{slug}' belongs to the suite imported from '{before}', and '{path}' is another file: "
            f"give this suite its own `name:`, or rename or delete '{slug}' first (its page, Settings)")


def _store_collection_files(files: list[tuple[str, str, dict]], outcome: ImportOutcome) -> list:
    """Model collection files among the imported ones (``models/CORE.json``: a JSON list of model ids) are stored
    as collections, before the blueprints that name them; the other files are returned."""
    rest = []
    for path, text, extra in files:
        pure = PurePosixPath(path)
        if pure.suffix.lower() != ".json" or not (pure.parent.name == "models" or is_collection_name(pure.stem)):
            rest.append((path, text, extra))
            continue
        try:
            data = json.loads(text)
        except ValueError:
            rest.append((path, text, extra))
            continue
        if not isinstance(data, list) or not all(isinstance(m, str) for m in data):
            rest.append((path, text, extra))  # not a collection: let the blueprint reader explain it
            continue
        name = pure.stem
        if not is_collection_name(name):
            outcome.collections.append((name, f"skipped: '{pure.name}' is not an upper-case collection name"))
            continue
        _, changed = ModelCollection.store(name, [m for m in data if m.strip()], source=path)
        outcome.collections.append((name, "stored" if changed else "unchanged"))
    return rest


def _attach_companions(files: list[tuple[str, str, dict]], outcome: ImportOutcome) -> list[tuple[str, str, dict]]:
    """Files imported together: AI Eval prompt files and AgentV test-row files go with the suites, not alone.

    Each such file is offered to every suite of the same import, keyed by its path relative to the suite's folder
    (the suites' importers find what they name); it is listed as "attached" in the outcome.
    """
    from blueprints.spec.dialects import companion_kind

    suites, companions = [], []
    for path, text, extra in files:
        (companions if companion_kind(text, path) else suites).append((path, text, extra))
    if not companions:
        return files
    out = []
    for path, text, extra in suites:
        folder = PurePosixPath(path).parent
        attached = dict(extra)
        for cpath, ctext, _ in companions:
            relative = PurePosixPath(_relpath(cpath, str(folder)))
            attached.setdefault(relative.as_posix(), ctext)
        out.append((path, text, attached))
    for cpath, _, _ in companions:
        outcome.items.append(ImportItem(cpath, None, "attached", "a companion file (a prompt file or test rows); "
                                                                 "kept with the suites imported beside it"))
    return out


def _relpath(path: str, start: str) -> str:
    import posixpath

    return posixpath.relpath(posixpath.normpath(path), posixpath.normpath(start or "."))


def _import_one(path, slug, text, companions, *, via, lookup) -> ImportItem:
    with transaction.atomic():
        blueprint, created = Blueprint.objects.get_or_create(slug=slug, defaults={"title": ""})
        revision, changed = blueprint.save_revision(
            text, files=companions, collections=lookup, summary=f"Imported from {path}",
            import_report={"via": via, "path": path},
        )
    if created:
        status = "created"
    else:
        status = "updated" if changed else "unchanged"
    message = ""
    if not revision.is_valid:
        message = f"saved as a draft: {revision.error_count} error{'s' if revision.error_count != 1 else ''}"
    else:
        missing = _missing_collections(revision, lookup)
        if missing:
            names = ", ".join(missing)
            message = (f"names the model collection{'s' if len(missing) > 1 else ''} {names}, which evalsite does not "
                       f"have: import {' and '.join(f'models/{n}.json' for n in missing)} with it, or add "
                       f"{'them' if len(missing) > 1 else 'it'} on the Collections page; until then it cannot run")
    return ImportItem(path, slug, status, message, blueprint, revision)


def _missing_collections(revision, lookup) -> list[str]:
    result = getattr(revision, "parsed", None) or revision.parse(collections=lookup)
    if result.blueprint is None or not result.blueprint.models_given:
        return []
    _, missing = resolve_models(result.blueprint.models, lookup)
    return list(missing)


def create_from_text(text: str, *, title_hint: str = "", slug: str = "", summary: str = "Created in evalsite"
                     ) -> tuple[Blueprint, BlueprintRevision]:
    """A new blueprint made in the browser: its id from the given one, else from its title."""
    lookup = ModelCollection.lookup()
    result = parse_any(text, collections=lookup, limits=settings.EVALSITE_LIMITS)
    title = (result.blueprint.title if result.blueprint and result.blueprint.title else None) \
        or title_from_text(text) or title_hint or "Untitled blueprint"
    with transaction.atomic():
        blueprint = Blueprint.objects.create(slug=slug or Blueprint.unique_slug_for(title), title=title[:500])
        revision, _ = blueprint.save_revision(text, collections=lookup, summary=summary)
    return blueprint, revision


def import_folder(folder: Path, *, via: str = "import_blueprints") -> ImportOutcome:
    """A blueprint repository: its `models/*.json` as collections, then every blueprint file below it."""
    folder = folder.resolve()
    outcome = ImportOutcome()
    outcome.collections = import_collections(folder / "models")
    files = []
    for path in iter_blueprint_files([folder]):
        relative = path.relative_to(folder).as_posix()
        if not path.resolve().is_relative_to(folder):
            outcome.items.append(ImportItem(relative, None, "refused", f"'{relative}' is a link to a file outside "
                                            f"the folder being imported; copy the file in instead"))
            continue
        try:
            text = read_text(path)
        except (OSError, UnicodeDecodeError) as exc:
            outcome.items.append(ImportItem(relative, None, "refused", f"cannot read '{relative}': {exc}"))
            continue
        files.append((relative, text, companion_files(path, text, folder)))
    outcome.items.extend(import_files(files, via=via, folder_name=folder.name).items)
    return outcome


def import_collections(models_dir: Path) -> list[tuple[str, str]]:
    results = []
    if not models_dir.is_dir():
        return results
    for path in sorted(models_dir.glob("*.json")):
        name = path.stem
        if not is_collection_name(name):
            results.append((name, f"skipped: '{path.name}' is not an upper-case collection name"))
            continue
        try:
            model_ids = read_collection_file(path)
        except CollectionError as exc:
            results.append((name, f"skipped: {exc}"))
            continue
        _, changed = ModelCollection.store(name, model_ids, source=str(path))
        results.append((name, "stored" if changed else "unchanged"))
    return results


def companion_files(path: Path, text: str, root: Path | None = None) -> dict:
    """The files a blueprint or suite names, kept with its revision: a blueprint's fixtures file, an AgentV
    suite's tests files, judge prompts and scripts, an AI Eval suite's prompt file (blueprints.spec.companions).

    Only files inside ``root`` (the imported folder; by default the file's own folder, or for an AI Eval suite
    in ``tests/`` the project folder above it) are read.
    """
    from blueprints.spec.companions import collect_companions

    return collect_companions(path, text, root)


# --------------------------------------------------------------------------------------
# Example blueprints: the library's first contents


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES_DIR.iterdir() if p.suffix in (".yml", ".yaml", ".json"))


def load_examples() -> list[Blueprint]:
    """Add each example blueprint whose id is free. Safe to call again: existing ones are left alone."""
    lookup = ModelCollection.lookup()
    added = []
    for path in example_files():
        slug = blueprint_id_from_path(path.name)
        if Blueprint.objects.filter(slug=slug).exists():
            continue
        with transaction.atomic():
            blueprint = Blueprint.objects.create(slug=slug, title="")
            blueprint.save_revision(read_text(path), collections=lookup, summary="Example blueprint",
                                    import_report={"via": "examples", "path": path.name})
        added.append(blueprint)
    return added


