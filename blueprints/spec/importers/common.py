"""What the AgentV and AI Eval importers share: located problems, the import report, companion files.

An importer reads a suite with the same machinery as the Weval parser (``source.load``
and its Locator; the shared ``Notes`` for ``error``/``warn``/``unknown_keys``), and
builds the normalised ``Blueprint`` directly. Problems inside a companion file (an
external tests file) are reported at the line that names the file, with the file,
line and column inside it at the start of the message.

The import report has one entry per test (and one for the suite): what mapped
directly, what was approximated (and how), what is not supported (and why).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..diagnostics import Diagnostic, format_path
from ..functions import is_number  # noqa: F401  (the importers take it from here)
from ..header_reader import check_collections
from ..notes import External, Notes
from ..parse import ParseResult
from ..limits import DEFAULT_LIMITS, Limits
from ..schema import Blueprint, Check, Origin, Point, PointSees
from ..source import Loaded, Locator, SourceError, load


@dataclass
class TestReport:
    id: str
    line: int | None = None
    mapped: list[str] = field(default_factory=list)
    approximated: list[dict] = field(default_factory=list)  # {what, how}
    unsupported: list[dict] = field(default_factory=list)  # {what, why}

    def map(self, what: str) -> None:
        if what not in self.mapped:
            self.mapped.append(what)

    def approx(self, what: str, how: str) -> None:
        entry = {"what": what, "how": how}
        if entry not in self.approximated:
            self.approximated.append(entry)

    def unsupported_(self, what: str, why: str) -> None:
        entry = {"what": what, "why": why}
        if entry not in self.unsupported:
            self.unsupported.append(entry)

    def to_dict(self) -> dict:
        return {"id": self.id, "line": self.line, "mapped": self.mapped, "approximated": self.approximated,
                "unsupported": self.unsupported}


@dataclass
class ImportReport:
    dialect: str
    label: str  # "AgentV (eval spec v2)", "AI Eval"
    suite: TestReport = field(default_factory=lambda: TestReport("(suite)"))
    tests: list[TestReport] = field(default_factory=list)
    files_used: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        counts = {"mapped": 0, "approximated": 0, "unsupported": 0}
        for entry in [self.suite, *self.tests]:
            counts["mapped"] += len(entry.mapped)
            counts["approximated"] += len(entry.approximated)
            counts["unsupported"] += len(entry.unsupported)
        return {"dialect": self.dialect, "label": self.label, "suite": self.suite.to_dict(),
                "tests": [t.to_dict() for t in self.tests], "filesUsed": self.files_used, "counts": counts}


def normalize_relative(name: str) -> str | None:
    """A companion file's key as the suite writes it: ``./judges/x.md`` -> ``judges/x.md``. A leading ``/`` is
    dropped (AgentV then looks for the path from the suite's folder up to the repository root; see
    companions.py); None for a Windows drive path."""
    if not isinstance(name, str) or not name.strip():
        return None
    name = name.strip()
    if name.startswith("file://"):
        name = name[len("file://"):]
    if re.match(r"^[A-Za-z]:[\\/]", name):
        return None
    name = name.replace("\\", "/").lstrip("/")
    return posixpath.normpath(name) if name else None


class ImportReader:
    """What every importer shares: its ``Notes`` (problems at their place, also inside a companion
    file), the companion files it was given, and the result it builds. Importers read their own
    format; from the Weval reader they use only public functions (``check_collections``)."""

    dialect = "unknown"

    def __init__(self, loaded: Loaded, *, derived_id, collections, call_hosts, files: Mapping[str, str] | None,
                 limits: Limits = DEFAULT_LIMITS):
        self.loaded = loaded
        self.notes = notes = Notes(loaded)
        self.error, self.warn, self.expect_text = notes.error, notes.warn, notes.expect_text
        self.position_of, self.origin = notes.position_of, notes.origin
        self.derived_id = derived_id
        self.collections = collections
        self.call_hosts = call_hosts
        self.limits = limits
        self.files = {normalize_relative(k): v for k, v in (files or {}).items() if normalize_relative(k)}
        # Files the suite names that could not be read from disk, and why (companions.Companions.problems).
        self.file_problems = {(normalize_relative(k) or ""): str(v)
                              for k, v in (getattr(files, "problems", None) or {}).items()}
        self.extras: dict[str, Any] = {}
        self.used_files: list[str] = []

    @property
    def external(self) -> External | None:
        """The companion file being read, if any: problems are reported as found in it."""
        return self.notes.external

    @external.setter
    def external(self, value: External | None) -> None:
        self.notes.external = value

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.notes.diagnostics

    # --- companion files ---------------------------------------------------------------------

    def companion(self, name: str) -> str | None:
        key = normalize_relative(name)
        if key is None or key not in self.files:
            return None
        if key not in self.used_files:
            self.used_files.append(key)
        return self.files[key]

    def load_companion(self, name: str, holder, key, path) -> tuple[Loaded | None, str | None]:
        """A YAML/JSON/JSONL companion file, loaded with positions; problems reported at the reference."""
        text = self.companion(name)
        if text is None:
            return None, None
        lower = name.lower()
        if lower.endswith(".jsonl"):
            text = jsonl_as_array(text)
            fmt = "json"
        elif lower.endswith(".json"):
            fmt = "json"
        else:
            fmt = "yaml"
        try:
            return load(text, fmt, self.limits), text
        except SourceError as exc:
            line, column = self.notes.position(holder, key)
            self.notes.add(Diagnostic(
                "error", f"in {name}, line {exc.line}, column {exc.column}: {exc.message}", line, column,
                format_path(path), exc.hint, "syntax"))
            return None, None

    def file_problem(self, name: str) -> str | None:
        """Why the file ``name`` could not be read from disk (a name too long, a folder, no permission...), once:
        the problem is then reported where the suite names the file, not again at the end."""
        return self.file_problems.pop(normalize_relative(name) or "", None) if isinstance(name, str) else None

    def file_not_found(self, name: str, holder, key, path, where: str) -> None:
        """A file block whose file is not there: AgentV warns and drops the block; so does evalsite."""
        why = self.file_problem(name)
        if why:
            self.warn(f"{where} file '{short(name, 120)}' could not be read: {why}; the block is left out", holder,
                      key, path, "fix the path, or the file's name or permissions", "unreadable-file")
            return
        self.warn(f"{where} file '{name}' was not found (looked in the suite's folder, its parent folders up to the "
                  "repository root, and the imported folder); the block is left out, as AgentV leaves it out",
                  holder, key, path, "import the suite's whole folder (the folder holding .git, or the run command "
                  "on the file) so the file comes along, or fix the path", "missing-file")

    def missing_file(self, name: str, holder, key, path, what: str) -> None:
        why = self.file_problem(name)
        if why:
            self.error(f"{what} '{short(name, 120)}' could not be read: {why}", holder, key, path,
                       "fix the path, or the file's name or permissions", "unreadable-file")
            return
        self.error(f"{what} '{name}' did not come with the suite", holder, key, path,
                   "import the suite's whole folder (.venv/bin/python manage.py import_blueprints DIR, or the run command on "
                   "the file), so the files it names come along", "missing-file")

    # --- building ------------------------------------------------------------------------------

    def report_file_problems(self) -> None:
        """File problems no reader reported where it uses the file: each at the value that names the file."""
        for name, why in list(self.file_problems.items())[:50]:
            found = find_text(self.loaded.documents, name) if name else None
            holder, key, path = found or (None, None, ())
            self.warn(f"'{short(name, 120)}' could not be read: {why}" if name else f"a file could not be read: {why}",
                      holder, key, path, "fix the path, or the file's name or permissions", "unreadable-file")
        self.file_problems.clear()

    def result(self, blueprint: Blueprint, report: ImportReport, fmt: str) -> ParseResult:
        self.report_file_problems()
        report.files_used = list(self.used_files)
        check_collections(self.notes, blueprint, {}, self.collections)
        errors = [d for d in self.diagnostics if d.is_error]
        warnings = [d for d in self.diagnostics if not d.is_error]
        return ParseResult(blueprint if not errors else None, errors, warnings, fmt, dialect=self.dialect,
                           import_report=report.to_dict(), extras=self.extras)


def find_text(documents, name: str, limit: int = 100_000):
    """``(container, key, path)`` of the first text in ``documents`` that names the file ``name`` (as a whole,
    or as one word of a command), or None. A bounded walk: at most ``limit`` values."""
    stack: list[tuple[Any, tuple]] = [(doc, ()) for doc in reversed(documents)]
    seen = 0
    while stack and seen < limit:
        value, path = stack.pop()
        seen += 1
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        children = []
        for key, child in items:
            if isinstance(child, str) and len(child) <= 10_000 and (
                    normalize_relative(child) == name or name in (normalize_relative(w) for w in child.split()[:50])):
                return value, key, (*path, key)
            if isinstance(child, (dict, list)):
                children.append((child, (*path, key)))
        stack.extend(reversed(children))
    return None


def jsonl_as_array(text: str) -> str:
    """JSON Lines as one JSON array with the same line numbers (so positions stay right)."""
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    out = []
    for i, line in enumerate(lines):
        if i in filled and i != filled[-1]:
            out.append(line.rstrip() + ",")
        else:
            out.append(line)
    return "[" + "\n".join(out) + "]"


def csv_rows(text: str) -> tuple[list[dict], Locator]:
    """CSV with a header row -> row mappings; the Locator knows each cell's line and column (its field number)."""
    import csv
    import io

    locator = Locator()
    reader = csv.reader(io.StringIO(text))
    rows: list[dict] = []
    header: list[str] | None = None
    start = 1
    for fields in reader:
        line = start
        start = reader.line_num + 1
        if header is None:
            header = [h.strip() for h in fields]
            continue
        if not any(f.strip() for f in fields):
            continue
        row: dict = {}
        locator._alive.append(row)
        locator.starts[id(row)] = (line, 1)
        for index, name in enumerate(header):
            if index < len(fields) and fields[index] != "" and name:
                row[name] = fields[index]
                locator.values[(id(row), name)] = (line, index + 1)
                locator.keys[(id(row), name)] = (line, index + 1)
        rows.append(row)
    locator._alive.append(rows)
    for i, row in enumerate(rows):
        locator.values[(id(rows), i)] = locator.starts[id(row)]
    return rows, locator


