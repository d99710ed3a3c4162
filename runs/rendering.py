"""Responses as a reviewer sees them: markdown, sanitised HTML or plain text, by the prompt's ``render_as``.

Model output is untrusted. Markdown is rendered with raw HTML off (a ``<script>``
the model wrote shows as text), images are not loaded (a picture's address is
a way to send data out), and the result goes through the nh3 sanitiser all the
same. HTML is sanitised and then shown only inside an iframe with
``sandbox=""`` (no scripts, no forms, no same-origin access) whose document
carries its own Content-Security-Policy that forbids every fetch, so inline
CSS cannot call home either. Plain text is escaped by the template.

Rendering is capped: past ``MAX_RENDERED_CHARS`` only the beginning is
rendered and the page links to the whole text, so a runaway response cannot
make a page slow.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

MAX_RENDERED_CHARS = 50_000
RENDER_MODES = ("markdown", "html", "plaintext")

_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")

_MARKDOWN_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}
_MARKDOWN_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}}

_HTML_TAGS = _MARKDOWN_TAGS | {
    "div", "span", "section", "article", "header", "footer", "main", "aside", "nav", "figure", "figcaption",
    "b", "i", "u", "small", "sub", "sup", "mark", "abbr", "cite", "q", "kbd", "samp", "var", "dl", "dt", "dd",
    "caption", "tfoot", "colgroup", "col", "details", "summary", "time", "ins",
}
_HTML_ATTRIBUTES = {
    "*": {"title", "lang", "dir", "style"},
    "a": {"href", "title"}, "ol": {"start", "type"}, "td": {"colspan", "rowspan"}, "th": {"colspan", "rowspan",
                                                                                           "scope"},
    "abbr": {"title"}, "time": {"datetime"}, "col": {"span"}, "colgroup": {"span"},
}
# Properties that cannot name a URL: no background(-image), no list-style-image, no border-image, no content.
_SAFE_STYLE_PROPERTIES = {
    "color", "background-color", "font-weight", "font-style", "font-size", "font-family", "font-variant",
    "text-align", "text-decoration", "text-transform", "line-height", "letter-spacing", "white-space",
    "vertical-align", "margin", "margin-top", "margin-right", "margin-bottom", "margin-left", "padding",
    "padding-top", "padding-right", "padding-bottom", "padding-left", "border", "border-top", "border-right",
    "border-bottom", "border-left", "border-color", "border-style", "border-width", "border-radius",
    "border-collapse", "width", "max-width", "min-width", "height", "max-height", "min-height", "display",
    "list-style-type", "opacity",
}
_URL_SCHEMES = {"http", "https", "mailto"}
_REL = "noopener noreferrer nofollow"

# The iframe's own policy: nothing may be fetched, nothing may run; inline styles are the page's own.
FRAME_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_FRAME_STYLE = ("body{font-family:system-ui,sans-serif;line-height:1.5;margin:0.75rem;color:#1f2328;"
                "background:#fff;overflow-wrap:anywhere}")


@dataclass(frozen=True)
class Rendered:
    """One text rendered one way; ``html`` is safe to insert (or, for ``html`` mode, the iframe's srcdoc)."""

    mode: str  # markdown, html, plaintext
    html: str
    length: int  # characters in the whole text
    shown: int  # characters rendered

    @property
    def truncated(self) -> bool:
        return self.shown < self.length

    def as_html(self, label: str) -> str:
        """As every page and the report show it, safe to insert: markdown inline, HTML in a frame sandboxed
        from scripts, forms and our origin (its document carries its own no-fetch policy), text as text."""
        if self.mode == "html":
            return (f'<iframe class="html-frame" sandbox="" srcdoc="{html.escape(self.html)}" '
                    f'title="{html.escape(label)}, rendered as HTML in a sandbox where no script runs" '
                    f'referrerpolicy="no-referrer"></iframe>')
        if self.mode == "plaintext":
            return f'<pre class="response-text">{self.html}</pre>'
        return f'<div class="response-markdown">{self.html}</div>'


# A page shows the same responses to every viewer: the HTML of short texts is kept (at most 256 of them, each under
# 8,000 characters: a few MB), so a prompt's page of ten answers no longer renders ten of them on every view (a
# third of its CPU).
_KEPT_CHARS = 8_000


def markdown_to_html(text: str, *, links: bool = True) -> str:
    """Markdown -> sanitised HTML. Raw HTML in the source is escaped, images are never loaded.

    ``links=False`` keeps link text and drops the addresses (for the offline report).
    """
    if len(text) <= _KEPT_CHARS:
        return _kept_markdown(text, links)
    return _markdown_html(text, links)


@lru_cache(maxsize=256)
def _kept_markdown(text: str, links: bool) -> str:
    return _markdown_html(text, links)


def _markdown_html(text: str, links: bool) -> str:
    tags = _MARKDOWN_TAGS if links else _MARKDOWN_TAGS - {"a"}
    return nh3.clean(_markdown.render(text), tags=tags, attributes=_MARKDOWN_ATTRIBUTES, url_schemes=_URL_SCHEMES,
                     link_rel=_REL if links else None, filter_style_properties={"text-align"})


def sanitize_html(text: str, *, links: bool = True) -> str:
    """A model's HTML with every script, handler, form, frame, embedded object and non-web URL removed.

    ``links=False`` also drops the addresses of links (their text stays): for the offline report."""
    return nh3.clean(text, tags=_HTML_TAGS if links else _HTML_TAGS - {"a"}, attributes=_HTML_ATTRIBUTES,
                     url_schemes=_URL_SCHEMES, link_rel=_REL if links else None,
                     filter_style_properties=_SAFE_STYLE_PROPERTIES)


def html_document(text: str, *, links: bool = True) -> str:
    """A whole document for an iframe's ``srcdoc``: the sanitised HTML under a policy that forbids every fetch."""
    return (f'<!doctype html><html><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(FRAME_CSP)}">'
            f'<base target="_blank"><style>{_FRAME_STYLE}</style></head><body>{sanitize_html(text, links=links)}'
            f'</body></html>')


def render(text: str | None, mode: str, *, links: bool = True, limit: int = MAX_RENDERED_CHARS) -> Rendered:
    """Render ``text`` as ``mode`` (markdown, html, plaintext); at most ``limit`` characters of it."""
    text = text or ""
    if mode not in RENDER_MODES:
        mode = "markdown"
    shown = text[:limit]
    if mode == "markdown":
        body = markdown_to_html(shown, links=links)
    elif mode == "html":
        body = html_document(shown, links=links)
    else:
        body = html.escape(shown)
    return Rendered(mode=mode, html=body, length=len(text), shown=len(shown))
