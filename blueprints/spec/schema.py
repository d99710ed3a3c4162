"""The normalised blueprint: what every other part of evalsite reads.

The parser (``parse.py``) accepts every spelling the format allows and reports
problems with their places; what comes out is this one shape. Field names are
Python's; ``to_upstream()`` gives the upstream's camelCase JSON shape (the
shape ``validate_blueprint --json`` prints and the conformance data uses).

Points keep where they were written (``path``, ``line``, ``column``) so that a
result page or an editor can point back at the source.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

RenderAs = Literal["markdown", "html", "plaintext"]
RENDER_AS_VALUES: tuple[str, ...] = ("markdown", "html", "plaintext")


class _Model(BaseModel):
    # defer_build: a model's validator is built when one is first validated, not at import (the parser makes most
    # objects with model_construct): 0.1-0.2 s of every process's start-up.
    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True, defer_build=True)


_IMMUTABLE = (type(None), bool, int, float, str)  # defaults model_construct uses as they are (no copy)
_PLANS: dict[type, tuple] = {}  # model class -> how construct() fills it (_plan)
_new = object.__new__  # as model_construct's cls.__new__ (no model defines its own)


def _plan(cls: type[BaseModel]) -> tuple:
    """Every field in order (the immutable defaults filled in), the fields made by a factory, the required ones,
    and all their names."""
    template: dict = {}
    factories, required = [], []
    for name, info in cls.__pydantic_fields__.items():
        if info.alias is not None or info.validation_alias is not None:
            raise TypeError(f"{cls.__name__}.{name}: construct() does not read aliases")
        template[name] = None
        if info.is_required():
            required.append(name)
        elif info.default_factory is not None:
            # list and dict take no data; asking (their signatures) costs a process 16 ms the first time
            if info.default_factory not in (list, dict) and info.default_factory_takes_validated_data:
                raise TypeError(f"{cls.__name__}.{name}: a default factory that takes data")
            factories.append((name, info.default_factory))
        elif isinstance(info.default, _IMMUTABLE):
            template[name] = info.default
        else:
            raise TypeError(f"{cls.__name__}.{name}: a mutable default")
    if (cls.__pydantic_post_init__ or cls.model_config.get("extra") == "allow" or cls.__pydantic_root_model__
            or cls.__new__ is not object.__new__):
        raise TypeError(f"{cls.__name__}: construct() makes plain models only")
    plan = (template, tuple(factories), tuple(required), frozenset(template))
    _PLANS[cls] = plan
    return plan


def construct(cls, /, **values):
    """``cls.model_construct(**values)`` (trusted values, no validation), the same object made several times
    faster: the parser makes a few for every prompt and point. Fields in their order, the missing ones from
    their defaults (a required one left out), the given ones marked set."""
    template, factories, required, names = _PLANS.get(cls) or _plan(cls)
    data = template.copy()  # the fields' order, which updating keeps
    data.update(values)
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    for name in required:
        if name not in values:
            del data[name]
    given = set(values)
    if not names.issuperset(given):  # names of no field: model_construct ignores them
        given &= names
        for name in values.keys() - names:
            del data[name]
    model = _new(cls)
    _set = object.__setattr__
    _set(model, "__dict__", data)
    _set(model, "__pydantic_fields_set__", given)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


class Origin(_Model):
    """Where something was written: the author's path and the 1-based position."""

    path: str = ""
    line: int | None = None
    column: int | None = None


class Message(_Model):
    role: Literal["system", "user", "assistant"]
    content: str | None  # None: an assistant turn to be generated

    @property
    def to_generate(self) -> bool:
        return self.role == "assistant" and self.content is None


class ScoreBand(_Model):
    """One band of an analytic rubric: a judge's whole score from ``low`` to ``high`` (0-10) means ``text``."""

    low: int
    high: int
    text: str


