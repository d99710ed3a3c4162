"""The diagnostics collector every reader shares: where a value stood, and what is wrong with it.

``Notes`` turns (container, key, path) into a :class:`Diagnostic` with the line and
column the locator recorded. The Weval reader (``parse.py`` and its header, prompt
and point readers) and the importers (AgentV, AI Eval) all report through one;
an importer reading a companion file points it at that file for a while
(``inside``), so a problem there names the file and is shown where the main file
names it.
"""

from __future__ import annotations

import difflib
import json
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable

from .diagnostics import Diagnostic, format_path
from .functions import is_number
from .schema import Origin
from .source import Loaded, Locator

MAX_MESSAGE_CHARS = 500


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    match = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.75)
    return match[0] if match else None


def choice_hint(value, choices) -> str:
    suggestion = did_you_mean(str(value), choices)
    if suggestion:
        return f"did you mean `{suggestion}`?"
    return "use one of: " + ", ".join(choices)


def type_name(value: Any) -> str:
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


def short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class External:
    """A companion file being read: its name, its positions, and where the main file names it."""

    name: str
    locator: Locator
    at: tuple[int, int]


class Notes:
    """Collects the errors and warnings of one read, each at its place."""

    def __init__(self, loaded: Loaded):
        self.loaded = loaded
        self.locator = loaded.locator
        self.diagnostics: list[Diagnostic] = []
        self.external: External | None = None

    # --- places --------------------------------------------------------------------------

    def position(self, container, key=None, at_key=False) -> tuple[int, int]:
        """Line and column of ``container[key]`` (or of its key) in the file being read."""
        if container is None:
            return self.loaded.document_starts[0] if self.loaded.document_starts else (1, 1)
        if key is None:
            pos = self.locator.where(container)
        elif at_key:
            pos = self.locator.where_key(container, key)
        else:
            pos = self.locator.where(container, key)
        return pos or self.locator.where(container) or (1, 1)

    def position_of(self, container, key=None) -> tuple[int, int]:
        """Where a value is shown: in the main file; for a companion file, where the main file names it."""
        if self.external is not None:
            return self.external.at
        return self.position(container, key)

    def origin(self, container, key, path) -> Origin:
        line, column = self.position_of(container, key)
        return Origin(path=format_path(path), line=line, column=column)

    @contextmanager
    def inside(self, name: str, locator: Locator, at: tuple[int, int]):
        """Report problems as found in the companion file ``name`` (named in the main file at ``at``)."""
        outer, self.external = self.external, External(name, locator, at)
        try:
            yield
        finally:
            self.external = outer

    # --- reporting -----------------------------------------------------------------------

    def add(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def report(self, severity, message, container, key, path, hint=None, code="", at_key=False) -> None:
        external = self.external
        if external is None:
            line, column = self.position(container, key, at_key)
        else:
            own, self.locator = self.locator, external.locator
            try:
                inner_line, inner_column = self.position(container, key, at_key)
            finally:
                self.locator = own
            message = f"in {external.name}, line {inner_line}, column {inner_column}: {message}"
            line, column = external.at
        if len(message) > MAX_MESSAGE_CHARS:  # a message quoting a huge value stays readable (and small)
            message = message[:MAX_MESSAGE_CHARS - 1] + "…"
        self.diagnostics.append(Diagnostic(severity, message, line, column, format_path(path), hint, code))

    def error(self, message, container, key, path, hint=None, code="", at_key=False) -> None:
        self.report("error", message, container, key, path, hint, code, at_key)

    def warn(self, message, container, key, path, hint=None, code="", at_key=False) -> None:
        self.report("warning", message, container, key, path, hint, code, at_key)

    def error_count(self) -> int:
        return sum(d.is_error for d in self.diagnostics)

    # --- common checks -------------------------------------------------------------------

    def unknown_keys(self, mapping: dict, known: Iterable[str], path: tuple, what: str) -> None:
        if not isinstance(known, (frozenset, set, tuple, list)):
            known = list(known)
        if all(key in known for key in mapping):  # the usual case, asked of every prompt and point
            return
        known = list(known)
        for key in mapping:
            if key in known:
                continue
            suggestion = did_you_mean(key, known)
            hint = f"did you mean `{suggestion}`?" if suggestion else f"known keys: {', '.join(sorted(known))}"
            self.warn(f"unknown key `{key}` in {what}; it is ignored", mapping, key, (*path, key),
                      hint, "unknown-key", at_key=True)

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
        self.error(f"`{path[-1]}` must be text, not {type_name(value)}", container, key, path,
                   "quote the value", "type")
        return None

    def expect_bool(self, container, key, path) -> bool | None:
        value = container[key]
        if isinstance(value, bool) or value is None:
            return value
        self.error(f"`{path[-1]}` must be true or false, not {short(value)}", container, key, path, code="type")
        return None
