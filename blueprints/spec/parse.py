# Over 500 lines: the whole Weval reader in one class; splitting it into header, prompt and point readers is open (issue 13, item 5).
"""Blueprint text -> normalised :class:`Blueprint`, with every problem found at once.

This follows the upstream parser's structure detection, aliases and point forms
(reference section 1) with the deviations DESIGN.md lists. Unlike the upstream,
it never stops at the first problem: it collects errors and warnings, each with
the author's path, line and column, and a separate hint where a fix is known.

The walk is plain code over plain dicts and lists: each ``_read_*`` method takes
the raw value, the container that holds it (for positions) and the author's path.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import yaml

from . import functions
from .diagnostics import Diagnostic, format_path
from .functions import is_number
from .extensions import PASS_FAIL_KEYS, POINT_EXTENSION_KEYS, ExtensionReader
from .ids import blueprint_id_for_file, normalize_tags, prompt_hash_id
from .jsregex import RegexError, compile_js
from .limits import DEFAULT_LIMITS, Limits
from .collections import resolve_models
from .model_ids import is_collection_name, normalize_model_entry
from .schema import (
    RENDER_AS_VALUES,
    Author,
    Blueprint,
    CoverageConfig,
    CustomModel,
    Judge,
    Message,
    Origin,
    Point,
    Prompt,
    Reference,
)
from .source import KEY, Loaded, SourceError, load

# Keys that make a document a prompt rather than a header. The upstream's list
# leaves out `promptText`, `should_not`, `expects` and `expectations`, so a
# stream starting with such a prompt was read as a header; we include them.
PROMPT_DEFINING_KEYS = frozenset(
    {"prompt", "promptText", "messages", "should", "should_not", "ideal", "idealResponse",
     "points", "expect", "expects", "expectations"}
)

HEADER_KEYS = frozenset(
    {"id", "configId", "title", "configTitle", "description", "author", "reference", "references",
     "citation", "citations", "tags", "models", "system", "systemPrompt", "systems", "temperature",
     "temperatures", "point_defs", "defs", "render_as", "noCache", "evaluationConfig", "embeddingModel",
     "tools", "toolUse", "context", "externalServices", "concurrency", "fixtures", "prompts"}
) | frozenset(PASS_FAIL_KEYS)

PROMPT_KEYS = frozenset(
    {"id", "description", "prompt", "promptText", "messages", "ideal", "idealResponse", "system",
     "citation", "reference", "weight", "importance", "multiplier", "render_as", "temperature",
     "noCache", "requiredTools", "prohibitedTools", "maxCalls", "should", "points", "expect",
     "expects", "expectations", "should_not", "tags"}
) | frozenset(PASS_FAIL_KEYS)
POINT_ALIASES = ("should", "points", "expect", "expects", "expectations")
POINT_OBJECT_KEYS = frozenset({"text", "point", "fn", "fnArgs", "arg", "weight", "multiplier", "citation",
                               *POINT_EXTENSION_KEYS})
FUNCTION_OBJECT_KEYS = frozenset({"weight", "multiplier", "citation", *POINT_EXTENSION_KEYS})
SHORTHAND_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "ai": "assistant"}
JUDGE_APPROACHES = ("standard", "prompt-aware", "holistic")
HTTP_METHODS = ("GET", "POST", "PUT")
CUSTOM_MODEL_FIELDS = frozenset(
    {"id", "url", "modelName", "inherit", "format", "promptFormat", "headers", "parameters", "parameterMapping"}
)
INHERITABLE = ("openai", "anthropic", "google", "mistral", "together", "xai", "openrouter")

MAX_MESSAGE_CHARS = 500

_QUOTED_CALL = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$", re.S)

CollectionLookup = Callable[[str], "list[str] | None"]


@dataclass
class ParseResult:
    blueprint: Blueprint | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    fmt: str = "yaml"
    # Suites in other formats (blueprints.spec.dialects.parse_any): where the text came from and
    # what the import did with each test; `extras` keeps every field that has no place in a blueprint.
    dialect: str = "weval"
    import_report: dict | None = None
    extras: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted(self.errors + self.warnings, key=lambda d: (d.line or 0, d.column or 0))


def detect_format(text: str, path: str | None = None) -> str:
    if path and str(path).lower().endswith(".json"):
        return "json"
    if path and str(path).lower().endswith((".yml", ".yaml")):
        return "yaml"
    return "json" if text.lstrip().startswith("{") else "yaml"


def parse_blueprint(
    text: str,
    *,
    path: str | None = None,
    fmt: str | None = None,
    blueprint_id: str | None = None,
    collections: CollectionLookup | None = None,
    call_hosts: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
) -> ParseResult:
    """Parse and validate blueprint text. Never raises for bad input.

    ``collections`` resolves an upper-case model collection name (``CORE``) to its
    model ids, or returns None when it does not know it. ``call_hosts`` are the
    hosts ``$call`` may reach (the operator's ``EVALSITE_CALL_HOSTS``). ``limits`` bound the
    text, its nesting, its values with aliases expanded and its model variants.
    """
    fmt = fmt or detect_format(text, path)
    try:
        loaded = load(text, fmt, limits)
    except SourceError as exc:
        return ParseResult(None, [source_diagnostic(exc)], [], fmt)
    return parse_loaded(loaded, path=path, blueprint_id=blueprint_id, collections=collections, call_hosts=call_hosts,
                        limits=limits)


def source_diagnostic(exc: SourceError) -> Diagnostic:
    return Diagnostic("error", exc.message, exc.line, exc.column, "", exc.hint, exc.code)


def parse_loaded(loaded: Loaded, *, path: str | None = None, blueprint_id: str | None = None,
                 collections: CollectionLookup | None = None, call_hosts: Iterable[str] = (),
                 limits: Limits = DEFAULT_LIMITS) -> ParseResult:
    """``parse_blueprint`` for text already loaded (``parse_any`` loads once to detect the dialect)."""
    fmt = loaded.fmt
    derived = blueprint_id or (blueprint_id_for_file(path) if path else None)
    reader = _Reader(loaded, derived, collections, frozenset(call_hosts), limits)
    blueprint = reader.read()
    errors = [d for d in reader.diagnostics if d.is_error]
    warnings = [d for d in reader.diagnostics if not d.is_error]
    return ParseResult(blueprint if not errors else None, errors, warnings, fmt)


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    match = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.75)
    return match[0] if match else None


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Reader(ExtensionReader):
    def __init__(self, loaded: Loaded, derived_id, collections, call_hosts, limits: Limits = DEFAULT_LIMITS):
        self.loaded = loaded
        self.limits = limits
        self.locator = loaded.locator
        self.json = loaded.fmt == "json"
        self.derived_id = derived_id
        self.collections = collections
        self.call_hosts = call_hosts
        self.diagnostics: list[Diagnostic] = []
        self.point_defs: dict[str, Any] = {}
        self.defs_container: dict | None = None
        self.expanded_defs: dict[str, Point | None] = {}
        self.expanding: set[str] = set()
        self.header_systems: list | None = None
        self.global_render_as: str | None = None
        self.global_no_cache: bool | None = None
        self.header_pass_fail: dict | None = None
        self.current_verdicts = None
        self.current_checks: list = []

    # --- reporting -------------------------------------------------------------------

    def _position(self, container, key, at_key=False):
        if container is None:
            return self.loaded.document_starts[0] if self.loaded.document_starts else (1, 1)
        if key is None:
            pos = self.locator.where(container)
        elif at_key:
            pos = self.locator.where_key(container, key)
        else:
            pos = self.locator.where(container, key)
        return pos or self.locator.where(container) or (1, 1)

    def report(self, severity, message, container, key, path, hint=None, code="", at_key=False):
        line, column = self._position(container, key, at_key)
        if len(message) > MAX_MESSAGE_CHARS:  # a message quoting a huge value stays readable (and small)
            message = message[:MAX_MESSAGE_CHARS - 1] + "…"
        self.diagnostics.append(Diagnostic(severity, message, line, column, format_path(path), hint, code))

    def error(self, message, container, key, path, hint=None, code="", at_key=False):
        self.report("error", message, container, key, path, hint, code, at_key)

    def warn(self, message, container, key, path, hint=None, code="", at_key=False):
        self.report("warning", message, container, key, path, hint, code, at_key)

    def unknown_keys(self, mapping: dict, known: Iterable[str], path: tuple, what: str):
        known = list(known)
        for key in mapping:
            if key in known:
                continue
            suggestion = _did_you_mean(key, known)
            hint = f"did you mean `{suggestion}`?" if suggestion else f"known keys: {', '.join(sorted(known))}"
            self.warn(f"unknown key `{key}` in {what}; it is ignored", mapping, key, (*path, key),
                      hint, "unknown-key", at_key=True)

    # --- structure ---------------------------------------------------------------------

    def read(self) -> Blueprint:
        for dup in self.locator.duplicates:
            self.diagnostics.append(Diagnostic(
                "error", f"duplicate key `{dup.key}` (first written on line {dup.first_line})",
                dup.line, dup.column, dup.key,
                "remove one of them; with duplicate keys only the last value would be used",
                "duplicate-key"))
        docs = self.loaded.documents
        if not docs:
            kind = "JSON" if self.json else "YAML"
            self.error(f"{kind} blueprint is empty or contains only null documents.", None, None, (),
                       "write a header with `title` and `models`, then a list of prompts", "empty")
            return Blueprint(derived_id=self.derived_id)
        header, prompt_items = self.split_documents(docs)
        blueprint = self.read_header(header)
        prompts: list[Prompt] = []
        seen_ids: dict[str, int] = {}
        for index, (raw, container, key) in enumerate(prompt_items):
            prompt = self.read_prompt(raw, container, key, ("prompts", index))
            if prompt is None:
                continue
            if prompt.id in seen_ids:
                self.warn(f"duplicate prompt id '{prompt.id}' (also used by prompts[{seen_ids[prompt.id]}]); "
                          "results for the two would collide", raw, "id" if "id" in raw else None,
                          ("prompts", index, "id"), "give each prompt a unique `id`", "duplicate-id")
            else:
                seen_ids[prompt.id] = index
            prompts.append(prompt)
        blueprint.prompts = prompts
        self.check_collections(blueprint, header)
        self.check_variants(blueprint, header)
        return blueprint

    def split_documents(self, docs: list) -> tuple[dict, list[tuple[Any, Any, Any]]]:
        """Return the header mapping and (prompt, container, key) triples, as reference 1.1."""
        if len(docs) == 1:
            doc = docs[0]
            if isinstance(doc, list):
                return {}, [(p, doc, i) for i, p in enumerate(doc)]
            if not isinstance(doc, dict):
                self.error(f"a blueprint must be a mapping or a list of prompts, not {_type_name(doc)}",
                           None, None, (), "start with `title:` and `models:`, then `---` and a list of prompts",
                           "structure")
                return {}, []
            if "prompts" in doc:
                prompts = doc["prompts"]
                if not isinstance(prompts, list):
                    self.error(f"`prompts` must be a list of prompts, not {_type_name(prompts)}", doc, "prompts",
                               ("prompts",), "write each prompt as a `- prompt: ...` item", "type")
                    prompts = []
                return doc, [(p, prompts, i) for i, p in enumerate(prompts)]
            if not self.json and PROMPT_DEFINING_KEYS & doc.keys():
                return {}, [(doc, None, None)]
            return doc, []
        first = docs[0]
        if isinstance(first, dict) and not (PROMPT_DEFINING_KEYS & first.keys()):
            header, rest = first, docs[1:]
        else:
            header, rest = {}, docs
        items: list[tuple[Any, Any, Any]] = []
        for number, doc in enumerate(rest):
            if isinstance(doc, list):
                items.extend((p, doc, i) for i, p in enumerate(doc))
            elif isinstance(doc, dict):
                items.append((doc, None, None))
            else:
                self.error(f"YAML document {number + (2 if header else 1)} is {_type_name(doc)}; "
                           "expected a prompt or a list of prompts", None, None, (), code="structure")
        if isinstance(header, dict) and "prompts" in header:
            self.warn("`prompts` inside a header that is followed by `---` documents is ignored",
                      header, "prompts", ("prompts",), "move these prompts after the `---`", "structure",
                      at_key=True)
        return header, items

    # --- header ------------------------------------------------------------------------

    def read_header(self, h: dict) -> Blueprint:
        bp = Blueprint(derived_id=self.derived_id)
        self.unknown_keys(h, HEADER_KEYS | {"prompts"}, (), "the blueprint header")

        for key in ("id", "configId"):
            if key in h:
                bp.id = self.expect_text(h, key, (key,))
                self.warn(f"`{key}` is deprecated and ignored: a blueprint's id comes from its file path"
                          + (f" (here `{self.derived_id}`)" if self.derived_id else ""),
                          h, key, (key,), f"remove `{key}`", "deprecated", at_key=True)
                break
        for key in ("title", "configTitle"):
            if key in h:
                bp.title = self.expect_text(h, key, (key,))
                break
        if "description" in h:
            bp.description = self.expect_text(h, "description", ("description",))
        if "author" in h:
            bp.author = self.read_author(h)
        bp.references = self.read_references(h)
        if "tags" in h:
            tags = h["tags"]
            if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
                bp.tags = normalize_tags(tags)
            elif tags is not None:
                self.error("Config file has an invalid 'tags' field (must be an array of strings if provided).",
                           h, "tags", ("tags",), "write tags as a list: `tags: [safety, legal]`", "type")
        self.read_system(h, bp)
        self.read_temperatures(h, bp)
        self.read_models(h, bp)
        defs_key = "point_defs" if "point_defs" in h else ("defs" if "defs" in h else None)
        if defs_key:
            self.read_point_defs(h, defs_key, bp)
        if "render_as" in h:
            value = h["render_as"]
            if value in RENDER_AS_VALUES:
                bp.render_as = value
                self.global_render_as = value
            else:
                self.error("Invalid global 'render_as' value. Must be one of: markdown, html, plaintext.",
                           h, "render_as", ("render_as",), self._choice_hint(value, RENDER_AS_VALUES), "enum")
        if "noCache" in h:
            bp.no_cache = self.expect_bool(h, "noCache", ("noCache",))
            self.global_no_cache = bp.no_cache
        if "evaluationConfig" in h:
            self.read_evaluation_config(h, bp)
        if "embeddingModel" in h:
            bp.embedding_model = self.expect_text(h, "embeddingModel", ("embeddingModel",))
        self.read_tools(h, bp)
        if "context" in h and h["context"] is not None:
            if isinstance(h["context"], dict):
                bp.context = h["context"]
            else:
                self.error(f"`context` must be a mapping, not {_type_name(h['context'])}", h, "context",
                           ("context",), code="type")
        if "externalServices" in h:
            self.read_external_services(h, bp)
        if "concurrency" in h:
            value = h["concurrency"]
            if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                bp.concurrency = value
            else:
                self.error(f"`concurrency` must be a whole number of at least 1, not {_short(value)}", h,
                           "concurrency", ("concurrency",), code="type")
        if "fixtures" in h and h["fixtures"] is not None:
            if isinstance(h["fixtures"], (dict, str)):
                bp.fixtures = h["fixtures"]
            else:
                self.error("`fixtures` must be a mapping of canned responses or the name of a fixtures file",
                           h, "fixtures", ("fixtures",), code="type")
        self.header_pass_fail = self.read_pass_fail(h, ())
        for key, value in self.header_pass_fail.items():
            setattr(bp, key, value)
        return bp

    def expect_text(self, container, key, path, *, allow_empty=True) -> str | None:
        value = container[key]
        if isinstance(value, str):
            if not allow_empty and not value.strip():
                self.error(f"`{path[-1]}` cannot be empty", container, key, path, code="empty")
            return value
        if value is None:
            return None
        if is_number(value):
            return str(value)
        self.error(f"`{path[-1]}` must be text, not {_type_name(value)}", container, key, path,
                   "quote the value", "type")
        return None

    def expect_bool(self, container, key, path) -> bool | None:
        value = container[key]
        if isinstance(value, bool) or value is None:
            return value
        self.error(f"`{path[-1]}` must be true or false, not {_short(value)}", container, key, path, code="type")
        return None

    def _choice_hint(self, value, choices) -> str:
        suggestion = _did_you_mean(str(value), choices)
        if suggestion:
            return f"did you mean `{suggestion}`?"
        return "use one of: " + ", ".join(choices)

    def read_author(self, h):
        value = h["author"]
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            if isinstance(value.get("name"), str) and value["name"].strip():
                self.unknown_keys(value, ("name", "url", "image_url"), ("author",), "`author`")
                links = {}
                for field_name in ("url", "image_url"):
                    link = value.get(field_name)
                    if link is None or isinstance(link, str):
                        links[field_name] = link
                    else:
                        self.error(f"`author.{field_name}` must be text (a web address), not {_type_name(link)}",
                                   value, field_name, ("author", field_name), "write it as `https://...`", "author")
                return Author(name=value["name"], **links)
            self.error("Invalid 'author' object: missing 'name' string.", h, "author", ("author",),
                       "add `name: Your Name` under `author`", "author")
            return None
        self.error("Invalid 'author' field: must be a string or an object with 'name'.", h, "author",
                   ("author",), code="author")
        return None

    def read_references(self, h) -> list[Reference] | None:
        present = [k for k in ("reference", "citation", "references", "citations") if h.get(k)]
        if not present:
            return None
        key = present[0]
        if len(present) > 1:
            self.warn(f"`{key}` and `{present[1]}` both given; only `{key}` is used", h, present[1],
                      (present[1],), "merge them into one `references` list", "alias-conflict", at_key=True)
        raw = h[key]
        items = raw if isinstance(raw, list) else [raw]
        container = raw if isinstance(raw, list) else h
        out: list[Reference] = []
        for index, item in enumerate(items):
            ikey = index if isinstance(raw, list) else key
            path = (key, index) if isinstance(raw, list) else (key,)
            if isinstance(item, str):
                out.append(Reference(title=item))
            elif isinstance(item, dict):
                title = item.get("title") or item.get("name")
                if isinstance(title, str) and title:
                    url = item.get("url")
                    out.append(Reference(title=title, url=url if isinstance(url, str) else None))
                else:
                    self.error("Invalid 'reference'/'citation' object: missing 'title' or 'name' string.",
                               container, ikey, path, "give each reference a `title`", "reference")
            else:
                self.error("Invalid 'reference'/'citation' object: missing 'title' or 'name' string.",
                           container, ikey, path, "a reference is text or a mapping with `title` and `url`",
                           "reference")
        return out

    def read_system(self, h, bp):
        system = h.get("system")
        systems_key = "systems" if h.get("systems") is not None else None
        if isinstance(system, list):
            if systems_key:
                self.error("both `system` (as a list) and `systems` are given", h, "system", ("system",),
                           "keep only `systems`", "systems")
            else:
                systems_key = "system"  # a list under `system` means `systems`, as upstream
            system = None
        elif system is not None and not isinstance(system, str):
            self.error(f"`system` must be text, not {_type_name(system)}", h, "system", ("system",), code="type")
            system = None
        if not system and isinstance(h.get("systemPrompt"), str):
            system = h["systemPrompt"]
        bp.system = system or None
        if systems_key is None:
            return
        systems = h[systems_key]
        if not isinstance(systems, list) or not all(s is None or isinstance(s, str) for s in systems):
            self.error("Config file has invalid 'systems' (must be an array of strings or nulls).", h, systems_key,
                       (systems_key,), code="systems")
        elif sum(s is None for s in systems) > 1:
            self.error("'systems' can contain at most one 'null' entry.", h, systems_key, (systems_key,),
                       "use one `null` for the variant with no system prompt", "systems")
        else:
            bp.systems = systems
            self.header_systems = systems

    def read_temperatures(self, h, bp):
        if "temperature" in h and h["temperature"] is not None:
            if is_number(h["temperature"]) and math.isfinite(h["temperature"]):
                bp.temperature = float(h["temperature"])
            else:
                self.error("Config file has invalid 'temperature' (must be a number).", h, "temperature",
                           ("temperature",), "write a number from 0 to 2; .inf and .nan are not temperatures", "type")
        if "temperatures" in h and h["temperatures"] is not None:
            temps = h["temperatures"]
            if isinstance(temps, list) and all(is_number(t) and math.isfinite(t) for t in temps):
                bp.temperatures = [float(t) for t in temps]
                if bp.temperature is not None and temps:
                    self.warn("`temperature` is ignored because `temperatures` is set", h, "temperature",
                              ("temperature",), "remove one of them", "temperature", at_key=True)
            else:
                self.error("Config file has invalid 'temperatures' (must be an array of numbers).", h,
                           "temperatures", ("temperatures",), "write e.g. `temperatures: [0, 0.7]`", "type")
        for key in ("temperature", "temperatures"):
            values = [bp.temperature] if key == "temperature" else (bp.temperatures or [])
            for t in values:
                if t is not None and not 0 <= t <= 2:
                    self.warn(f"temperature {t:g} is outside 0 to 2, which most providers reject", h, key,
                              (key,), code="temperature")

    def read_models(self, h, bp):
        if "models" not in h or h["models"] is None:
            return
        raw = h["models"]
        if not isinstance(raw, list):
            self.error("The 'models' field must be an array of strings or custom model objects.", h, "models",
                       ("models",), "write each model as a list item: `- openai:gpt-4o-mini`", "models")
            return
        bp.models_given = True
        seen: set[str] = set()
        for index, entry in enumerate(raw):
            path = ("models", index)
            value, warning = normalize_model_entry(entry)
            if warning:
                self.warn(warning, raw, index, path, code="model")
            if value is None:
                continue
            if isinstance(value, dict):
                model = self.read_custom_model(value, raw, index, path)
                if model is None:
                    continue
                key = model.id
            else:
                model = key = value
                if ":" not in value and not is_collection_name(value):
                    self.warn(f"model '{value}' has no provider prefix", raw, index, path,
                              "write models as `provider:model`, e.g. `openai:gpt-4o-mini`", "model")
            if key in seen:
                self.warn(f"model '{key}' is listed twice; it will run once", raw, index, path, code="model")
                continue
            seen.add(key)
            bp.models.append(model)

    def read_custom_model(self, entry: dict, container, key, path) -> CustomModel | None:
        ok = True
        for required in ("id", "url", "modelName", "inherit"):
            if not isinstance(entry.get(required), str) or not entry[required].strip():
                self.error(f"Invalid custom model definition: '{required}' is required and must be a string.",
                           container, key, path, code="custom-model")
                ok = False
        if entry.get("format") is not None and entry["format"] not in ("chat", "completions"):
            self.error("Invalid custom model definition: 'format' must be either 'chat' or 'completions'",
                       entry, "format", (*path, "format"), code="custom-model")
            ok = False
        if entry.get("promptFormat") is not None and entry["promptFormat"] not in ("conversational", "raw"):
            self.error("Invalid custom model definition: 'promptFormat' must be either 'conversational' or 'raw'",
                       entry, "promptFormat", (*path, "promptFormat"), code="custom-model")
            ok = False
        if isinstance(entry.get("inherit"), str) and entry["inherit"] not in INHERITABLE:
            self.error(f"Invalid custom model definition: 'inherit' must be one of {', '.join(INHERITABLE)}",
                       entry, "inherit", (*path, "inherit"), self._choice_hint(entry["inherit"], INHERITABLE),
                       "custom-model")
            ok = False
        for mapping_key in ("headers", "parameters", "parameterMapping"):
            value = entry.get(mapping_key)
            if value is not None and not isinstance(value, dict):
                self.error(f"Invalid custom model definition: '{mapping_key}' must be a mapping", entry,
                           mapping_key, (*path, mapping_key), code="custom-model")
                ok = False
        for mapping_key in ("headers", "parameterMapping"):
            value = entry.get(mapping_key)
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(v, str):
                        self.error(f"Invalid custom model definition: '{mapping_key}.{k}' must be text", value, k,
                                   (*path, mapping_key, k), "quote the value", "custom-model")
                        ok = False
        parameters = entry.get("parameters")
        if isinstance(parameters, dict):
            for k, v in parameters.items():
                if is_number(v) and not math.isfinite(v):
                    self.error(f"Invalid custom model definition: 'parameters.{k}' must be a finite number",
                               parameters, k, (*path, "parameters", k), "write a number such as 1024", "custom-model")
                    ok = False
        if isinstance(entry.get("url"), str) and not re.match(r"^https?://[^\s/]+", entry["url"]):
            self.error("Invalid custom model definition: 'url' must be an http:// or https:// address", entry,
                       "url", (*path, "url"), code="custom-model")
            ok = False
        if not ok:
            return None
        extra = {k: v for k, v in entry.items() if k not in CUSTOM_MODEL_FIELDS}
        return CustomModel(
            id=entry["id"], url=entry["url"], modelName=entry["modelName"], inherit=entry["inherit"],
            format=entry.get("format"), promptFormat=entry.get("promptFormat"), headers=entry.get("headers"),
            parameters=entry.get("parameters"), parameterMapping=entry.get("parameterMapping"), extra=extra,
        )

    def read_evaluation_config(self, h, bp):
        config = h["evaluationConfig"]
        if config is None:
            return
        if not isinstance(config, dict):
            self.error("`evaluationConfig` must be a mapping", h, "evaluationConfig", ("evaluationConfig",),
                       code="type")
            return
        bp.evaluation_config = config
        for legacy in ("judgeModels", "judgeMode"):
            if legacy in config:
                self.warn(f"`{legacy}` is deprecated and has no effect", config, legacy, ("evaluationConfig", legacy),
                          "list judges under `llm-coverage: judges:` with `model` and `approach`", "deprecated",
                          at_key=True)
        self.unknown_keys(config, ("llm-coverage", "embedding", "judgeModels", "judgeMode"), ("evaluationConfig",),
                          "`evaluationConfig`")
        coverage = config.get("llm-coverage")
        if coverage is None:
            return
        path = ("evaluationConfig", "llm-coverage")
        if not isinstance(coverage, dict):
            self.error("`llm-coverage` must be a mapping", config, "llm-coverage", path, code="type")
            return
        self.unknown_keys(coverage, ("judges", "useExperimentalScale", "judgeModels", "judgeMode"), path,
                          "`llm-coverage`")
        for legacy in ("judgeModels", "judgeMode"):
            if legacy in coverage:
                self.warn(f"`{legacy}` is deprecated and has no effect", coverage, legacy, (*path, legacy),
                          "list judges under `judges:` with `model` and `approach`", "deprecated", at_key=True)
        result = CoverageConfig()
        if "useExperimentalScale" in coverage:
            result.use_experimental_scale = bool(
                self.expect_bool(coverage, "useExperimentalScale", (*path, "useExperimentalScale")))
        judges = coverage.get("judges")
        if judges is not None:
            if not isinstance(judges, list):
                self.error("`judges` must be a list", coverage, "judges", (*path, "judges"), code="type")
            else:
                result.judges = []
                for index, judge in enumerate(judges):
                    jpath = (*path, "judges", index)
                    if isinstance(judge, str):
                        judge = {"model": judge}
                    if not isinstance(judge, dict) or not isinstance(judge.get("model"), str):
                        self.error("each judge needs a `model` (`provider:model`)", judges, index, jpath,
                                   "write `- model: openai:gpt-4o-mini` with `approach: holistic`", "judge")
                        continue
                    self.unknown_keys(judge, ("id", "model", "approach"), jpath, "a judge")
                    approach = judge.get("approach", "holistic")
                    if approach not in JUDGE_APPROACHES:
                        self.error(f"judge approach must be one of {', '.join(JUDGE_APPROACHES)}", judge, "approach",
                                   (*jpath, "approach"), self._choice_hint(approach, JUDGE_APPROACHES), "judge")
                        continue
                    result.judges.append(Judge(id=judge.get("id"), model=judge["model"], approach=approach))
        bp.coverage = result

    def read_tools(self, h, bp):
        if "tools" in h and h["tools"] is not None:
            tools = h["tools"]
            if isinstance(tools, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
                bp.tools = tools
            else:
                self.error("`tools` must be a list of tools, each with a `name`", h, "tools", ("tools",),
                           "write `- name: search` with an optional `description` and `schema`", "tools")
        if "toolUse" in h and h["toolUse"] is not None:
            use = h["toolUse"]
            if not isinstance(use, dict):
                self.error("`toolUse` must be a mapping", h, "toolUse", ("toolUse",), code="tools")
                return
            self.unknown_keys(use, ("enabled", "mode", "maxSteps", "outputFormat"), ("toolUse",), "`toolUse`")
            if use.get("mode") not in (None, "trace-only"):
                self.warn(f"`toolUse.mode: {use.get('mode')}` is not supported; tools are never sent to models, so "
                          "tool use is scored from the `TOOL_CALL` lines in the response (trace-only)", use, "mode",
                          ("toolUse", "mode"), "write `mode: trace-only` and ask for TOOL_CALL lines in the prompt",
                          "tools")
            if use.get("outputFormat") not in (None, "json-line"):
                self.error("`toolUse.outputFormat` must be 'json-line'", use, "outputFormat",
                           ("toolUse", "outputFormat"), code="tools")
            steps = use.get("maxSteps")
            if steps is not None and not (is_number(steps) and steps >= 1):
                self.error("`toolUse.maxSteps` must be a number of at least 1", use, "maxSteps",
                           ("toolUse", "maxSteps"), code="tools")
            bp.tool_use = use

    def read_external_services(self, h, bp):
        services = h["externalServices"]
        if services is None:
            return
        if not isinstance(services, dict):
            self.error("`externalServices` must be a mapping of service names to settings", h, "externalServices",
                       ("externalServices",), code="type")
            return
        for name, svc in services.items():
            path = ("externalServices", name)
            if not isinstance(svc, dict) or "url" not in svc:
                self.error(f"External service '{name}' must have a 'url' field", services, name, path,
                           code="external-service")
                continue
            if not isinstance(svc["url"], str) or not re.match(r"^https?://[^\s/]+", svc["url"]):
                self.error(f"External service '{name}' has invalid URL", svc, "url", (*path, "url"),
                           code="external-service")
            if "method" in svc and svc["method"] not in HTTP_METHODS:
                self.error(f"External service '{name}' has invalid method (use GET, POST or PUT)", svc, "method",
                           (*path, "method"), code="external-service")
            if "timeout_ms" in svc and not (is_number(svc["timeout_ms"]) and svc["timeout_ms"] > 0):
                self.error(f"External service '{name}' has invalid timeout_ms (must be a positive number)", svc,
                           "timeout_ms", (*path, "timeout_ms"), code="external-service")
        bp.external_services = services

    def read_point_defs(self, h, key, bp):
        defs = h[key]
        if defs is None:
            return
        if not isinstance(defs, dict):
            self.error(f"`{key}` must be a mapping of names to JavaScript or point objects", h, key, (key,),
                       code="point-defs")
            return
        if key == "defs":
            self.warn("`defs` is the legacy name of `point_defs`", h, key, (key,), "rename it to `point_defs`",
                      "deprecated", at_key=True)
        self.point_defs = defs
        self.defs_container = defs
        self.defs_key = key
        bp.point_defs = defs
        for name, definition in defs.items():
            if not isinstance(definition, (str, dict)):
                self.error(f"point definition '{name}' must be JavaScript text or a point object, "
                           f"not {_type_name(definition)}", defs, name, (key, name), code="point-defs")

    # --- collections -------------------------------------------------------------------

    def check_variants(self, bp: Blueprint, header: dict):
        """models x temperatures x system prompts past ``Limits.max_variants`` is an error at `models`."""
        models, _ = resolve_models(bp.models if bp.models_given else [], self.collections)
        counts = (max(len(models), 1), len(bp.temperatures) if bp.temperatures else 1,
                  len(bp.systems) if bp.systems else 1)
        total = counts[0] * counts[1] * counts[2]
        limit = self.limits.max_variants
        if total <= limit:
            return
        at = "models" if isinstance(header, dict) and "models" in header else None
        self.error(f"this blueprint asks for {counts[0]:,} model{'s' if counts[0] != 1 else ''} x {counts[1]:,} "
                   f"temperature{'s' if counts[1] != 1 else ''} x {counts[2]:,} system prompt"
                   f"{'s' if counts[2] != 1 else ''} = {total:,} model variants, more than the limit of {limit:,}",
                   header if at else None, at, ("models",),
                   "list fewer models, temperatures or system prompts (or split the blueprint), or raise the limit "
                   "with the setting EVALSITE_MAX_VARIANTS", "limit", at_key=bool(at))

    def check_collections(self, bp: Blueprint, header: dict):
        names = [m for m in bp.models if isinstance(m, str) and is_collection_name(m)]
        if not bp.models_given:
            names = ["CORE"]
        for name in names:
            if self.collections is not None and self.collections(name) is not None:
                continue
            models = header.get("models") if isinstance(header.get("models"), list) else None
            if models is not None and name in models:
                container, key, path = models, models.index(name), ("models", models.index(name))
            else:
                container, key, path = None, None, ("models",)
            lead = (f"model collection '{name}' was not found" if bp.models_given else
                    "no `models` listed, so a run would use the collection 'CORE', which was not found")
            self.warn(lead + "; a run needs it resolved", container, key, path,
                      f"add `models/{name}.json` (a JSON list of model ids) beside the blueprint or in a parent "
                      "folder, import it into evalsite, or list models explicitly", "collection")

    # --- prompts -----------------------------------------------------------------------

    def read_prompt(self, raw, container, key, path) -> Prompt | None:
        if not isinstance(raw, dict):
            self.error(f"{format_path(path)} must be a mapping with `prompt` or `messages`, not {_type_name(raw)}",
                       container, key, path, "write a prompt as `- prompt: ...` followed by `should:`", "prompt")
            return None
        self.unknown_keys(raw, PROMPT_KEYS, path, "a prompt")
        errors_before = sum(d.is_error for d in self.diagnostics)
        authored_id = None
        if "id" in raw and raw["id"] is not None:
            if isinstance(raw["id"], str) and raw["id"].strip():
                authored_id = raw["id"]
            elif is_number(raw["id"]):
                authored_id = str(raw["id"])
            else:
                self.error("a prompt `id` must be non-empty text", raw, "id", (*path, "id"), code="prompt-id")
        label = authored_id or format_path(path)
        line, column = self.locator.where(raw) or self._position(container, key)
        prompt = Prompt.model_construct(
            id=authored_id or "", id_was_generated=authored_id is None, messages=[], points=[],
            origin=Origin(path=format_path(path), line=line, column=column), description=None,
            ideal_response=None, system=None, system_set=False, citation=None, weight=None,
            render_as=self.global_render_as or "markdown", temperature=None, no_cache=self.global_no_cache,
            required_tools=None, prohibited_tools=None, max_calls=None, tags=None, should_not=None,
            # Given explicitly: pydantic inspects a default factory's signature on every construct.
            checks=[],
        )
        if "description" in raw:
            prompt.description = self.expect_text(raw, "description", (*path, "description"))
        pass_fail = self.read_pass_fail(raw, path, self.header_pass_fail)
        self.current_verdicts = pass_fail["verdicts"]
        self.current_checks = []
        prompt.messages = self.read_messages(raw, path, label)
        for ideal_key in ("ideal", "idealResponse"):
            if ideal_key in raw and raw[ideal_key] is not None:
                prompt.ideal_response = self.expect_text(raw, ideal_key, (*path, ideal_key))
                break
        if "system" in raw:
            self.read_prompt_system(raw, path, label, prompt)
        for cite_key in ("citation", "reference"):
            if cite_key in raw and raw[cite_key] is not None:
                value = raw[cite_key]
                if isinstance(value, (str, dict)):
                    prompt.citation = value
                else:
                    self.error(f"`{cite_key}` must be text or a mapping with `title` and `url`", raw, cite_key,
                               (*path, cite_key), code="type")
                break
        for weight_key in ("weight", "importance", "multiplier"):
            if weight_key in raw and raw[weight_key] is not None:
                weight = raw[weight_key]
                if is_number(weight) and 0.1 <= weight <= 10:
                    prompt.weight = float(weight)
                else:
                    self.error(f"Prompt weight must be a number between 0.1 and 10. Found {_short(weight)}. "
                               f"Prompt ID: '{label}'", raw, weight_key, (*path, weight_key),
                               "use 1 for normal importance, 2 for double", "weight")
                break
        if "render_as" in raw and raw["render_as"] is not None:
            if raw["render_as"] in RENDER_AS_VALUES:
                prompt.render_as = raw["render_as"]
            else:
                self.error(f"Invalid 'render_as' value on prompt '{label}'. Must be one of: markdown, html, "
                           "plaintext.", raw, "render_as", (*path, "render_as"),
                           self._choice_hint(raw["render_as"], RENDER_AS_VALUES), "enum")
        if "temperature" in raw and raw["temperature"] is not None:
            if is_number(raw["temperature"]) and math.isfinite(raw["temperature"]):
                prompt.temperature = float(raw["temperature"])
            else:
                self.error(f"`temperature` must be a number, not {_type_name(raw['temperature'])}", raw,
                           "temperature", (*path, "temperature"), code="type")
        if "noCache" in raw and raw["noCache"] is not None:
            prompt.no_cache = self.expect_bool(raw, "noCache", (*path, "noCache"))
        for tools_key, attr in (("requiredTools", "required_tools"), ("prohibitedTools", "prohibited_tools")):
            if tools_key in raw and raw[tools_key] is not None:
                value = raw[tools_key]
                if isinstance(value, list) and all(isinstance(t, str) for t in value):
                    setattr(prompt, attr, value)
                else:
                    self.error(f"`{tools_key}` must be a list of tool names", raw, tools_key, (*path, tools_key),
                               "write e.g. `[search, answer]`", "type")
        if "maxCalls" in raw and raw["maxCalls"] is not None:
            value = raw["maxCalls"]
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                prompt.max_calls = value
            else:
                self.error("`maxCalls` must be a whole number of at least 0", raw, "maxCalls", (*path, "maxCalls"),
                           code="type")
        if "tags" in raw and raw["tags"] is not None:
            if isinstance(raw["tags"], list) and all(isinstance(t, str) for t in raw["tags"]):
                prompt.tags = normalize_tags(raw["tags"])
            else:
                self.error("a prompt's `tags` must be a list of text", raw, "tags", (*path, "tags"), code="type")

        given = [k for k in POINT_ALIASES if raw.get(k)]
        if len(given) > 1:
            self.warn(f"`{given[0]}` and `{given[1]}` both given; only `{given[0]}` is used", raw, given[1],
                      (*path, given[1]), f"merge the points into `{given[0]}`", "alias-conflict", at_key=True)
        if given:
            prompt.points = self.read_block(raw, given[0], (*path, given[0]), label, inverted=False)
        if "should_not" in raw and raw["should_not"] is not None:
            prompt.should_not = self.read_block(raw, "should_not", (*path, "should_not"), label, inverted=True)
            if prompt.should_not:
                self.warn("`should_not` is deprecated upstream and easy to misread", raw, "should_not",
                          (*path, "should_not"),
                          "prefer negative functions in `should`, e.g. `$not_contains: ...`, or a judged point "
                          "phrased positively", "should-not", at_key=True)
        for key, value in pass_fail.items():
            setattr(prompt, key, value)
        prompt.checks = self.current_checks
        if not given and raw.get("should_not") is None and prompt.ideal_response is None:
            self.warn(f"prompt '{label}' has no points and no ideal response, so nothing will be scored", raw,
                      None, path, "add a `should:` list", "no-points")
        if sum(d.is_error for d in self.diagnostics) > errors_before:
            return prompt  # ids from broken prompts would be meaningless; keep the authored one
        if authored_id is None:
            prompt.id = prompt_hash_id(prompt.to_upstream(include_id=False, for_hash=True))
        return prompt

    def read_prompt_system(self, raw, path, label, prompt):
        value = raw["system"]
        if isinstance(value, list):
            self.error(f"Invalid 'system' field in prompt '{label}': a prompt takes one system prompt, not a list.",
                       raw, "system", (*path, "system"),
                       "to compare several system prompts, list them under `systems:` in the header", "system")
        elif value is not None and not isinstance(value, str):
            self.error(f"Invalid 'system' field in prompt '{label}': Must be a string or null", raw, "system",
                       (*path, "system"), "quote the text", "system")
        else:
            prompt.system = value
            prompt.system_set = True
            if self.header_systems:
                self.error(f"When a top-level 'systems' array is defined for permutation, individual prompts "
                           f"(like '{label}') cannot have their own 'system' override.", raw, "system",
                           (*path, "system"), "remove this prompt's `system` or the header's `systems`", "system")

    # --- messages ----------------------------------------------------------------------

    def read_messages(self, raw, path, label) -> list[Message]:
        text_key = next((k for k in ("prompt", "promptText") if raw.get(k) is not None), None)
        has_messages = raw.get("messages") is not None
        if text_key and has_messages:
            self.error(f"Prompt ID '{label}' cannot have both 'promptText' and 'messages' defined. Please use "
                       "'messages' for multi-turn or 'promptText' for single-turn.", raw, text_key,
                       (*path, text_key), f"move the text into `messages` as a user turn, or remove `{text_key}`",
                       "messages", at_key=True)
            text_key = None  # `messages` wins, as upstream; keep reading it to report its problems too
        if text_key:
            if "prompt" in raw and "promptText" in raw:
                self.warn("`prompt` and `promptText` both given; only `prompt` is used", raw, "promptText",
                          (*path, "promptText"), code="alias-conflict", at_key=True)
            value = raw[text_key]
            if is_number(value):
                value = str(value)
            if not isinstance(value, str):
                self.error(f"`{text_key}` must be text, not {_type_name(value)}", raw, text_key, (*path, text_key),
                           "for a conversation use `messages:`", "type")
                return []
            if not value.strip():
                self.error(f"Prompt ID '{label}', message 0 (role 'user'): Content cannot be empty.", raw,
                           text_key, (*path, text_key), code="empty")
                return []
            return [Message(role="user", content=value)]
        if not has_messages:
            self.error(f"Prompt ID '{label}' must have either a valid 'promptText' or a non-empty 'messages' array.",
                       raw, None, path, "add `prompt: <the question>`", "messages")
            return []
        items = raw["messages"]
        mpath = (*path, "messages")
        if not isinstance(items, list) or not items:
            self.error(f"Prompt ID '{label}' must have either a valid 'promptText' or a non-empty 'messages' array.",
                       raw, "messages", mpath, "write each turn as `- user: ...` or `- assistant: ...`", "messages")
            return []
        messages: list[Message] = []
        positions: list[tuple] = []
        for index, item in enumerate(items):
            ipath = (*mpath, index)
            message = self.read_message(item, items, index, ipath, label)
            if message is not None:
                messages.append(message)
                positions.append((items, index, ipath))
        if len(messages) == len(items):
            for index, problem in check_conversation(label, messages):
                container, key, ipath = positions[index]
                if "messages in a row" in problem:
                    # Every provider we call accepts consecutive turns of one role, and a real blueprint in
                    # Weval's own repository has five user turns in a row: a warning, and the run goes on.
                    self.warn(problem.replace("Invalid sequence. ", "") + " They are sent as written, one after "
                              "the other (the upstream refuses this).", container, key, ipath,
                              _conversation_hint(problem), "conversation")
                    continue
                self.error(problem, container, key, ipath, _conversation_hint(problem), "conversation")
        return messages

    def read_message(self, item, container, index, path, label) -> Message | None:
        if not isinstance(item, dict):
            self.error(f"message {index} in prompt '{label}' must be a mapping like `user: ...`, not {_type_name(item)}",
                       container, index, path, "write `- user: your text`", "message")
            return None
        if "role" in item or "content" in item:
            self.unknown_keys(item, ("role", "content"), path, "a message")
            role, content, key = item.get("role"), item.get("content"), "content"
            if role == "ai":
                role = "assistant"
            if role not in ("user", "assistant", "system"):
                self.error(f"Prompt ID '{label}', message {index}: Invalid role '{role}'. Must be 'user', "
                           "'assistant', or 'system'.", item, "role" if "role" in item else None, (*path, "role"),
                           self._choice_hint(role, ("user", "assistant", "system")), "message")
                return None
            holder = item
        else:
            if len(item) != 1:
                self.error("Each message in the shorthand format must have exactly one key (user, assistant, "
                           f"system or ai). Found: {', '.join(map(str, item))}", container, index, path,
                           "put each turn in its own list item", "message")
                return None
            ((role_key, content),) = item.items()
            role = SHORTHAND_ROLES.get(role_key)
            if role is None:
                self.error(f"Invalid role '{role_key}' in message at index {index} in prompt '{label}'.", item,
                           role_key, (*path, role_key),
                           self._choice_hint(role_key, tuple(SHORTHAND_ROLES)), "message", at_key=True)
                return None
            holder, key = item, role_key
        if content is None:
            if role != "assistant":
                self.error(f"Prompt ID '{label}', message {index} (role '{role}'): Content cannot be empty.", holder,
                           key, (*path, key), "only an assistant turn may be null (to be generated)", "empty")
                return None
            return Message(role=role, content=None)
        if is_number(content) or isinstance(content, bool):
            content = json.dumps(content)
        if not isinstance(content, str):
            self.error(f"message {index} in prompt '{label}': content must be text, not {_type_name(content)}",
                       holder, key, (*path, key), "quote the text or use a block scalar (`|`)", "message")
            return None
        if not content.strip():
            self.error(f"Prompt ID '{label}', message {index} (role '{role}'): Content cannot be empty.", holder,
                       key, (*path, key), code="empty")
            return None
        return Message(role=role, content=content)

    # --- points ------------------------------------------------------------------------

    def read_block(self, holder, key, path, label, *, inverted) -> list:
        raw = holder[key]
        if not isinstance(raw, list):
            if isinstance(raw, (str, dict)):
                self.error(f"`{path[-1]}` must be a list of points, not {_type_name(raw)}", holder, key, path,
                           f"start each point on its own line with `- `", "type")
            else:
                self.error(f"`{path[-1]}` must be a list of points, not {_type_name(raw)}", holder, key, path,
                           code="type")
            return []
        prefix = "not_path_" if inverted else "path_"
        out: list = []
        position = 0  # the upstream numbers paths by their place in the block, empty ones included
        paths: list[tuple[list, tuple]] = []
        for index, item in enumerate(raw):
            ipath = (*path, index)
            if isinstance(item, list) and not self.is_tuple_point(item):
                inner_lists = item and all(isinstance(x, list) for x in item)
                groups = [(x, item, j, (*ipath, j)) for j, x in enumerate(item)] if inner_lists \
                    else [(item, raw, index, ipath)]
                for group, gcontainer, gkey, gpath in groups:
                    points = self.read_path(group, gpath, label, f"{prefix}{position}", inverted)
                    if points:
                        out.append(points)
                        paths.append((points, (gcontainer, gkey, gpath)))
                    position += 1
                continue
            position += 1
            if item is None:
                self.warn("empty point ignored", raw, index, ipath, "remove the empty `-` line", "empty-point")
                continue
            point = self.read_point(item, raw, index, ipath, label, inverted)
            if point is not None:
                out.append(point)
        if paths and all(len(points) == 1 for points, _ in paths):
            points, (container, key0, gpath) = paths[0]
            count = len(paths)
            subject = f"every one of these {count} alternative paths has" if count > 1 else "this alternative path has"
            self.warn(f"{subject} a single point, so only the best one counts and it weighs as much as all required "
                      "points together", container, key0, gpath,
                      "if every point is required, remove the extra `- ` nesting (write a flat list); for "
                      "'any of these words' use `$contains_any_of`", "single-point-path")
        return out

    def read_path(self, items: list, path, label, path_id, inverted) -> list[Point]:
        points: list[Point] = []
        for index, item in enumerate(items):
            ipath = (*path, index)
            if item is None:
                continue
            if isinstance(item, list) and not self.is_tuple_point(item):
                self.error("Nested arrays within alternative paths are not supported", items, index, ipath,
                           "an alternative path is one list of points; write each path as its own `- - ...` item",
                           "nesting")
                continue
            point = self.read_point(item, items, index, ipath, label, inverted)
            if point is not None:
                point.path_id = path_id
                points.append(point)
        return points

    def is_tuple_point(self, item: list) -> bool:
        """Legacy JSON tuple points: ``["$contains", "x"]`` (deviation 8)."""
        return (self.json and len(item) == 2 and isinstance(item[0], str)
                and functions.resolve(item[0]) is not None)

    def read_point(self, item, container, key, path, label, inverted) -> Point | None:
        line, column = self._position(container, key)
        origin = Origin(path=format_path(path), line=line, column=column)
        if isinstance(item, list):  # a legacy tuple point
            return self.function_point(functions.resolve(item[0]), item[1], True, (item, 1, (*path, 1)), origin, label,
                                       inverted, written=item[0])
        if isinstance(item, str):
            return self.string_point(item, container, key, path, origin, label, inverted)
        if isinstance(item, dict):
            point = self.object_point(item, container, key, path, origin, label, inverted)
            return self.point_extensions(item, path, point)
        self.error(f"Invalid point format in prompt '{label}': Point must be a string, array, or object.",
                   container, key, path, "quote the text of a judged point", "point")
        return None

    def string_point(self, item, container, key, path, origin, label, inverted) -> Point | None:
        if not item.strip():
            self.error("a point cannot be empty text", container, key, path, "remove it or write the criterion",
                       "empty-point")
            return None
        if len(item) > 1 and item.startswith("$"):
            name = item[1:]
            canonical = functions.resolve(name)
            if canonical:
                return self.function_point(canonical, None, False, (container, key, path), origin, label, inverted,
                                           written=name)
            quoted = _QUOTED_CALL.match(item)
            if quoted and functions.resolve(quoted.group(1)):
                args = _quoted_call_args(functions.resolve(quoted.group(1)), quoted.group(2))
                self.warn(f"this point is quoted text that looks like the call `${quoted.group(1)}`; it is read as "
                          "that call", container, key, path,
                          f"remove the outer quotes: `- ${quoted.group(1)}: {quoted.group(2).strip()}`",
                          "quoted-function")
                return self.function_point(functions.resolve(quoted.group(1)), args, True, (container, key, path),
                                           origin, label, inverted, written=quoted.group(1))
            first_word = re.split(r"[\s:(]", name, maxsplit=1)[0]
            suggestion = functions.suggest(first_word) if first_word else None
            self.warn(f"`{item[:40]}` starts with `$` but `{first_word}` is not a point function; it will be judged "
                      "as text", container, key, path,
                      f"did you mean `${suggestion}`?" if suggestion else "to keep it as judged text, this is fine; "
                      "to call a function check its name in the docs", "dollar-text")
        return Point(text=item, inverted=inverted, origin=origin)

    def object_point(self, item: dict, container, key, path, origin, label, inverted) -> Point | None:
        dollar_keys = [k for k in item if isinstance(k, str) and k.startswith("$")]
        weight = item.get("weight", item.get("multiplier"))
        weight_key = "weight" if "weight" in item else ("multiplier" if "multiplier" in item else None)
        if dollar_keys:
            fn_key = dollar_keys[0]
            for extra in dollar_keys[1:]:
                self.warn(f"only the first function in one point is used; `{extra}` is ignored", item, extra,
                          (*path, extra), "give each function its own `- ` item", "extra-function", at_key=True)
            others = [k for k in item if k not in dollar_keys and k not in FUNCTION_OBJECT_KEYS]
            for other in others:
                self.warn(f"unknown key `{other}` in a function point; it is ignored", item, other, (*path, other),
                          "a function point may also have `weight` and `citation`", "unknown-key", at_key=True)
            name = fn_key[1:]
            if name == "ref":
                return self.ref_point(item, fn_key, path, origin, label, inverted, weight, weight_key)
            canonical = functions.resolve(name)
            if canonical is None:
                self.unknown_function(name, item, fn_key, (*path, fn_key))
                return None
            return self.function_point(canonical, item[fn_key], True, (item, fn_key, (*path, fn_key)), origin, label,
                                       inverted, weight=weight, weight_at=(item, weight_key, path),
                                       citation=item.get("citation"), written=name)
        if item.get("text") or item.get("point") or item.get("fn"):
            self.unknown_keys(item, POINT_OBJECT_KEYS, path, "a point")
            text = item.get("text") or item.get("point")
            fn = item.get("fn")
            if text and fn:
                self.error("Point cannot have both 'text' and 'fn' defined", container, key, path,
                           "split it into a judged point and a function point", "point")
                return None
            if fn:
                if not isinstance(fn, str):
                    self.error("`fn` must be the name of a point function", item, "fn", (*path, "fn"), code="point")
                    return None
                name = fn[1:] if fn.startswith("$") else fn
                canonical = functions.resolve(name)
                if canonical is None:
                    self.unknown_function(name, item, "fn", (*path, "fn"))
                    return None
                args_key = "fnArgs" if "fnArgs" in item else ("arg" if "arg" in item else None)
                args = item.get(args_key) if args_key else None
                return self.function_point(canonical, args, args_key is not None,
                                           (item, args_key or "fn", (*path, args_key or "fn")), origin, label,
                                           inverted, weight=weight, weight_at=(item, weight_key, path),
                                           citation=item.get("citation"), written=name)
            text_key = "text" if item.get("text") else "point"
            if not isinstance(text, str):
                self.error(f"`{text_key}` must be text, not {_type_name(text)}", item, text_key, (*path, text_key),
                           code="point")
                return None
            multiplier = self.read_multiplier(weight, item, weight_key, path, label)
            if multiplier is None:
                return None
            return Point(text=text, multiplier=multiplier, citation=item.get("citation"), inverted=inverted,
                         origin=origin)
        if len(item) == 1:
            ((text, citation),) = item.items()
            if isinstance(citation, str):
                if isinstance(text, str) and functions.resolve(text) and not re.search(r"\s", text):
                    self.warn(f"`{text}: ...` is read as a judged point with a citation; did you mean the function "
                              f"`${text}`?", item, text, path, f"write `${text}: {_short(citation, 40)}`",
                              "citation-or-function", at_key=True)
                return Point(text=str(text), citation=citation, inverted=inverted, origin=origin)
        hint = "a point is judged text, `$function: args`, `{text: ..., weight: ...}` or `\"text\": citation`"
        for k in item:
            if isinstance(k, str) and functions.resolve(k):
                hint = f"did you mean `${k}`? function names start with `$`"
                break
            close = _did_you_mean(k, POINT_OBJECT_KEYS)
            if close:
                hint = f"did you mean `{close}`?"
                break
        self.error(f"Invalid point object in prompt '{label}': Point must define 'text', a function ('fn' or '$...'), "
                   f"or a 'Point: Citation' pair. Found: {_short(item)}", container, key, path, hint, "point")
        return None

    def unknown_function(self, name, container, key, path):
        suggestion = functions.suggest(name)
        self.error(f"Unknown point function: '{name}'", container, key, path,
                   f"did you mean `${suggestion}`?" if suggestion else
                   "see the list of point functions in docs/points.md", "unknown-function", at_key=True)

    def read_multiplier(self, weight, container, key, path, label) -> float | None:
        if weight is None:
            return 1.0
        if is_number(weight) and 0.1 <= weight <= 10:
            return float(weight)
        self.error(f"Point multiplier must be a number between 0.1 and 10. Found {_short(weight)}. Prompt ID: '{label}'",
                   container, key, (*path, key), "use 1 for a normal point, 2 for one that counts double", "weight")
        return None

    def function_point(self, canonical, args, has_args, args_at, origin, label, inverted, *, weight=None,
                       weight_at=None, citation=None, written=None) -> Point | None:
        """A function point, checked. ``args_at`` and ``weight_at`` are (container, key, path) of those values;
        ``written``: the name as the author wrote it (the upstream's prompt hash keeps its spelling)."""
        container, key, path = args_at
        multiplier = 1.0
        if weight is not None:
            multiplier = self.read_multiplier(weight, *weight_at, label)
            if multiplier is None:
                return None
        problem = functions.check_args(canonical, args if has_args else None)
        if problem:
            self.error(problem, container, key, path, _args_hint(canonical), "arguments")
            return None
        for pattern in functions.regex_patterns(canonical, args):
            try:
                compile_js(pattern, ignore_case=functions.is_case_insensitive_regex(canonical))
            except RegexError as exc:
                where = f" at position {exc.position}" if exc.position is not None else ""
                self.warn(f"regex {_short(pattern, 60)} does not compile: {exc.message}{where}; the point will be "
                          "not evaluated", container, key, path, "fix the pattern; test it with a few sample answers",
                          "regex")
        self.lint_function(canonical, args, container, key, path)
        spelling = functions.upstream_spelling(written) if written else None
        return Point(fn=canonical, fn_args=args if has_args else None, has_args=has_args, multiplier=multiplier,
                     citation=citation, inverted=inverted, origin=origin,
                     fn_as_written=spelling if spelling != canonical else None)

    def lint_function(self, canonical, args, container, key, path):
        if canonical == "factcheck":
            self.warn("`$factcheck` is not supported by evalsite; the point will be not evaluated", container, key,
                      path, "use a judged point that states the fact to check", "unsupported")
        elif canonical == "call":
            url = None
            if isinstance(args, dict):
                url = args.get("url")
                if url is None and isinstance(args.get("service"), str):
                    url = "service:" + args["service"]
            host = re.match(r"^https?://([^/:]+)", url).group(1) if isinstance(url, str) and url.startswith("http") \
                else None
            if host is None or host not in self.call_hosts:
                self.warn("`$call` only runs against hosts the operator lists in EVALSITE_CALL_HOSTS"
                          + (f"; '{host}' is not listed" if host else "") + ", so the point will be not evaluated",
                          container, key, path, "ask the operator to add the host, or use another function",
                          "call-host")

    def ref_point(self, item, fn_key, path, origin, label, inverted, weight, weight_key) -> Point | None:
        name = item[fn_key]
        if not isinstance(name, str):
            self.error(f"Invalid $ref usage in prompt '{label}': the value must be the name of a point_defs entry",
                       item, fn_key, (*path, fn_key), code="ref")
            return None
        if name not in self.point_defs:
            suggestion = _did_you_mean(name, self.point_defs)
            self.error(f"Undefined definition '{name}' referenced in prompt '{label}'.", item, fn_key, (*path, fn_key),
                       f"did you mean `{suggestion}`?" if suggestion else
                       "define it under `point_defs:` in the header", "ref")
            return None
        base = self.expand_def(name)
        if base is None:
            return None
        multiplier = base.multiplier
        if weight is not None:
            multiplier = self.read_multiplier(weight, item, weight_key, path, label)
            if multiplier is None:
                return None
        citation = item.get("citation", base.citation)
        point = base.model_copy(update={"multiplier": multiplier, "citation": citation, "inverted": inverted,
                                        "origin": origin, "check_id": None})
        definition = self.point_defs.get(name)
        if isinstance(definition, dict):  # the definition's own gate or minimum, as a check of this prompt
            point = self.point_extensions(definition, (self.defs_key, name), point)
        return point

    def expand_def(self, name) -> Point | None:
        """Normalise a point_defs entry once; its problems are reported where it is defined."""
        if name in self.expanded_defs:
            return self.expanded_defs[name]
        if name in self.expanding:
            self.error(f"point definition '{name}' refers to itself", self.defs_container, name,
                       (self.defs_key, name), code="ref")
            return None
        self.expanding.add(name)
        checks, self.current_checks = self.current_checks, []  # a definition's checks belong to each prompt using it
        definition = self.point_defs[name]
        dpath = (self.defs_key, name)
        if isinstance(definition, str):
            line, column = self._position(self.defs_container, name)
            point = self.function_point("js", definition, True, (self.defs_container, name, dpath),
                                        Origin(path=format_path(dpath), line=line, column=column), f"point_defs.{name}",
                                        False)
        elif isinstance(definition, dict):
            point = self.read_point(definition, self.defs_container, name, dpath, f"point_defs.{name}", False)
        else:
            point = None  # already reported by read_point_defs
        self.expanding.discard(name)
        self.current_checks = checks
        self.expanded_defs[name] = point
        return point


def _quoted_call_args(canonical: str, raw: str):
    """The argument of a call written inside a string, e.g. ``"$icontains: 'paris'"``.

    Read as YAML, as if the quotes were not there; when that does not fit the function
    but the plain text does (``"$icontains: "label": "hateful""`` means the substring
    ``"label": "hateful"``), the text is the argument.
    """
    raw = raw.strip()
    if not raw:
        return None
    try:
        args = yaml.load(raw, Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return raw
    if functions.check_args(canonical, args) is not None and functions.check_args(canonical, raw) is None:
        return raw
    return args


def check_conversation(label: str, messages: list[Message]) -> list[tuple[int, str]]:
    """The upstream's run checks on a conversation, as (message index, problem) pairs.

    Deviation 14: a conversation may end with an authored assistant message; that
    message is the response that gets scored.
    """
    problems: list[tuple[int, str]] = []
    if not messages:
        return problems
    first = next((m for m in messages if m.role != "system"), None)
    if messages[0].role == "assistant" or (first is not None and first.role == "assistant"):
        index = messages.index(first) if first is not None else 0
        problems.append((index, f"Prompt ID '{label}': First message role cannot be 'assistant'. Must be 'user' or "
                                "'system'."))
    if all(m.role == "system" for m in messages):
        problems.append((len(messages) - 1, f"Prompt ID '{label}': the conversation has only system messages; add "
                                             "a user message"))
    previous = None
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if previous == message.role:
            problems.append((index, f"Prompt ID '{label}', message {index}: Invalid sequence. Two '{message.role}' "
                                    "messages in a row."))
        previous = message.role
    return problems


def _conversation_hint(problem: str) -> str | None:
    if "Two 'user' messages" in problem:
        return "join the two turns, or put `- assistant: null` between them to have the model answer"
    if "Two 'assistant' messages" in problem:
        return "join the two assistant turns, or add the user turn between them"
    if "First message role" in problem:
        return "start with a `user` (or `system`) turn"
    return None


def _args_hint(canonical: str) -> str | None:
    example = {
        "contains": '`$contains: "word"`',
        "contains_any_of": '`$contains_any_of: ["a", "b"]`',
        "contains_at_least_n_of": '`$contains_at_least_n_of: [2, ["a", "b", "c"]]`',
        "word_count_between": "`$word_count_between: [50, 200]`",
        "tool_args_match": '`$tool_args_match: {name: search, where: {query: "x"}}`',
    }
    base = canonical.removeprefix("not_").removeprefix("i")
    for key, text in example.items():
        if base == key or base == key.removeprefix("i"):
            return f"for example {text}"
    return None
