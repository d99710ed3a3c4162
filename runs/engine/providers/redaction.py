"""Secrets out of every text the engine hands back: one :class:`Redactor`, built once from the secrets.

The secrets are every value a blueprint can make us send: the provider API keys and the values of
the variables the operator allowed in ``EVALSITE_BLUEPRINT_ENV`` (``ProviderSettings.secrets()``).
An endpoint may echo one back, as is or encoded, in an answer, an error or a 401 body; whatever it
echoes becomes ``[redacted]`` before it reaches a result, the response cache, a judge's prompt or
the call log.

What counts as a secret's appearance:

* a value of 8 characters or more: the value itself; its JSON-escaped spelling; its
  percent-encoding (``quote`` and ``quote_plus``, hex digits in either case); its hex; and its
  base64, standard and URL-safe, with and without padding, at each of the three byte alignments
  (so a value inside a longer encoded blob, such as ``Basic base64(user:key)``, is found too; a
  character or two at each end of such a blob, which also hold the neighbouring bytes, is left);
* a value of 4 to 7 characters (an organisation name, a region): the value itself, as a whole
  word only, never its encodings (``eu`` must not eat ``Europe``, and the base64 of four letters
  turns up in ordinary text);
* a value shorter than 4 characters is no secret and is left alone (it could not be kept from
  anyone, and redacting ``1`` everywhere would wreck every answer that counts).

:meth:`Redactor.message` also hides any word sharing 8 characters with a secret (errors and error
bodies: a 401 often echoes the key with its middle starred out).

A secret is also found in the forms a page turns back into it: HTML character references
(``&#115;&#107;...``, ``&#x73;``, ``&lowbar;``), which markdown renders as the characters on the response
page, the prompt page and the report, and ``\\uXXXX`` escapes, which the "Every call" page decodes when it
shows a JSON body. When a text holds a secret only in such a form, it is returned decoded, with the
secret replaced (safe characters only: a quote, a backslash or a control character stays escaped, so a
JSON body stays JSON). Callers that cut a text short redact it first: a secret cut in two by the cut
would no longer be found.

Cost: the forms are compiled into one regular expression (a trie of literals, so a position that
cannot start a secret is rejected at its first character), built once per set of secrets and
shared (:func:`redactor_for`). With no secrets, every method returns its argument at once.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import re
from functools import lru_cache
from typing import Any, Iterable
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # shorter values are not secrets: never redacted
ENCODED_SECRET_CHARS = 8  # from this length on, encodings and 8-character fragments count too
FRAGMENT_CHARS = 8  # a word sharing this many characters with a secret counts as the secret (messages)
_TOKEN_RE = re.compile(r"[^\s\"'`,;()\[\]{}<>=]{%d,}" % FRAGMENT_CHARS)
_WORD = "A-Za-z0-9"
_JSON_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")
_KEPT_ESCAPED = frozenset('"\\') | frozenset(chr(c) for c in range(0x20)) | {"\x7f"}


def _json_char(match: re.Match) -> str:
    char = chr(int(match.group(1), 16))
    if char in _KEPT_ESCAPED or 0xD800 <= ord(char) <= 0xDFFF:  # JSON's own characters, lone surrogates
        return match.group(0)
    return char


def page_decoded(text: str) -> str:
    """``text`` as a page may turn it into characters: ``\\uXXXX`` escapes (a JSON body shown decoded), then
    HTML character references (markdown renders them). The same text when it holds neither."""
    if "\\u" in text:
        text = _JSON_ESCAPE.sub(_json_char, text)
    if "&" in text:
        text = html.unescape(text)
    return text


def _b64_forms(data: bytes) -> set[str]:
    """The base64 of ``data`` wherever it sits in a longer blob: standard and URL-safe, padded or not."""
    forms: set[str] = set()
    n = len(data)
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        # Characters that hold only bits of ``data`` (none of the bytes before or after it).
        core = encoded[-(-8 * offset // 6):(8 * (offset + n)) // 6]
        variants = {core}
        if offset == 0:  # the whole value encoded on its own: padding, or none
            variants |= {encoded, encoded.rstrip("=")}
        for text in variants:
            if len(text) >= ENCODED_SECRET_CHARS:
                forms.add(text)
                forms.add(text.replace("+", "-").replace("/", "_"))
    return forms


def secret_forms(secret: str) -> tuple[set[str], set[str]]:
    """How ``secret`` may appear: (case-sensitive forms, forms matched in any case)."""
    exact = {secret}
    any_case: set[str] = set()
    if len(secret) < ENCODED_SECRET_CHARS:
        return exact, any_case
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    exact |= {escaped, escaped.replace("/", "\\/"), json.dumps(secret)[1:-1]}
    data = secret.encode("utf-8")
    exact |= _b64_forms(data)
    any_case |= {quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret, safe="/"), data.hex()}
    any_case -= exact
    return exact, any_case


def _trie_pattern(words: Iterable[str]) -> str:
    """One regex for a set of literals, longest first at each branch (a trie, so matching stays linear)."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:  # a shorter form ends here: try the longer one first, fall back to stopping
            body = "(?:" + body + ")?"
        return body

    return build(trie)