class Verdicts(_Model):
    """The pass/fail layer: a score at or above ``pass_at`` passes, at or above ``borderline_at`` is borderline.

    ``threshold: x`` in a blueprint is ``Verdicts(pass_at=x, borderline_at=None)``: pass or fail only.
    """

    pass_at: float = 0.8
    borderline_at: float | None = 0.6


TrialAggregation = Literal["mean", "best", "pass_at_k"]
TRIAL_AGGREGATIONS: tuple[str, ...] = ("mean", "best", "pass_at_k")


class Check(_Model):
    """A named group of a prompt's points that passes or fails on its own.

    Its score is the weighted mean of its points (an AgentV evaluator, an AI Eval
    assertion, or one Weval point with ``required`` or ``min_score``). ``gate``: a
    score below it makes the whole response score 0 and fail; ``min_score``: a
    score below it fails the response's verdict (the score stays).
    """

    id: str
    label: str
    kind: str = ""  # what it came from: "contains", "rubrics", "tool_trajectory", "point"...
    gate: float | None = None
    min_score: float | None = None


PointSees = Literal["text", "text+tool_calls"]
TEXT_AND_TOOL_CALLS: PointSees = "text+tool_calls"


class Point(_Model):
    """One rubric point: judged text, or a deterministic function call."""

    text: str | None = None
    fn: str | None = None  # canonical name, no `$`
    fn_args: Any = None
    has_args: bool = False  # distinguishes "no argument" from an explicit null
    multiplier: float = 1.0
    citation: Any = None
    path_id: str | None = None  # None: required; "path_2" or "not_path_0": an alternative path
    inverted: bool = False  # from should_not
    origin: Origin = Field(default_factory=Origin)
    # Extensions (docs/blueprints.md, "Extension keys"); None changes nothing.
    check_id: str | None = None  # the Check this point belongs to
    min_score: float | None = None  # this point alone below it fails the verdict (the score stays)
    score_ranges: list[ScoreBand] | None = None  # judged on 0-10 bands instead of the classification scale
    label: str | None = None  # a short name shown beside the point (an AgentV rubric id, say)
    fn_as_written: str | None = None  # the upstream parser's spelling when not ``fn`` (`imatch`): for id hashes
    critical: bool = False  # `critical: true`: a deal-breaker; its failure rate gets a bound (runs/engine/bounds.py)
    # What a point is scored against: the response text, or (set by the AI Eval importer only, never a blueprint key)
    # the text followed by a Markdown rendering of the response's tool calls, as AI Eval's `contains`, `regex` and
    # `llm_judge` see it (runs/engine/points/tool_trace.text_with_tool_calls). Not in the upstream's shape.
    sees: PointSees = "text"

    @property
    def kind(self) -> Literal["function", "judged"]:
        return "function" if self.fn else "judged"

    def to_upstream(self, *, for_hash: bool = False) -> dict:
        out: dict[str, Any] = {}
        if self.fn:
            out["fn"] = (self.fn_as_written or self.fn) if for_hash else self.fn
            if self.has_args:
                out["fnArgs"] = self.fn_args
        else:
            out["text"] = self.text
        out["multiplier"] = self.multiplier
        if self.citation is not None:
            out["citation"] = self.citation
        if self.critical and not for_hash:  # ours: kept by an export, left out of the upstream's prompt hash
            out["critical"] = True
        return out


PointItem = Union[Point, list[Point]]


def block_to_upstream(block: list[PointItem], *, for_hash: bool = False) -> list:
    return [[p.to_upstream(for_hash=for_hash) for p in item] if isinstance(item, list)
            else item.to_upstream(for_hash=for_hash) for item in block]


def _count_points(block) -> int:
    """How many points ``iter_points(block)`` gives."""
    count = 0
    for item in block:
        count += len(item) if isinstance(item, list) else 1
    return count


def iter_points(block: list[PointItem]):
    for item in block:
        if isinstance(item, list):
            yield from item
        else:
            yield item


