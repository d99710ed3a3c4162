"""The files a suite names, read from disk so they can be kept with its revision.

A text is used as a path only where its format says it is one, never because it looks like one:

* Weval: the fixtures file of ``fixtures: path``.
* AgentV: ``tests:`` given as a path (or ``file://`` entries and globs among the tests), the
  ``{type: file, value: path}`` content blocks of ``input``/``input_messages``/``expected_output``/
  ``expected_messages``, a judge's ``prompt:`` (AgentV tries it as a file first), a code grader's
  ``command``/``script`` and a composite aggregator's ``path``/``prompt``; and what the external tests
  files name in turn. ``tests: ./cases/`` folders of ``<case>/case.yaml`` too. A bare ``.jsonl`` file of
  tests (AgentV runs one as a suite) names the same, plus its sidecar ``<name>.yaml``.
  A path is looked up as AgentV looks it up (reference 2; its ``buildSearchRoots``): in the suite's
  folder, then each parent folder up to the repository root (the nearest folder holding ``.git``), then
  the working folder (here: the imported folder); a leading ``/`` is dropped, so ``/prompts/x.md`` is
  found at the repository root.
* AI Eval: the prompt files in ``prompts/`` (beside the suite, or beside its ``tests/``
  folder) whose ``name:`` is the suite's ``prompt:``.

Only files inside ``root`` (the imported folder) are read, only text, and at most ``MAX_FILE_BYTES``
each. Keys are the paths as the suite writes them, normalised (``judges/safety.md``,
``../prompts/hello.yaml``, ``prompts/x.md`` for ``/prompts/x.md``).

Reading never raises: a name too long for the file system, a NUL byte, a folder where a file is named,
a link loop, a file that may not be read... each is kept in the result's ``problems`` (``{key: why}``),
which the importers report where the suite names the file.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat
from pathlib import Path
from typing import Iterator

from .dialects import AGENTV, AGENTV_TESTS, AIEVAL, WEVAL, detect_dialect_of
from .parse import detect_format
from .source import Loaded, SourceError, load

MAX_FILE_BYTES = 2_000_000
MAX_FILES = 200
MAX_PATH_CHARS = 4096  # longer text is never a path (Linux's PATH_MAX); it is not even looked up
MAX_WALK_ENTRIES = 20_000  # entries a glob or a folder listing may look at

# The keys under which a suite names files; a text without any of them names none (a cheap test before loading).
# A key that may name a file. ``prompt`` names one only with a one-word value (AI Eval's suite prompt,
# an AgentV judge's prompt file): a Weval prompt (words, or a block) does not make every blueprint load twice.
_MAY_NAME_FILES = re.compile(r"\b(?:(?:fixtures|tests|cases|evalcases|eval_cases|file|command|script|path)\b[\"']?\s*:"
                             r"|prompt\b[\"']?[ \t]*:[ \t]*[\"']?[^\s\"'|>#]+[\"']?[ \t]*(?:#.*)?$)", re.M)
_FS_ERRORS = (OSError, ValueError, RuntimeError)  # ValueError: a NUL byte; RuntimeError: a link loop (3.11)


class Companions(dict):
    """``{key: text}`` of the files found, and ``problems``: ``{key: why it could not be read}``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.problems: dict[str, str] = {}

    def problem(self, key: str, why: str) -> None:
        if key not in self and len(self.problems) < MAX_FILES:
            self.problems.setdefault(key, why)


def _why(exc: BaseException) -> str:
    """A file-system error in words a suite's author can act on."""
    if isinstance(exc, ValueError):
        return "its name holds a character no file name can hold (a NUL byte or an unpaired surrogate)"
    if isinstance(exc, RuntimeError):
        return "it is a link that leads back to itself (a link loop)"
    errno_ = getattr(exc, "errno", None)
    import errno

    return {
        errno.ENAMETOOLONG: "its name is too long for the file system",
        errno.EACCES: "evalsite may not read it (permission denied)",
        errno.EPERM: "evalsite may not read it (operation not permitted)",
        errno.ELOOP: "it is a link that leads back to itself (a link loop)",
        errno.EISDIR: "it is a folder, not a file",
    }.get(errno_, f"it cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})")