class Redactor:
    """Replaces every appearance of the secrets (see the module's account) with ``[redacted]``."""

    __slots__ = ("secrets", "active", "needles", "_pattern", "_windows", "_shortest", "_clean", "_clean_chars")

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS}, key=len,
                      reverse=True)
        self.secrets: tuple[str, ...] = tuple(kept)
        self.active = bool(kept)
        # Texts read already and found to hold nothing: an answer is read when it arrives and again when its
        # item's result is scrubbed (``Redactor.text``). Bounded; emptied when full.
        self._clean: dict[str, None] = {}
        self._clean_chars = 0
        # The values as they appear in JSON bytes (as is, or escaped): a quick first look at a request body.
        self.needles: tuple[bytes, ...] = tuple(
            {form.encode("utf-8") for s in kept for form in (s, json.dumps(s, ensure_ascii=False)[1:-1])})
        self._windows: frozenset[str] = frozenset(
            s[i:i + FRAGMENT_CHARS] for s in kept if len(s) >= ENCODED_SECRET_CHARS
            for i in range(len(s) - FRAGMENT_CHARS + 1))
        parts: list[str] = []
        exact: set[str] = set()
        any_case: set[str] = set()
        short: set[str] = set()
        for secret in kept:
            if len(secret) < ENCODED_SECRET_CHARS:
                short.add(secret)
                continue
            sensitive, insensitive = secret_forms(secret)
            exact |= sensitive
            any_case |= insensitive
        if exact:
            parts.append(_trie_pattern(exact))
        if any_case:
            parts.append("(?i:" + _trie_pattern(any_case) + ")")
        # Short values as whole words. The check for a letter before is made after the first character
        # (``a(?<![A-Za-z0-9]a)cme``), so every branch starts with a literal and the engine can skip at
        # once each position whose character starts no secret.
        for first in sorted({s[0] for s in short}):
            rests = _trie_pattern(s[1:] for s in short if s[0] == first)
            parts.append(f"{re.escape(first)}(?<![{_WORD}]{re.escape(first)})(?:{rests})(?![{_WORD}])")
        self._pattern = re.compile("|".join(parts)) if parts else None
        # No match is shorter than the shortest form: a shorter text (a label, an id) is not searched.
        self._shortest = min((len(f) for f in (*exact, *any_case, *short)), default=0)

    def __repr__(self) -> str:  # never the values
        return f"Redactor({len(self.secrets)} secrets)"

    def found(self, text: str | None) -> bool:
        if self._pattern is None or not text:
            return False
        if self._pattern.search(text):
            return True
        decoded = page_decoded(text)
        return decoded is not text and bool(self._pattern.search(decoded))

    def in_bytes(self, data: bytes | None) -> bool:
        """Whether a secret's value is in ``data`` as is (not encoded): a quick look, about a microsecond
        for a few kilobytes, where :meth:`found` reads every character."""
        return bool(data) and any(needle in data for needle in self.needles)

    def text(self, text: str | None) -> str | None:
        """``text`` with every secret, and each of its encodings, replaced."""
        if self._pattern is None or not text or len(text) < self._shortest or text in self._clean:
            return text
        read = text
        text = self._pattern.sub(REDACTED, text)
        # A secret spelled so that a page turns it back (entities, \\u escapes): the text decoded, redacted.
        decoded = page_decoded(text)
        if decoded is not text and self._pattern.search(decoded):
            return self._pattern.sub(REDACTED, decoded)
        if text == read and len(read) <= CLEAN_KEPT_CHARS // 64:
            if len(self._clean) >= CLEAN_KEPT or self._clean_chars >= CLEAN_KEPT_CHARS:
                self._clean.clear()
                self._clean_chars = 0
            self._clean[read] = None
            self._clean_chars += len(read)
        return text

    def message(self, text: str | None) -> str | None:
        """For errors and error bodies: :meth:`text`, and any word sharing 8 characters with a secret."""
        text = self.text(text)
        if not self._windows or not text:
            return text
        windows = self._windows

        def scrub(match: re.Match) -> str:
            word = match.group(0)
            for start in range(len(word) - FRAGMENT_CHARS + 1):
                if word[start:start + FRAGMENT_CHARS] in windows:
                    return REDACTED
            return word

        return _TOKEN_RE.sub(scrub, text)

    def scrub(self, value: Any) -> Any:
        """A copy of ``value`` with :meth:`text` applied to every string inside it: dicts, lists, tuples
        and dataclasses are walked (their other values are kept as they are). For a result as a whole."""
        if self._pattern is None:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        """The same object when nothing inside it changed (so walking a clean result allocates nothing)."""
        kind = type(value)
        if kind in _ATOMS:  # most of a result's leaves: answered without the checks below
            return value
        if kind is str or isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            items = {key: self._walk(item) for key, item in value.items()}
            return items if any(items[k] is not v for k, v in value.items()) else value
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            if not value:
                return value
            items = [self._walk(item) for item in value]
            if all(a is b for a, b in zip(items, value)):
                return value
            return items if isinstance(value, list) else tuple(items)
        names = _init_fields(kind)
        if names:
            changes = None
            for name in names:
                before = getattr(value, name)
                # A field's None, number or text is answered here, not by a call per field (half a result's
                # fields are None or empty: a call each was most of a walk's time).
                field_kind = type(before)
                if field_kind in _ATOMS or (field_kind is tuple and not before):
                    continue
                after = self.text(before) if field_kind is str else self._walk(before)
                if after is not before:
                    if changes is None:
                        changes = {}
                    changes[name] = after
            return dataclasses.replace(value, **changes) if changes else value
        return value