class SimulatedUser(_Model):
    """A prompt's simulated user (our extension, docs/blueprints.md "Simulated users"): a user model that talks
    with the candidate until the stop rule is met or ``max_turns`` assistant turns were generated."""

    model: str  # the user model's id (provider:model)
    persona: str | None = None
    goal: str
    first_message: str | None = None  # None: the prompt's authored messages open the conversation
    stop_phrase: str | None = None  # the user model says it (alone or in its message) when its goal is met
    stop_point: Point | None = None  # a function point, checked after each assistant turn
    max_turns: int = 6  # assistant turns at most, authored `assistant: null` turns included


class Prompt(_Model):
    id: str
    id_was_generated: bool = False
    description: str | None = None
    messages: list[Message]
    ideal_response: str | None = None
    system: str | None = None
    system_set: bool = False  # `system: null` on a prompt is meaningful (no system prompt)
    citation: Any = None
    weight: float | None = None
    render_as: RenderAs = "markdown"
    temperature: float | None = None
    no_cache: bool | None = None
    required_tools: list[str] | None = None
    prohibited_tools: list[str] | None = None
    max_calls: int | None = None
    tags: list[str] | None = None
    points: list[PointItem] = Field(default_factory=list)
    should_not: list[PointItem] | None = None
    origin: Origin = Field(default_factory=Origin)
    # Extensions: the pass/fail layer and repeats (header values already applied).
    verdicts: Verdicts | None = None
    checks: list[Check] = Field(default_factory=list)
    trials: int | None = None
    trial_aggregation: TrialAggregation | None = None
    trial_threshold: float | None = None  # pass_at_k: the cell passes when pass@k reaches it
    simulated_user: SimulatedUser | None = None
    # A prompt's own tools and tool use, in the header's shapes (`tools`, `toolUse`): set by importers whose suites
    # give each case its mocks (AI Eval's `tool_mocks`); None: the blueprint's.
    tools: list[dict[str, Any]] | None = None
    tool_use: dict[str, Any] | None = None

    def all_points(self) -> list[Point]:
        return [*iter_points(self.points), *iter_points(self.should_not or [])]

    @property
    def has_verdicts(self) -> bool:
        """Whether the pass/fail layer applies: verdict bands, or a check with a gate or a minimum."""
        return (self.verdicts is not None
                or any(c.gate is not None or c.min_score is not None for c in self.checks)
                or any(p.min_score is not None for p in self.all_points()))

    def check(self, check_id: str | None) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None) if check_id else None

    def to_upstream(self, *, include_id: bool = True, for_hash: bool = False) -> dict:
        """Weval's normalised prompt. ``for_hash``: exactly what the upstream hashes for a prompt without an
        id: no ``id``, no ``tags`` (its parser drops a prompt's tags), function names as its parser spells them."""
        out: dict[str, Any] = {}
        if include_id:
            out["id"] = self.id
        if self.description is not None:
            out["description"] = self.description
        out["messages"] = [m.model_dump() for m in self.messages]
        if self.ideal_response is not None:
            out["idealResponse"] = self.ideal_response
        if self.system_set:
            out["system"] = self.system
        if self.citation is not None:
            out["citation"] = self.citation
        if self.weight is not None:
            out["weight"] = self.weight
        out["render_as"] = self.render_as
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.no_cache is not None:
            out["noCache"] = self.no_cache
        if self.required_tools is not None:
            out["requiredTools"] = self.required_tools
        if self.prohibited_tools is not None:
            out["prohibitedTools"] = self.prohibited_tools
        if self.max_calls is not None:
            out["maxCalls"] = self.max_calls
        if self.tags is not None and not for_hash:
            out["tags"] = self.tags
        if self.points:  # the upstream has no `points` key for a prompt without them (its id hash depends on it)
            out["points"] = block_to_upstream(self.points, for_hash=for_hash)
        if self.should_not is not None:
            out["should_not"] = block_to_upstream(self.should_not, for_hash=for_hash)
        return out


class Author(_Model):
    name: str
    url: str | None = None
    image_url: str | None = None