def _stat(path: Path) -> tuple[os.stat_result | None, str | None]:
    """``(stat, None)``, ``(None, None)`` when nothing is there, or ``(None, why)`` when looking failed."""
    try:
        return path.stat(), None
    except FileNotFoundError:
        return None, None
    except NotADirectoryError:
        return None, None
    except _FS_ERRORS as exc:
        return None, _why(exc)


def _is_dir(path: Path) -> bool:
    info, _ = _stat(path)
    return info is not None and stat.S_ISDIR(info.st_mode)


def _resolve(path: Path) -> tuple[Path | None, str | None]:
    try:
        return path.resolve(), None
    except _FS_ERRORS as exc:
        return None, _why(exc)


def _read(path: Path) -> tuple[str | None, str | None]:
    """``(text, None)``, ``(None, None)`` when there is no file, or ``(None, why)`` when it cannot be used."""
    info, why = _stat(path)
    if info is None:
        return None, why
    if stat.S_ISDIR(info.st_mode):
        return None, "it is a folder, not a file"
    if not stat.S_ISREG(info.st_mode):
        return None, "it is not a regular file (a device, a pipe or a socket)"
    if info.st_size > MAX_FILE_BYTES:
        return None, f"it is larger than {MAX_FILE_BYTES:,} bytes"
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except _FS_ERRORS as exc:
        return None, _why(exc)
    if len(data) > MAX_FILE_BYTES:
        return None, f"it is larger than {MAX_FILE_BYTES:,} bytes"
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"it is not UTF-8 text (byte {exc.start})"


def _inside(target: Path, root: Path) -> bool:
    return target == root or root in target.parents


def _relative(target: Path, base: Path) -> str:
    return Path(os.path.relpath(target, base)).as_posix()


