"""Blueprint text -> normalised :class:`Blueprint`, with every problem found at once.

This follows the upstream parser's structure detection, aliases and point forms
(reference section 1) with the deviations DESIGN.md lists. Unlike the upstream,
it never stops at the first problem: it collects errors and warnings, each with
the author's path, line and column, and a separate hint where a fix is known.

The walk is plain code over plain dicts and lists, by composition: one ``Notes``
(notes.py) collects every problem; ``HeaderReader`` (header_reader.py) reads the
header, ``PromptReader`` (prompt_reader.py) each prompt and its messages,
``PointReader`` (point_reader.py) the points, and ``Extensions`` (extensions.py)
evalsite's own keys. ``BlueprintReader`` here splits the documents and drives them.
Each ``read_*`` method takes the raw value, the container that holds it (for
positions) and the author's path. The importers (importers/) use the same
``Notes`` and the header reader's public checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .diagnostics import Diagnostic
from .extensions import Extensions
from .header_reader import HeaderReader
from .ids import blueprint_id_for_file
from .limits import DEFAULT_LIMITS, Limits
from .notes import Notes, type_name
from .point_reader import PointReader
from .prompt_reader import PromptReader
from .schema import Blueprint, Prompt, construct
from .source import Loaded, SourceError, load

# Keys that make a document a prompt rather than a header. The upstream's list
# leaves out `promptText`, `should_not`, `expects` and `expectations`, so a
# stream starting with such a prompt was read as a header; we include them.
PROMPT_DEFINING_KEYS = frozenset(
    {"prompt", "promptText", "messages", "should", "should_not", "ideal", "idealResponse",
     "points", "expect", "expects", "expectations"}
)

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
    return parse_loaded(loaded, path=path, blueprint_id=blueprint_id, collections=collections,
                        call_hosts=call_hosts, limits=limits)


def source_diagnostic(exc: SourceError) -> Diagnostic:
    return Diagnostic("error", exc.message, exc.line, exc.column, "", exc.hint, exc.code)


def parse_loaded(loaded: Loaded, *, path: str | None = None, blueprint_id: str | None = None,
                 collections: CollectionLookup | None = None, call_hosts: Iterable[str] = (),
                 limits: Limits = DEFAULT_LIMITS) -> ParseResult:
    """``parse_blueprint`` for text already loaded (``parse_any`` loads once to detect the dialect)."""
    fmt = loaded.fmt
    derived = blueprint_id or (blueprint_id_for_file(path) if path else None)
    reader = BlueprintReader(loaded, derived, collections, frozenset(call_hosts), limits)
    blueprint = reader.read()
    errors = [d for d in reader.notes.diagnostics if d.is_error]
    warnings = [d for d in reader.notes.diagnostics if not d.is_error]
    return ParseResult(blueprint if not errors else None, errors, warnings, fmt)


class BlueprintReader:
    """One blueprint's walk: the documents split into header and prompts, each read by its reader."""

    def __init__(self, loaded: Loaded, derived_id, collections, call_hosts, limits: Limits = DEFAULT_LIMITS):
        self.notes = notes = Notes(loaded)
        self.error, self.warn = notes.error, notes.warn
        self.json = loaded.fmt == "json"
        self.derived_id = derived_id
        self.ext = Extensions(notes)
        self.points = PointReader(notes, self.ext, json=self.json, call_hosts=call_hosts)
        self.header = HeaderReader(notes, self.ext, self.points, derived_id=derived_id, collections=collections,
                                   limits=limits)
        self.prompts = PromptReader(notes, self.ext, self.header, self.points)

    def read(self) -> Blueprint:
        for dup in self.notes.locator.duplicates:
            self.notes.add(Diagnostic(
                "error", f"duplicate key `{dup.key}` (first written on line {dup.first_line})",
                dup.line, dup.column, dup.key,
                "remove one of them; with duplicate keys only the last value would be used",
                "duplicate-key"))
        docs = self.notes.loaded.documents
        if not docs:
            kind = "JSON" if self.json else "YAML"
            self.error(f"{kind} blueprint is empty or contains only null documents.", None, None, (),
                       "write a header with `title` and `models`, then a list of prompts", "empty")
            return construct(Blueprint, derived_id=self.derived_id)
        header, prompt_items = self.split_documents(docs)
        blueprint = self.header.read_header(header)
        prompts: list[Prompt] = []
        seen_ids: dict[str, int] = {}
        for index, (raw, container, key) in enumerate(prompt_items):
            prompt = self.prompts.read_prompt(raw, container, key, ("prompts", index))
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
        self.header.check_collections(blueprint, header)
        self.header.check_variants(blueprint, header)
        return blueprint

    def split_documents(self, docs: list) -> tuple[dict, list[tuple[Any, Any, Any]]]:
        """Return the header mapping and (prompt, container, key) triples, as reference 1.1."""
        if len(docs) == 1:
            doc = docs[0]
            if isinstance(doc, list):
                return {}, [(p, doc, i) for i, p in enumerate(doc)]
            if not isinstance(doc, dict):
                self.error(f"a blueprint must be a mapping or a list of prompts, not {type_name(doc)}",
                           None, None, (), "start with `title:` and `models:`, then `---` and a list of prompts",
                           "structure")
                return {}, []
            if "prompts" in doc:
                prompts = doc["prompts"]
                if not isinstance(prompts, list):
                    self.error(f"`prompts` must be a list of prompts, not {type_name(prompts)}", doc, "prompts",
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
                self.error(f"YAML document {number + (2 if header else 1)} is {type_name(doc)}; "
                           "expected a prompt or a list of prompts", None, None, (), code="structure")
        if isinstance(header, dict) and "prompts" in header:
            self.warn("`prompts` inside a header that is followed by `---` documents is ignored",
                      header, "prompts", ("prompts",), "move these prompts after the `---`", "structure",
                      at_key=True)
        return header, items
