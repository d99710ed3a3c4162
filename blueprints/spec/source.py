"""Load YAML or JSON text into plain Python values plus a map of where each value stood.

The parser works on ordinary dicts and lists (fast, easy to reason about) and
asks a :class:`Locator` for the line and column of any value it complains
about. Containers are tracked by identity, so the map costs one dict entry per
value and nothing has to be wrapped.

YAML goes through libyaml's C parser when PyYAML was built with it; nodes keep
their marks, and we build the values ourselves so that duplicate keys are
caught instead of silently overwritten. JSON is checked with the standard
library (for its exact syntax errors) and then read by a small scanner that
records offsets.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring

import yaml

try:  # libyaml is much faster; fall back to the pure-Python loader when absent.
    from yaml import CSafeLoader as _YamlLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _YamlLoader

KEY = "<key>"  # ask a Locator for the position of a mapping key rather than its value


@dataclass
class SourceError(Exception):
    """The text is not valid YAML or JSON."""

    message: str
    line: int
    column: int
    hint: str | None = None

    def __str__(self) -> str:
        return f"{self.message} (line {self.line}, column {self.column})"


@dataclass
class DuplicateKey:
    key: str
    line: int
    column: int
    first_line: int


@dataclass
class Locator:
    """Maps (container, key-or-index) to the 1-based (line, column) of the value or key."""

    values: dict = field(default_factory=dict)
    keys: dict = field(default_factory=dict)
    starts: dict = field(default_factory=dict)  # id(container) -> where the container starts
    duplicates: list = field(default_factory=list)
    _alive: list = field(default_factory=list)  # keeps containers alive so ids stay unique

    def where(self, container, key=None) -> tuple[int, int] | None:
        if key is None:
            return self.starts.get(id(container))
        return self.values.get((id(container), key))

    def where_key(self, container, key) -> tuple[int, int] | None:
        return self.keys.get((id(container), key)) or self.values.get((id(container), key))


@dataclass
class Loaded:
    documents: list  # non-empty documents, in order
    document_starts: list  # (line, column) of each kept document
    locator: Locator
    fmt: str  # "yaml" or "json"


def load(text: str, fmt: str) -> Loaded:
    if fmt == "json":
        return _load_json(text)
    return _load_yaml(text)


# --- YAML ---------------------------------------------------------------------------

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_MERGE = "tag:yaml.org,2002:merge"

_YAML_HINTS = (
    (
        "mapping values are not allowed",
        "a `: ` inside an unquoted value starts a new key; wrap the whole value in quotes "
        "or use a block scalar (`|`)",
    ),
    ("found character '\\t'", "YAML indentation must use spaces, not tabs"),
    ("could not find expected ':'", "check the indentation of this line and the one above it"),
    (
        "did not find expected key",
        "check the indentation; list items (`- `) must line up under their parent key",
    ),
    ("found undefined alias", "an `*name` refers to an anchor that was never defined"),
    (
        "found unknown escape character",
        "inside double quotes a backslash starts an escape; write `\\\\` or use single quotes",
    ),
)


def _yaml_error(exc: yaml.YAMLError) -> SourceError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"Failed to parse YAML blueprint: {problem}"
    if context and context not in problem:
        message += f" ({context})"
    hint = next((h for needle, h in _YAML_HINTS if needle in problem), None)
    line = mark.line + 1 if mark else 1
    column = mark.column + 1 if mark else 1
    return SourceError(message, line, column, hint)


class _Builder:
    """Turns composed YAML nodes into Python values, recording positions."""

    def __init__(self, loader, locator: Locator):
        self.loader = loader
        self.locator = locator
        self.memo: dict[int, object] = {}  # anchors/aliases share one value

    def build(self, node):
        cached = self.memo.get(id(node))
        if cached is not None:
            return cached
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        if isinstance(node, yaml.SequenceNode):
            out: list = []
            self.memo[id(node)] = out
            self._started(out, node)
            values = self.locator.values
            cid = id(out)
            for index, child in enumerate(node.value):
                out.append(self.build(child))
                mark = child.start_mark
                values[(cid, index)] = (mark.line + 1, mark.column + 1)
            return out
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node)
        raise SourceError(f"Unsupported YAML node {node!r}", 1, 1)  # pragma: no cover

    def _started(self, container, node):
        self.locator._alive.append(container)
        mark = node.start_mark
        self.locator.starts[id(container)] = (mark.line + 1, mark.column + 1)

    def scalar(self, node):
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag == _NULL:
            return None
        if tag in (_BOOL, _INT, _FLOAT):
            return self.loader.construct_object(node)
        # Timestamps, binary and custom tags: keep the author's text. A date in a
        # description should stay the words the author typed.
        return node.value

    def mapping(self, node):
        out: dict = {}
        self.memo[id(node)] = out
        self._started(out, node)
        cid = id(out)
        values = self.locator.values
        keys = self.locator.keys
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merged = self.build(value_node)
                for part in merged if isinstance(merged, list) else [merged]:
                    if isinstance(part, dict):
                        for k, v in part.items():
                            out.setdefault(k, v)
                continue
            key = self.build(key_node)
            if isinstance(key, (dict, list)):
                key = json.dumps(key, default=str)
            kmark = key_node.start_mark
            vmark = value_node.start_mark
            if key in out:
                first = keys.get((cid, key), (0, 0))
                self.locator.duplicates.append(
                    DuplicateKey(str(key), kmark.line + 1, kmark.column + 1, first[0])
                )
            out[key] = self.build(value_node)
            keys[(cid, key)] = (kmark.line + 1, kmark.column + 1)
            values[(cid, key)] = (vmark.line + 1, vmark.column + 1)
        return out


def _load_yaml(text: str) -> Loaded:
    locator = Locator()
    documents: list = []
    starts: list = []
    loader = _YamlLoader(text)
    try:
        builder = _Builder(loader, locator)
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            builder.memo.clear()  # anchors never cross documents, and node ids are reused once freed
            value = builder.build(node)
            if value is None:  # an empty document, e.g. after a trailing `---`
                continue
            documents.append(value)
            starts.append((node.start_mark.line + 1, node.start_mark.column + 1))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from None
    finally:
        loader.dispose()
    return Loaded(documents, starts, locator, "yaml")


# --- JSON ---------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")


class _JsonReader:
    """A small recursive-descent reader for text already known to be valid JSON."""

    def __init__(self, text: str, locator: Locator):
        self.text = text
        self.locator = locator
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def skip(self, i: int) -> int:
        return _WS.match(self.text, i).end()

    def value(self, i: int):
        s = self.text
        c = s[i]
        if c == "{":
            return self.obj(i)
        if c == "[":
            return self.array(i)
        if c == '"':
            return scanstring(s, i + 1, True)
        if s.startswith("true", i):
            return True, i + 4
        if s.startswith("false", i):
            return False, i + 5
        if s.startswith("null", i):
            return None, i + 4
        m = _NUMBER.match(s, i)
        number = m.group(0)
        if m.group(1) or m.group(2):
            return float(number), m.end()
        return int(number), m.end()

    def array(self, i: int):
        out: list = []
        self.locator._alive.append(out)
        self.locator.starts[id(out)] = self.position(i)
        i = self.skip(i + 1)
        if self.text[i] == "]":
            return out, i + 1
        while True:
            i = self.skip(i)
            self.locator.values[(id(out), len(out))] = self.position(i)
            item, i = self.value(i)
            out.append(item)
            i = self.skip(i)
            if self.text[i] == "]":
                return out, i + 1
            i += 1  # the comma

    def obj(self, i: int):
        out: dict = {}
        self.locator._alive.append(out)
        self.locator.starts[id(out)] = self.position(i)
        i = self.skip(i + 1)
        if self.text[i] == "}":
            return out, i + 1
        while True:
            i = self.skip(i)
            key_pos = self.position(i)
            key, i = scanstring(self.text, i + 1, True)
            i = self.skip(i) + 1  # the colon
            i = self.skip(i)
            value_pos = self.position(i)
            value, i = self.value(i)
            if key in out:
                first = self.locator.keys.get((id(out), key), (0, 0))
                self.locator.duplicates.append(DuplicateKey(key, *key_pos, first[0]))
            out[key] = value
            self.locator.keys[(id(out), key)] = key_pos
            self.locator.values[(id(out), key)] = value_pos
            i = self.skip(i)
            if self.text[i] == "}":
                return out, i + 1
            i += 1


def _load_json(text: str) -> Loaded:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(
            f"Failed to parse JSON blueprint: {exc.msg}",
            exc.lineno,
            exc.colno,
            _json_hint(exc),
        ) from None
    except RecursionError:
        raise SourceError("Failed to parse JSON blueprint: nested too deeply", 1, 1) from None
    locator = Locator()
    reader = _JsonReader(text, locator)
    start = reader.skip(0)
    value, _ = reader.value(start)
    if value is None:
        return Loaded([], [], locator, "json")
    return Loaded([value], [reader.position(start)], locator, "json")


def _json_hint(exc: json.JSONDecodeError) -> str | None:
    if "Expecting property name enclosed in double quotes" in exc.msg:
        return "JSON keys need double quotes, and a trailing comma before `}` is not allowed"
    if "Expecting value" in exc.msg:
        return "a value is missing here (or there is a trailing comma before `]`)"
    if "Expecting ',' delimiter" in exc.msg:
        return "a comma is missing between two items"
    return None