def _walk_files(base: Path, limit: int = MAX_WALK_ENTRIES) -> Iterator[Path]:
    """The files below ``base``, links to folders not followed, at most ``limit`` entries looked at."""
    seen = 0
    for folder, dirs, names in os.walk(base, onerror=lambda exc: None, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            seen += 1
            if seen > limit:
                return
            yield Path(folder) / name


# --- where a format names files ------------------------------------------------------------------------


def as_path(value) -> str | None:
    """``value`` as a path key (``file://`` and a leading ``/`` dropped, normalised), or None when it cannot be
    one: not text, empty, several lines, a URL, or longer than any path can be."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.startswith("file://"):
        text = text[len("file://"):]
    if not text or "\n" in text or "\r" in text or "://" in text or len(text) > MAX_PATH_CHARS:
        return None
    text = text.replace("\\", "/").lstrip("/")
    return posixpath.normpath(text) if text else None


_MESSAGE_KEYS = ("input", "input_messages", "expected_output", "expected_messages")
_ASSERT_KEYS = ("assert", "assertions", "evaluators")


def _file_blocks(value, depth: int = 0) -> Iterator[str]:
    """The ``value`` of each ``{type: file, value}`` content block in a message value (text, message, list)."""
    if depth > 4:
        return
    if isinstance(value, dict):
        if value.get("type") == "file" and isinstance(value.get("value"), str):
            yield value["value"]
        elif "content" in value:
            yield from _file_blocks(value["content"], depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _file_blocks(item, depth + 1)


def _assertion_paths(items, depth: int = 0) -> Iterator[str]:
    """Paths named by assertions: a judge's ``prompt``, a code grader's program and arguments, a composite's
    children and its aggregator's ``path``/``prompt``."""
    if depth > 4 or not isinstance(items, list):
        return
    for item in items:
        if not isinstance(item, dict):
            continue  # a plain string is a rubric, never a path
        if isinstance(item.get("prompt"), str):
            yield item["prompt"]
        for key in ("command", "script"):
            value = item.get(key)
            if isinstance(value, str):
                yield from value.split()
            elif isinstance(value, list):
                yield from (token for token in value if isinstance(token, str))
        aggregator = item.get("aggregator")
        if isinstance(aggregator, dict):
            yield from (aggregator[k] for k in ("path", "prompt") if isinstance(aggregator.get(k), str))
        for key in _ASSERT_KEYS:
            yield from _assertion_paths(item.get(key), depth + 1)


def _test_paths(row) -> Iterator[str]:
    if not isinstance(row, dict):
        return
    for key in _MESSAGE_KEYS:
        yield from _file_blocks(row.get(key))
    for key in _ASSERT_KEYS:
        yield from _assertion_paths(row.get(key))
    execution = row.get("execution")
    if isinstance(execution, dict):
        for key in _ASSERT_KEYS:
            yield from _assertion_paths(execution.get(key))


def agentv_paths(document) -> Iterator[tuple[str, bool]]:
    """``(text, names tests)`` for each value an AgentV suite (or a file of its test rows) uses as a path."""
    if isinstance(document, list):
        for row in document:
            yield from ((p, False) for p in _test_paths(row))
        return
    if not isinstance(document, dict):
        return
    for key in ("tests", "eval_cases", "evalcases"):
        value = document.get(key)
        if isinstance(value, str):
            yield value, True
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    yield item, True
                else:
                    yield from ((p, False) for p in _test_paths(item))
    for key in ("input", "input_messages"):
        yield from ((p, False) for p in _file_blocks(document.get(key)))
    holders = [document]
    if isinstance(document.get("execution"), dict):
        holders.append(document["execution"])
    for holder in holders:
        for key in _ASSERT_KEYS:
            yield from ((p, False) for p in _assertion_paths(holder.get(key)))


# --- collecting ----------------------------------------------------------------------------------------


def search_roots(base: Path, root: Path) -> list[Path]:
    """Where AgentV looks for a file the suite in ``base`` names: ``base``, its parents up to the repository
    root (the nearest folder holding ``.git``), then the working folder. Never above ``root`` (the imported
    folder), which stands for the working folder too."""
    roots = [base]
    current = base
    while current != root and root in current.parents and _stat(current / ".git")[0] is None:
        current = current.parent
        roots.append(current)
    if root not in roots:
        roots.append(root)
    return roots


def collect_companions(path: str | Path, text: str, root: str | Path | None = None, *,
                       loaded: Loaded | None = None) -> Companions:
    """``{path relative to the suite's folder: text}`` of the files the suite at ``path`` names, with the
    ``problems`` of those that could not be read. Never raises.

    ``loaded``: the text already loaded (saves loading it again).
    """
    out = Companions()
    try:
        _collect(Path(path), text, root, loaded, out)
    except _FS_ERRORS as exc:  # a place the helpers above do not cover; the files found so far stand
        out.problem("", _why(exc))
    return out


def _collect(path: Path, text: str, root, loaded: Loaded | None, out: Companions) -> None:
    path, why = _resolve(path)
    if path is None:
        out.problem("", why)
        return
    base = path.parent
    if path.suffix.lower() == ".jsonl":  # a bare file of AgentV tests, read as a suite (upstream `loadTests`)
        rows = _load_rows(text, ".jsonl")
        root = Path(root).resolve() if root is not None else base
        if rows is not None:
            _agentv_files(rows[0] if len(rows) == 1 else rows, base, root, path, out)
        sidecar = path.with_suffix(".yaml")
        sidecar_text, _ = _read(sidecar)
        if sidecar_text is not None:
            out[sidecar.name] = sidecar_text
        return
    if loaded is None and not _MAY_NAME_FILES.search(text):
        return  # no key that names files: no need to load a large text twice
    if loaded is None:
        try:
            loaded = load(text, detect_format(text, str(path)))
        except SourceError:
            return
    dialect = detect_dialect_of(loaded.documents)
    if root is None:
        root = base.parent if dialect == AIEVAL and _is_dir(base.parent / "prompts") else base
    root = Path(root).resolve()
    if dialect == AIEVAL:
        _aieval_prompts(loaded.documents[0], base, root, out)
    elif dialect in (AGENTV, AGENTV_TESTS):
        _agentv_files(loaded.documents[0], base, root, path, out)
    elif dialect == WEVAL:
        _weval_fixtures(loaded.documents, base, root, out)


def _weval_fixtures(documents, base: Path, root: Path, out: Companions) -> None:
    header = documents[0] if documents and isinstance(documents[0], dict) else {}
    name = header.get("fixtures")
    key = as_path(name)
    if key is None or not isinstance(name, str):
        return
    target, why = _resolve(base / name)
    if target is None or not _inside(target, root):
        if why:
            out.problem(key, why)
        return
    text, why = _read(target)
    if text is not None:
        out[posixpath.normpath(name)] = text
    elif why:
        out.problem(posixpath.normpath(name), why)


def _aieval_prompts(suite: dict, base: Path, root: Path, out: Companions) -> None:
    name = suite.get("prompt")
    if not isinstance(name, str):
        return
    for folder in (base / "prompts", base.parent / "prompts"):
        folder, _ = _resolve(folder)
        if folder is None or not _is_dir(folder) or not _inside(folder, root):
            continue
        try:
            entries = sorted(p for _, p in zip(range(MAX_WALK_ENTRIES), folder.iterdir()))
        except _FS_ERRORS as exc:
            out.problem(_relative(folder, base) + "/", _why(exc))
            continue
        for candidate in entries:
            if candidate.suffix.lower() not in (".yaml", ".yml"):
                continue
            text, why = _read(candidate)
            if text is None:
                if why and "folder" not in why:
                    out.problem(_relative(candidate, base), why)
                continue
            try:
                docs = load(text, "yaml").documents
            except SourceError:
                continue
            if len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("name") == name:
                out[_relative(candidate, base)] = text


def _agentv_files(suite, base: Path, root: Path, own: Path, out: Companions) -> None:
    roots = search_roots(base, root)
    queue = [suite]
    seen_docs = 0

    def add(key: str, target: Path) -> bool:
        text, why = _read(target)
        if text is None:
            if why:
                out.problem(key, why)
            return False
        out[key] = text
        out.problems.pop(key, None)
        suffix = target.suffix.lower()
        if suffix in (".yaml", ".yml", ".jsonl", ".json") and seen_docs < 50:
            nested = _load_rows(text, suffix)
            if nested:
                queue.append(nested[0] if len(nested) == 1 else nested)  # resolved from the suite's folder too
        return True

    while queue and len(out) < MAX_FILES:
        document = queue.pop(0)
        seen_docs += 1
        for value, names_tests in agentv_paths(document):
            key = as_path(value)
            if key is None or key in out or key == ".":
                continue
            if any(ch in key for ch in "*?["):
                _glob(key, base, root, own, out, add)
            else:
                _find(key, roots, base, root, own, out, add, names_tests)


def _glob(pattern: str, base: Path, root: Path, own: Path, out: Companions, add) -> None:
    for match in _walk_files(base):
        relative = _relative(match, base)
        if not fnmatch.fnmatch(relative, pattern) or relative in out:
            continue
        target, _ = _resolve(match)
        if target is not None and target != own and _inside(target, root):
            add(relative, target)


def _find(key: str, roots: list[Path], base: Path, root: Path, own: Path, out: Companions, add,
          names_tests: bool) -> None:
    """Look ``key`` up in each search root; the first file found is read. When it is found nowhere but some
    lookup failed (a name too long, a NUL byte, a folder, no permission), why is kept in ``out.problems``."""
    problem = None
    for where in roots:
        target, why = _resolve(where / key)
        if target is None:
            problem = problem or why
            continue
        if target == own or not _inside(target, root):
            continue
        info, why = _stat(target)
        if info is None:
            problem = problem or why
            continue
        if stat.S_ISDIR(info.st_mode):
            if names_tests and where == base and _case_folder(key, target, root, add):
                return
            problem = problem or "it is a folder, not a file"
            continue
        if add(key, target):
            return
        problem = out.problems.get(key) or problem
    if problem:
        out.problem(key, problem)


def _case_folder(key: str, folder: Path, root: Path, add) -> bool:
    """``tests: ./cases/``: each immediate subfolder's ``case.yaml`` (or ``case.yml``) is one test."""
    try:
        subs = sorted(p for _, p in zip(range(MAX_WALK_ENTRIES), folder.iterdir()) if _is_dir(p))[:MAX_FILES]
    except _FS_ERRORS:
        return False
    found = False
    for sub in subs:
        for name in ("case.yaml", "case.yml"):
            target, _ = _resolve(sub / name)
            if target is not None and _inside(target, root) and _stat(target)[0] is not None:
                found = add(posixpath.join(key, sub.name, name), target) or found
                break
    return found


def _load_rows(text: str, suffix: str) -> list | None:
    from .importers.common import jsonl_as_array

    try:
        if suffix == ".jsonl":
            return load(jsonl_as_array(text), "json").documents
        return load(text, "json" if suffix == ".json" else "yaml").documents
    except SourceError:
        return None