def new_check(checks: list[Check], *, label: str, kind: str, gate: float | None = None,
              min_score: float | None = None, preferred_id: str | None = None) -> str:
    taken = {c.id for c in checks}
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", preferred_id or kind or "check").strip("-") or "check"
    check_id, n = base, 2
    while check_id in taken:
        check_id, n = f"{base}-{n}", n + 1
    checks.append(Check(id=check_id, label=label, kind=kind, gate=gate, min_score=min_score))
    return check_id


def function_point(fn: str, args: Any, *, weight: float, origin: Origin, check_id: str | None = None,
                   inverted: bool = False, label: str | None = None, min_score: float | None = None,
                   sees: PointSees = "text") -> Point:
    from .. import functions

    problem = functions.check_args(fn, args)
    if problem:  # the importers build these arguments; a bad shape here is a bug
        raise ValueError(f"importer built a bad `${fn}` point: {problem}")
    return Point(fn=fn, fn_args=args, has_args=True, multiplier=weight, origin=origin, check_id=check_id,
                 inverted=inverted, label=label, min_score=min_score, sees=sees)


def judged_point(text: str, *, weight: float, origin: Origin, check_id: str | None = None, inverted: bool = False,
                 label: str | None = None, min_score: float | None = None, score_ranges=None,
                 sees: PointSees = "text") -> Point:
    return Point(text=text, multiplier=weight, origin=origin, check_id=check_id, inverted=inverted, label=label,
                 min_score=min_score, score_ranges=score_ranges, sees=sees)


def short(value: Any, limit: int = 60) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
