"""Weval points, read into :class:`Point` values (see parse.py for the whole walk)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import yaml

from . import functions
from .diagnostics import format_path
from .functions import is_number
from .extensions import POINT_EXTENSION_KEYS
from .jsregex import RegexError, compile_js
from .schema import (
    Origin,
    Point,
    construct,
)
from .notes import Notes, did_you_mean, short, type_name
from .extensions import Extensions


POINT_OBJECT_KEYS = frozenset({"text", "point", "fn", "fnArgs", "arg", "weight", "multiplier", "citation", "critical",
                               *POINT_EXTENSION_KEYS})
FUNCTION_OBJECT_KEYS = frozenset({"weight", "multiplier", "citation", "critical", *POINT_EXTENSION_KEYS})


_QUOTED_CALL = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$", re.S)


class PointReader:
    """Points: `should`/`should_not` blocks, alternative paths, text, function and `$ref` points."""

    def __init__(self, notes: Notes, ext: Extensions, *, json: bool, call_hosts: frozenset):
        self.notes, self.ext = notes, ext
        self.error, self.warn = notes.error, notes.warn
        self.json = json
        self.call_hosts = call_hosts
        self.point_defs: dict[str, Any] = {}
        self.defs_container: dict | None = None
        self.defs_key: str | None = None
        self.expanded_defs: dict[str, Point | None] = {}
        self.expanding: set[str] = set()

    def read_defs(self, h, key, bp):
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
                           f"not {type_name(definition)}", defs, name, (key, name), code="point-defs")

    def read_block(self, holder, key, path, label, *, inverted) -> list:
        raw = holder[key]
        if not isinstance(raw, list):
            if isinstance(raw, (str, dict)):
                self.error(f"`{path[-1]}` must be a list of points, not {type_name(raw)}", holder, key, path,
                           f"start each point on its own line with `- `", "type")
            else:
                self.error(f"`{path[-1]}` must be a list of points, not {type_name(raw)}", holder, key, path,
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
        line, column = self.notes.position(container, key)
        origin = construct(Origin, path=format_path(path), line=line, column=column)
        if isinstance(item, list):  # a legacy tuple point
            return self.function_point(functions.resolve(item[0]), item[1], True, (item, 1, (*path, 1)), origin, label,
                                       inverted, written=item[0])
        if isinstance(item, str):
            return self.string_point(item, container, key, path, origin, label, inverted)
        if isinstance(item, dict):
            point = self.object_point(item, container, key, path, origin, label, inverted)
            return self.read_critical(item, path, self.ext.point_extensions(item, path, point))
        self.error(f"Invalid point format in prompt '{label}': Point must be a string, array, or object.",
                   container, key, path, "quote the text of a judged point", "point")
        return None

    def read_critical(self, item: dict, path, point: Point | None) -> Point | None:
        """``critical: true`` (ours, beyond Weval's format): a deal-breaker point, whose failure rate gets a bound
        beside the should-not points' (docs/blueprints.md, "Extension keys")."""
        if point is None or "critical" not in item:
            return point
        value = item["critical"]
        if not isinstance(value, bool):
            self.error(f"`critical` must be true or false, not {short(value)} ({type_name(value)})", item, "critical",
                       (*path, "critical"), "write `critical: true` to mark a deal-breaker point, or remove the key",
                       "critical")
            return None
        point.critical = value
        return point

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
        return construct(Point, text=item, inverted=inverted, origin=origin)

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
            self.notes.unknown_keys(item, POINT_OBJECT_KEYS, path, "a point")
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
                self.error(f"`{text_key}` must be text, not {type_name(text)}", item, text_key, (*path, text_key),
                           code="point")
                return None
            multiplier = self.read_multiplier(weight, item, weight_key, path, label)
            if multiplier is None:
                return None
            return construct(Point, text=text, multiplier=multiplier, citation=item.get("citation"), inverted=inverted,
                         origin=origin)
        if len(item) == 1:
            ((text, citation),) = item.items()
            if isinstance(citation, str):
                if isinstance(text, str) and functions.resolve(text) and not re.search(r"\s", text):
                    self.warn(f"`{text}: ...` is read as a judged point with a citation; did you mean the function "
                              f"`${text}`?", item, text, path, f"write `${text}: {short(citation, 40)}`",
                              "citation-or-function", at_key=True)
                return construct(Point, text=str(text), citation=citation, inverted=inverted, origin=origin)
        hint = "a point is judged text, `$function: args`, `{text: ..., weight: ...}` or `\"text\": citation`"
        for k in item:
            if isinstance(k, str) and functions.resolve(k):
                hint = f"did you mean `${k}`? function names start with `$`"
                break
            close = did_you_mean(k, POINT_OBJECT_KEYS)
            if close:
                hint = f"did you mean `{close}`?"
                break
        self.error(f"Invalid point object in prompt '{label}': Point must define 'text', a function ('fn' or '$...'), "
                   f"or a 'Point: Citation' pair. Found: {short(item)}", container, key, path, hint, "point")
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
        self.error(f"Point multiplier must be a number between 0.1 and 10. Found {short(weight)}. Prompt ID: '{label}'",
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
                self.warn(f"regex {short(pattern, 60)} does not compile: {exc.message}{where}; the point will be "
                          "not evaluated", container, key, path, "fix the pattern; test it with a few sample answers",
                          "regex")
        self.lint_function(canonical, args, container, key, path)
        spelling = functions.upstream_spelling(written) if written else None
        return construct(Point, fn=canonical, fn_args=args if has_args else None, has_args=has_args,
                         multiplier=multiplier, citation=citation, inverted=inverted, origin=origin,
                         fn_as_written=spelling if spelling != canonical else None)

    def lint_function(self, canonical, args, container, key, path):
        if canonical == "factcheck":
            self.warn("`$factcheck` is not supported by evalsite; the point will be not evaluated", container, key,
                      path, "use a judged point that states the fact to check", "unsupported")
        elif canonical == "call":
            url = None
            if isinstance(args, dict):
                url = args.get("url")
                if url is not None and not isinstance(url, str):
                    self.error(f"the `$call` `url` must be text (an http:// or https:// address), not "
                               f"{type_name(url)}", args, "url", (*path, "url"), "write `url: https://host/path`",
                               "call-url")
                    return
                if url is None and isinstance(args.get("service"), str):
                    url = "service:" + args["service"]
            host = port = None
            if isinstance(url, str) and not url.startswith("service:"):
                host, port = _call_host(url)
                if host is None:
                    self.error(f"the `$call` `url` {short(url, 60)} is not an http:// or https:// address with a host",
                               args, "url", (*path, "url"), "write it as `https://host/path`", "call-url")
                    return
            if host is None or (host not in self.call_hosts and f"{host}:{port}" not in self.call_hosts):
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
            suggestion = did_you_mean(name, self.point_defs)
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
            point = self.ext.point_extensions(definition, (self.defs_key, name), point)
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
        checks, self.ext.checks = self.ext.checks, []  # a definition's checks belong to each prompt using it
        definition = self.point_defs[name]
        dpath = (self.defs_key, name)
        if isinstance(definition, str):
            line, column = self.notes.position(self.defs_container, name)
            point = self.function_point("js", definition, True, (self.defs_container, name, dpath),
                                        Origin(path=format_path(dpath), line=line, column=column), f"point_defs.{name}",
                                        False)
        elif isinstance(definition, dict):
            point = self.read_point(definition, self.defs_container, name, dpath, f"point_defs.{name}", False)
        else:
            point = None  # already reported by read_point_defs
        self.expanding.discard(name)
        self.ext.checks = checks
        self.expanded_defs[name] = point
        return point


def _call_host(url: str) -> tuple[str | None, int | None]:
    """The host (lower case) and port a `$call` url reaches; (None, None) when it is not an http(s)
    address with a host. The engine (runs/engine/points/call.py) allows `host` or `host:port`."""
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number, a bracketed host that is not an address
        return None, None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None, None
    return host, port


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