# Leaves that hold no text: a walk returns them as they are.
_ATOMS = frozenset({int, float, bool, type(None)})

# What a redactor remembers as clean (``Redactor.text``): at most this many texts, of this many characters in all.
CLEAN_KEPT = 2048
CLEAN_KEPT_CHARS = 4_000_000


# Field annotations that hold no text: a walk does not look in such fields (a result's scores, counts and flags
# were half the fields it read).
_NO_TEXT = frozenset({int, float, bool, "int", "float", "bool", "int | None", "float | None", "bool | None",
                      "None | int", "None | float", "None | bool"})


@lru_cache(maxsize=None)
def _init_fields(kind: type) -> tuple[str, ...]:
    """A dataclass's fields set by its constructor that may hold text (empty for any other type): read once per
    class, not per value (``dataclasses.fields`` on every value walked was a tenth of a run's redaction time)."""
    if not dataclasses.is_dataclass(kind):
        return ()
    return tuple(f.name for f in dataclasses.fields(kind) if f.init and f.type not in _NO_TEXT)


@lru_cache(maxsize=64)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def redactor_for(secrets: Iterable[str]) -> Redactor:
    """The redactor for these secrets, built once per set and shared (routers, runs, tries)."""
    return _cached(tuple(sorted({s for s in secrets if s})))


NO_SECRETS = Redactor(())