class Reference(_Model):
    title: str
    url: str | None = None


class CustomModel(_Model):
    id: str
    url: str
    model_name: str = Field(alias="modelName")
    inherit: str
    format: Literal["chat", "completions"] | None = None
    prompt_format: Literal["conversational", "raw"] | None = Field(None, alias="promptFormat")
    headers: dict[str, str] | None = None
    parameters: dict[str, Any] | None = None
    parameter_mapping: dict[str, str] | None = Field(None, alias="parameterMapping")
    extra: dict[str, Any] = Field(default_factory=dict)  # reasoning options and the like, kept as written

    def to_upstream(self) -> dict:
        out = self.model_dump(by_alias=True, exclude_none=True, exclude={"extra"})
        out.update(self.extra)
        return out


class Judge(_Model):
    id: str | None = None
    model: str
    approach: Literal["standard", "prompt-aware", "holistic"] = "holistic"


class CoverageConfig(_Model):
    judges: list[Judge] | None = None
    use_experimental_scale: bool = False


class Blueprint(_Model):
    id: str | None = None  # as written in the file (deprecated upstream; the path decides)
    derived_id: str | None = None  # from the file's path, when known
    title: str | None = None
    description: str | None = None
    author: Union[str, Author, None] = None
    references: list[Reference] | None = None
    tags: list[str] = Field(default_factory=list)
    models: list[Union[str, CustomModel]] = Field(default_factory=list)
    models_given: bool = False
    system: str | None = None
    systems: list[str | None] | None = None
    temperature: float | None = None
    temperatures: list[float] | None = None
    point_defs: dict[str, Any] | None = None
    render_as: RenderAs | None = None
    no_cache: bool | None = None
    coverage: CoverageConfig = Field(default_factory=CoverageConfig)
    evaluation_config: dict[str, Any] | None = None  # as written, for the export
    embedding_model: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_use: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    external_services: dict[str, Any] | None = None
    concurrency: int | None = None
    fixtures: Any = None
    prompts: list[Prompt] = Field(default_factory=list)
    # Extensions: header defaults for every prompt (each prompt carries the resolved values).
    verdicts: Verdicts | None = None
    trials: int | None = None
    trial_aggregation: TrialAggregation | None = None
    trial_threshold: float | None = None

    @property
    def custom_models(self) -> dict[str, CustomModel]:
        """The custom models its `models` list defines, by id."""
        return {m.id: m for m in self.models if isinstance(m, CustomModel)}

    @property
    def point_count(self) -> int:
        """``len(p.all_points())`` summed over the prompts, without making the lists."""
        return sum(_count_points(p.points) + _count_points(p.should_not or ()) for p in self.prompts)

    def to_upstream(self) -> dict:
        out: dict[str, Any] = {}
        if self.id is not None:
            out["id"] = self.id
        out["title"] = self.title if self.title is not None else self.derived_id
        if self.description is not None:
            out["description"] = self.description
        if self.author is not None:
            out["author"] = self.author if isinstance(self.author, str) else self.author.model_dump(exclude_none=True)
        if self.references is not None:
            out["references"] = [r.model_dump(exclude_none=True) for r in self.references]
        out["tags"] = self.tags
        out["models"] = [m if isinstance(m, str) else m.to_upstream() for m in self.models]
        if self.system is not None:
            out["system"] = self.system
        optional = {
            "systems": self.systems,
            "temperature": self.temperature,
            "temperatures": self.temperatures,
            "point_defs": self.point_defs,
            "render_as": self.render_as,
            "noCache": self.no_cache,
            "evaluationConfig": self.evaluation_config,
            "embeddingModel": self.embedding_model,
            "tools": self.tools,
            "toolUse": self.tool_use,
            "context": self.context,
            "externalServices": self.external_services,
            "concurrency": self.concurrency,
            "fixtures": self.fixtures,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        out["prompts"] = [p.to_upstream() for p in self.prompts]
        return out
