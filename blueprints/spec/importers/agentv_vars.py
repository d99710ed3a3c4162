"""AgentV 4's per-test ``vars``: ``{{ name }}`` placeholders filled in before a test is read.

What AgentV 4.42 does (its yaml-parser and interpolation modules, read for the facts only):

* a test's ``vars`` is used when it is a mapping; its values fill ``{{ name }}`` (spaces allowed, dotted
  names such as ``{{ person.name }}`` look through nested mappings) in the test's ``criteria``,
  ``expected_outcome``, ``input``, ``input_files`` and ``expected_output``, and in the suite's ``input``
  and ``input_files`` as prepended to that test;
* a placeholder naming no value is left as written;
* a text that is exactly one placeholder becomes the value itself (a mapping stays a mapping); inside
  other text a value is written as text (text as is, anything else as compact JSON);
* the filled-in values are not filled in again.

The copies made here keep the positions of what they copy (a problem in a filled-in field is shown where
the field is written), and what filling in adds is bounded (``Limits.max_expanded_chars`` for a suite).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..source import Locator

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
TEST_FIELDS = ("criteria", "expected_outcome", "input", "input_files", "expected_output")
SUITE_FIELDS = ("input", "input_files")
_MISSING = object()


class TooLarge(Exception):
    """Filling in the values would make more text than the suite may hold."""


def _js_value(value: Any) -> Any:
    """``value`` as JavaScript's JSON.stringify writes it: whole floats as integers, NaN and infinities as null."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [_js_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _js_value(v) for k, v in value.items()}
    return value


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(_js_value(value), ensure_ascii=False, separators=(",", ":"), default=str)


class VarsFiller:
    """Fills one test's ``vars`` into copies of the values it is given; ``budget`` is shared by a suite's tests
    (a list of one number, spent as text is added)."""

    def __init__(self, variables: dict, budget: list[int]):
        self.variables = variables
        self.budget = budget
        self.used = False  # whether any placeholder was filled in

    def lookup(self, expression: str) -> Any:
        current: Any = self.variables
        for segment in expression.split("."):
            if not isinstance(current, dict) or segment not in current:
                return _MISSING
            current = current[segment]
        return current

    def spend(self, chars: int) -> None:
        self.budget[0] -= chars
        if self.budget[0] < 0:
            raise TooLarge

    def fields(self, mapping: dict, names, locator: Locator) -> dict:
        """A copy of ``mapping`` whose fields ``names`` are filled in (the others shared), at the same places."""
        out = {key: self.value(value, locator) if key in names else value for key, value in mapping.items()}
        return relocate(mapping, out, locator)

    def value(self, value: Any, locator: Locator) -> Any:
        if isinstance(value, str):
            return self.text(value, locator)
        if isinstance(value, list):
            return relocate(value, [self.value(v, locator) for v in value], locator)
        if isinstance(value, dict):
            return relocate(value, {k: self.value(v, locator) for k, v in value.items()}, locator)
        return value

    def text(self, text: str, locator: Locator) -> Any:
        whole = PLACEHOLDER.fullmatch(text)
        if whole:
            found = self.lookup(whole.group(1))
            if found is _MISSING:
                return text
            self.used = True
            self.spend(len(as_text(found)))
            return copy_value(found, locator)

        def fill(match: re.Match) -> str:
            found = self.lookup(match.group(1))
            if found is _MISSING:
                return match.group(0)
            self.used = True
            filled = as_text(found)
            self.spend(len(filled))
            return filled

        return PLACEHOLDER.sub(fill, text)


def relocate(original, copy, locator: Locator):
    """Give ``copy`` (of the same keys or indexes as ``original``) the positions ``original`` has."""
    keys = original.keys() if isinstance(original, dict) else range(len(original))
    for key in keys:
        where = locator.values.get((id(original), key))
        if where is not None:
            locator.values[(id(copy), key)] = where
        where = locator.keys.get((id(original), key))
        if where is not None:
            locator.keys[(id(copy), key)] = where
    if id(original) in locator.starts:
        locator.starts[id(copy)] = locator.starts[id(original)]
    locator._alive.append(copy)
    return copy


def copy_value(value: Any, locator: Locator) -> Any:
    """A deep copy of a ``vars`` value (AgentV copies it), shown where the value is written."""
    if isinstance(value, list):
        return relocate(value, [copy_value(v, locator) for v in value], locator)
    if isinstance(value, dict):
        return relocate(value, {k: copy_value(v, locator) for k, v in value.items()}, locator)
    return value
