# Over 500 lines: the one YAML/JSON reader, with its limits pre-pass and the locator.
"""Load YAML or JSON text into plain Python values plus a map of where each value stood.

The parser works on ordinary dicts and lists (fast, easy to reason about) and
asks a :class:`Locator` for the line and column of any value it complains
about. Containers are tracked by identity, so the map costs one dict entry per
value and nothing has to be wrapped.

YAML goes through libyaml's C parser when PyYAML was built with it, once: we
build the values ourselves from its events (doing what its composer did with
anchors, aliases and tags), keeping their marks, so that duplicate keys are
caught instead of silently overwritten. JSON is checked with the standard
library (for its exact syntax errors) and then read by a small scanner that
records offsets.

Before any value is built, a pre-pass over the event stream (YAML) or the
brackets (JSON) enforces :class:`~.limits.Limits`: text size, nesting depth, and
the number of values and of characters with aliases expanded (an alias costs the
whole subtree of its anchor, and every character in it, each time it is used), so
an alias bomb or a long anchored text repeated many times is refused in
milliseconds instead of being built. Going past a limit is a located :class:`SourceError` naming the setting
that raises it.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring

import yaml
from yaml.composer import ComposerError
from yaml.constructor import SafeConstructor

from .limits import DEFAULT_LIMITS, Limits

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
    code: str = "syntax"  # "limit" when a Limits bound was passed

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


def load(text: str, fmt: str, limits: Limits = DEFAULT_LIMITS) -> Loaded:
    """Load YAML or JSON text; raises :class:`SourceError` (located) for bad text or a passed limit."""
    _check_size(text, limits)
    if fmt == "json":
        return _load_json(text, limits)
    return _load_yaml(text, limits)


# --- limits ---------------------------------------------------------------------------


def _position_of(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _check_size(text: str, limits: Limits) -> None:
    if len(text) > limits.max_text_chars:
        line, column = _position_of(text, limits.max_text_chars)
        raise SourceError(
            f"the text is {len(text):,} characters long, more than the limit of {limits.max_text_chars:,}",
            line, column, "split it into smaller blueprints, or raise the limit with the setting "
            "EVALSITE_MAX_BLUEPRINT_CHARS", "limit")


def _too_deep(limits: Limits, line: int, column: int, through_alias: bool = False) -> SourceError:
    how = " once the alias is expanded" if through_alias else ""
    return SourceError(
        f"lists and mappings are nested more than {limits.max_depth} deep here{how}", line, column,
        "flatten the structure, or raise the limit with the setting EVALSITE_MAX_DEPTH", "limit")


def _too_many(limits: Limits, line: int, column: int) -> SourceError:
    return SourceError(
        f"the document holds more than {limits.max_nodes:,} values once aliases are expanded (an alias `*name` "
        "counts every value of the anchor it repeats); the limit is passed here", line, column,
        "remove repeated aliases or split the blueprint, or raise the limit with the setting EVALSITE_MAX_NODES",
        "limit")


def _too_long(limits: Limits, line: int, column: int, alias: str | None = None, size: int = 0) -> SourceError:
    how = (f" (the alias `*{alias}` repeats {size:,} characters each time it is used)" if alias else "")
    return SourceError(
        f"the document holds more than {limits.max_expanded_chars:,} characters of text once aliases are "
        f"expanded{how}; the limit is passed here", line, column,
        "do not repeat a long anchor: write the long text once (or shorten it), or raise the limit with the "
        "setting EVALSITE_MAX_EXPANDED_CHARS", "limit")


def _beyond_python() -> SourceError:
    return SourceError("lists and mappings are nested too deeply to read", 1, 1,
                       "flatten the structure; EVALSITE_MAX_DEPTH is set higher than Python can follow", "limit")


def _check_yaml_events(text: str, limits: Limits, keep: list | None = None) -> bool:
    """Walk the event stream (nothing is built) and refuse documents past the node, character or depth limit.

    A container's size (values and characters) is the running total at its end minus the total
    at its start, and its depth the deepest level reached meanwhile, so a plain scalar costs two
    additions. Characters are those of the scalars (keys included); an alias adds its anchor's.
    ``keep`` (a list) gets the events. Returns whether any node has an anchor or is an alias.
    """
    named = False
    max_nodes, max_depth, max_chars = limits.max_nodes, limits.max_depth, limits.max_expanded_chars
    anchors: dict[str, tuple[int, int, int]] = {}  # anchor -> (values in its subtree, its depth, its characters)
    open_anchors: set[str] = set()
    stack: list[tuple] = []  # (anchor, total before it, deepest level before it, characters before it)
    total = 0
    chars = 0
    peak = 0  # deepest level reached since the innermost open container started
    scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    for event in yaml.parse(text, Loader=_YamlLoader):
        if keep is not None:
            keep.append(event)
        kind = type(event)
        if kind is scalar:
            total += 1
            size = len(event.value)
            chars += size
            if total > max_nodes:
                raise _too_many(limits, event.start_mark.line + 1, event.start_mark.column + 1)
            if chars > max_chars:
                raise _too_long(limits, event.start_mark.line + 1, event.start_mark.column + 1)
            if event.anchor:
                named = True
                anchors[event.anchor] = (1, 0, size)
        elif kind is alias:
            named = True
            mark = event.start_mark
            if event.anchor in open_anchors:
                raise SourceError(f"the alias `*{event.anchor}` is inside the node its anchor names, "
                                  "which would make the value contain itself", mark.line + 1, mark.column + 1,
                                  "copy the values instead of using an alias here", "syntax")
            size, depth, size_chars = anchors.get(event.anchor, (1, 0, 0))
            total += size
            chars += size_chars
            if total > max_nodes:
                raise _too_many(limits, mark.line + 1, mark.column + 1)
            if chars > max_chars:
                raise _too_long(limits, mark.line + 1, mark.column + 1, event.anchor, size_chars)
            level = len(stack) + depth
            if level > max_depth:
                raise _too_deep(limits, mark.line + 1, mark.column + 1, True)
            if level > peak:
                peak = level
        elif kind in starts:
            total += 1
            mark = event.start_mark
            if total > max_nodes:
                raise _too_many(limits, mark.line + 1, mark.column + 1)
            if len(stack) >= max_depth:
                raise _too_deep(limits, mark.line + 1, mark.column + 1)
            if event.anchor:
                named = True
                open_anchors.add(event.anchor)
            stack.append((event.anchor, total - 1, peak, chars))
            peak = len(stack)
        elif kind in ends:
            level = len(stack)
            anchor, before, outer_peak, chars_before = stack.pop()
            if anchor:
                open_anchors.discard(anchor)
                anchors[anchor] = (total - before, peak - level + 1, chars - chars_before)
            if outer_peak > peak:
                peak = outer_peak
        elif kind is yaml.DocumentStartEvent:
            anchors.clear()  # anchors never cross documents
    return named


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


# Integers past float's range cannot take part in any arithmetic a blueprint asks for
# (a weight, a temperature, a word count) without OverflowError; refuse them where they stand.
_MAX_INT = 10**308
_MAX_INT_CHARS = 400  # digits plus underscores and sign; longer is refused before converting


def _huge_number(line: int, column: int) -> SourceError:
    return SourceError("this number is too large (numbers must be between -1e308 and 1e308)", line, column,
                       "quote it if it is meant as text", "syntax")


class _Builder:
    """Turns a stream's events into Python values, document by document, recording positions: what composing
    each document into nodes (libyaml's composer) and building values from them did, in one walk of the events
    the limits pre-pass read already (the text is parsed once, not twice)."""

    def __init__(self, events: list, locator: Locator, max_depth: int | None = None):
        self.events = events  # the stream's events, read so far
        self.at = 0  # the next one
        self.locator = locator
        self.max_depth = max_depth  # checked here when the pre-pass was skipped (see _load_yaml)
        self.depth = 0
        self.constructor = SafeConstructor()  # booleans and numbers, as the loader constructs them
        self.anchors: dict = {}  # anchor -> (value, start mark, tag): an alias is its anchor's value
        self.mark = None  # the start mark and tag of the node node() last returned
        self.tag = None

    def document(self, check_anchors: bool):
        """The value of the document starting at ``at`` (its start event) and where it starts; ``at`` moves
        past its end."""
        self.at += 1
        if check_anchors:
            _check_anchors(self.events, self.at)
        self.anchors = {}
        value = self.node()
        self.at += 1  # its end
        return value, self.mark

    def node(self):
        event = self.events[self.at]
        self.at += 1
        kind = type(event)
        if kind is _SCALAR:
            tag = event.tag
            if tag is None or tag == "!":
                tag = _DEFAULT_SCALAR_TAG
                if event.implicit[0]:  # as the composer resolves a scalar written without a tag
                    value = event.value
                    for resolved, regexp in _BY_FIRST.get(value[0] if value else "", _WILDCARD):
                        if regexp.match(value):
                            tag = resolved
                            break
            value = event.value if tag == _STR else self.scalar(event, tag)
            self.mark, self.tag = event.start_mark, tag
            if event.anchor is not None:
                self.anchors[event.anchor] = (value, event.start_mark, tag)
            return value
        if kind is _ALIAS:
            value, self.mark, self.tag = self.anchors[event.anchor]
            return value
        if self.max_depth is None:
            return self.container(event, kind)
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                mark = event.start_mark
                raise _too_deep(Limits(max_depth=self.max_depth), mark.line + 1, mark.column + 1)
            return self.container(event, kind)
        finally:
            self.depth -= 1

    def container(self, event, kind):
        mark = event.start_mark
        tag = event.tag if event.tag not in (None, "!") else None  # only compared with the merge tag
        if kind is _SEQUENCE_START:
            out: list = []
            self._started(out, event)
            values = self.locator.values
            cid = id(out)
            events = self.events
            index = 0
            while type(events[self.at]) is not _SEQUENCE_END:
                out.append(self.node())
                child = self.mark
                values[(cid, index)] = (child.line + 1, child.column + 1)
                index += 1
            self.at += 1
            self.mark, self.tag = mark, tag
            return out
        return self.mapping(event, mark, tag)

    def _started(self, container, event):
        self.locator._alive.append(container)
        mark = event.start_mark
        self.locator.starts[id(container)] = (mark.line + 1, mark.column + 1)
        if event.anchor is not None:
            self.anchors[event.anchor] = (container, mark, event.tag if event.tag not in (None, "!") else None)

    def scalar(self, event, tag):
        if tag == _STR:
            return event.value
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return self.construct(event, tag)
        if tag in (_INT, _FLOAT):
            mark = event.start_mark
            if tag == _INT and len(event.value) > _MAX_INT_CHARS:
                raise _huge_number(mark.line + 1, mark.column + 1)
            try:
                value = self.construct(event, tag)
            except ValueError:  # e.g. Python's limit on digits in an int
                raise _huge_number(mark.line + 1, mark.column + 1) from None
            if tag == _INT and abs(value) > _MAX_INT:
                raise _huge_number(mark.line + 1, mark.column + 1)
            return value
        # Timestamps, binary and custom tags: keep the author's text. A date in a
        # description should stay the words the author typed.
        return event.value

    def construct(self, event, tag):
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        return self.constructor.construct_object(node)

    def mapping(self, event, mark, tag):
        out: dict = {}
        self._started(out, event)
        cid = id(out)
        values = self.locator.values
        keys = self.locator.keys
        events = self.events
        while type(events[self.at]) is not _MAPPING_END:
            key = self.node()
            kmark = self.mark
            if self.tag == _MERGE:
                merged = self.node()
                for part in merged if isinstance(merged, list) else [merged]:
                    if isinstance(part, dict):
                        for k, v in part.items():
                            out.setdefault(k, v)
                continue
            if isinstance(key, (dict, list)):
                key = json.dumps(key, default=str)
            vmark = self._peek_mark()
            if key in out:
                first = keys.get((cid, key), (0, 0))
                self.locator.duplicates.append(
                    DuplicateKey(str(key), kmark.line + 1, kmark.column + 1, first[0])
                )
            out[key] = self.node()
            keys[(cid, key)] = (kmark.line + 1, kmark.column + 1)
            values[(cid, key)] = (vmark.line + 1, vmark.column + 1)
        self.at += 1
        self.mark, self.tag = mark, tag
        return out

    def _peek_mark(self):
        """Where the next node starts (an alias: where its anchor's node does)."""
        event = self.events[self.at]
        if type(event) is _ALIAS:
            return self.anchors[event.anchor][1]
        return event.start_mark


_SCALAR, _ALIAS = yaml.ScalarEvent, yaml.AliasEvent
_SEQUENCE_START, _SEQUENCE_END, _MAPPING_END = yaml.SequenceStartEvent, yaml.SequenceEndEvent, yaml.MappingEndEvent
_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)

# The loader's implicit resolvers by first character, each list followed by the wildcard ones: what its
# resolve() (yaml.resolver.BaseResolver) tries for a plain scalar, in its order (SafeLoader has no path resolvers).
_IMPLICIT = _YamlLoader.yaml_implicit_resolvers
_WILDCARD = _IMPLICIT.get(None, [])
_BY_FIRST = {first: resolvers + _WILDCARD for first, resolvers in _IMPLICIT.items() if first is not None}
_DEFAULT_SCALAR_TAG = _YamlLoader.DEFAULT_SCALAR_TAG
assert not _YamlLoader.yaml_path_resolvers


def _check_anchors(events: list, at: int) -> None:
    """The composer's refusals, before any value of the document from ``at`` is built: an alias to no anchor,
    an anchor given twice."""
    seen: dict = {}
    for index in range(at, len(events)):  # by index: an islice would step over the earlier documents each time
        event = events[index]
        kind = type(event)
        if kind is yaml.DocumentEndEvent:
            return
        if kind is _ALIAS:
            if event.anchor not in seen:
                raise ComposerError(None, None, "found undefined alias", event.start_mark)
        elif kind in _NODE_EVENTS and event.anchor is not None:
            if event.anchor in seen:
                raise ComposerError("found duplicate anchor; first occurrence", seen[event.anchor],
                                    "second occurrence", event.start_mark)
            seen[event.anchor] = event.start_mark


def _last_end(events: list) -> int:
    """How many of ``events`` end with the last document read to its end."""
    for index in range(len(events) - 1, -1, -1):
        if type(events[index]) is yaml.DocumentEndEvent:
            return index + 1
    return 0


def _load_yaml(text: str, limits: Limits = DEFAULT_LIMITS) -> Loaded:
    locator = Locator()
    documents: list = []
    starts: list = []
    # Without aliases every value takes at least one character, so text no longer than the
    # node limit cannot pass it, and no value is longer than the text that writes it, so text
    # no longer than the character limit cannot pass that: skip the pre-pass and check the
    # depth while building instead; each document is built once its events are read.
    fast = "*" not in text and len(text) <= limits.max_nodes and len(text) <= limits.max_expanded_chars
    events: list = []
    unread = None  # fast: the syntax error that ended the events, raised where composing would have met it
    try:
        if fast:
            try:
                events.extend(yaml.parse(text, Loader=_YamlLoader))
            except yaml.YAMLError as exc:
                unread = exc
            named = "&" in text  # no `*` in the text: no alias
        else:
            named = _check_yaml_events(text, limits, events)
        # A document is built once its end was read, as the composer gave it whole: a document's own syntax
        # error comes before a value it holds is refused, one in a later document after.
        complete = len(events) if unread is None else _last_end(events)
        builder = _Builder(events, locator, limits.max_depth if fast else None)
        builder.at = 1  # past the stream's start
        while builder.at < complete and type(events[builder.at]) is yaml.DocumentStartEvent:
            value, mark = builder.document(named)
            if value is None:  # an empty document, e.g. after a trailing `---`
                continue
            documents.append(value)
            starts.append((mark.line + 1, mark.column + 1))
        if unread is not None:
            raise unread
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from None
    except RecursionError:  # only when EVALSITE_MAX_DEPTH is set above what Python can recurse
        raise _beyond_python() from None
    return Loaded(documents, starts, locator, "yaml")


# --- JSON ---------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")


class _JsonReader:
    """A small recursive-descent reader for text already known to be valid JSON.

    It counts values and depth as it goes (refusing past the limits before recursing
    further) and refuses what Python's json accepts but JSON does not: NaN and Infinity,
    and numbers out of float's range.
    """

    def __init__(self, text: str, locator: Locator, limits: Limits = DEFAULT_LIMITS):
        self.text = text
        self.locator = locator
        self.limits = limits
        self.nodes = 0
        self.depth = 0
        # JSON has no aliases, so its strings hold fewer characters than its text: they are counted
        # only when the operator set the character limit below the text's length.
        self.chars_left = limits.max_expanded_chars if len(text) > limits.max_expanded_chars else None
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def skip(self, i: int) -> int:
        return _WS.match(self.text, i).end()

    def value(self, i: int):
        s = self.text
        c = s[i]
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            raise _too_many(self.limits, *self.position(i))
        if c == "{":
            return self.nested(self.obj, i)
        if c == "[":
            return self.nested(self.array, i)
        if c == '"':
            return self.string(i)
        if s.startswith("true", i):
            return True, i + 4
        if s.startswith("false", i):
            return False, i + 5
        if s.startswith("null", i):
            return None, i + 4
        m = _NUMBER.match(s, i)
        if m is None:  # NaN, Infinity, -Infinity: Python's json reads them, JSON does not have them
            word = re.match(r"-?[A-Za-z]+", s[i:i + 12])
            raise SourceError(f"Failed to parse JSON blueprint: `{word.group(0) if word else s[i]}` is not a JSON "
                              "value", *self.position(i), "JSON has no NaN or Infinity; write a number or null",
                              "syntax")
        number = m.group(0)
        if m.group(1) or m.group(2):
            value = float(number)
            if value in (_INF, -_INF):
                raise _huge_number(*self.position(i))
            return value, m.end()
        if len(number) > _MAX_INT_CHARS:
            raise _huge_number(*self.position(i))
        value = int(number)
        if abs(value) > _MAX_INT:
            raise _huge_number(*self.position(i))
        return value, m.end()

    def string(self, i: int):
        value, end = scanstring(self.text, i + 1, True)
        if self.chars_left is not None:
            self.chars_left -= len(value)
            if self.chars_left < 0:
                raise _too_long(self.limits, *self.position(i))
        return value, end

    def nested(self, read, i: int):
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise _too_deep(self.limits, *self.position(i))
        result = read(i)
        self.depth -= 1
        return result

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
            key, i = self.string(i)
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


_INF = float("inf")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _deep_json(text: str, limits: Limits) -> SourceError:
    """Where JSON too deep for Python's own reader passes the depth limit."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        c = m.group(0)
        if c in "[{":
            depth += 1
            if depth > limits.max_depth:
                return _too_deep(limits, *_position_of(text, m.start()))
        elif c in "]}":
            depth -= 1
    return _too_deep(limits, 1, 1)


def _load_json(text: str, limits: Limits = DEFAULT_LIMITS) -> Loaded:
    try:
        # Numbers stay text here: the reader converts them with a size check (Python refuses to
        # convert ints of more than 4,300 digits with a bare ValueError).
        json.loads(text, parse_int=str, parse_float=str, parse_constant=str)
    except json.JSONDecodeError as exc:
        raise SourceError(
            f"Failed to parse JSON blueprint: {exc.msg}",
            exc.lineno,
            exc.colno,
            _json_hint(exc),
        ) from None
    except RecursionError:
        raise _deep_json(text, limits) from None
    locator = Locator()
    reader = _JsonReader(text, locator, limits)
    start = reader.skip(0)
    try:
        value, _ = reader.value(start)
    except RecursionError:  # only when EVALSITE_MAX_DEPTH is set above what Python can recurse
        raise _beyond_python() from None
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
