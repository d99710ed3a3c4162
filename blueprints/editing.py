"""The editor's side of a blueprint: markdown descriptions, the live check (diagnostics -> editor
annotations, with the preview), diffs between revisions, and a blueprint made in the browser."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

import nh3
from django.conf import settings
from django.db import transaction
from markdown_it import MarkdownIt

from blueprints.models import (
    Blueprint,
    BlueprintRevision,
    ModelCollection,
    title_from_text,
)
from blueprints.parsing import parse_text
from blueprints.spec import ParseResult, parse_any
from blueprints.spec.collections import lookup_for_files
from blueprints.preview import Preview, build_preview
from evalsite.security import defer_outside_images


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
    if files is None and slug:
        files = (Blueprint.objects.filter(slug=slug).values_list("current_revision__files", flat=True).first()
                 or {})
    # The collections kept with the blueprint first, then the stored ones: the rule its run will use.
    lookup = lookup_for_files(files, collections if collections is not None else ModelCollection.lookup())
    result = parse_text(text, blueprint_id=slug, collections=lookup, files=files or {})
    preview = build_preview(result.blueprint, lookup) if result.blueprint is not None else None
    return Check(result, preview)


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
