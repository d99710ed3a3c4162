"""The files a suite names, read from disk so they can be kept with its revision.

* Weval: the fixtures file of ``fixtures: path``.
* AgentV: every text value that is the path of a file (external tests, ``file://``
  entries and globs, judge prompts, scripts, input and expected-output file blocks,
  ``tests: ./cases/`` folders of ``<case>/case.yaml``), and what the external tests files
  name in turn. A path is looked up as AgentV looks it up (reference 2; its
  ``buildSearchRoots``): in the suite's folder, then each parent folder up to the
  repository root (the nearest folder holding ``.git``), then the working folder (here:
  the imported folder); a leading ``/`` is dropped, so ``/prompts/x.md`` is found at the
  repository root.
* AI Eval: the prompt files in ``prompts/`` (beside the suite, or beside its ``tests/``
  folder) whose ``name:`` is the suite's ``prompt:``.

Only files inside ``root`` are read (the imported folder), only text, and at most
``MAX_FILE_BYTES`` each. Keys are the paths as the suite writes them, normalised
(``judges/safety.md``, ``../prompts/hello.yaml``, ``prompts/x.md`` for ``/prompts/x.md``).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from pathlib import Path

from .dialects import AGENTV, AIEVAL, WEVAL, detect_dialect_of
from .parse import detect_format
from .source import Loaded, SourceError, load

MAX_FILE_BYTES = 2_000_000
MAX_FILES = 200


# The keys under which a suite names files; a text without any of them names none (a cheap test before loading).
_MAY_NAME_FILES = re.compile(r"\b(fixtures|tests|cases|evalcases|eval_cases)\b[\"']?\s*:")


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _inside(target: Path, root: Path) -> bool:
    return target == root or root in target.parents


def _relative(target: Path, base: Path) -> str:
    return Path(os.path.relpath(target, base)).as_posix()


def _strings(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)


def _candidates(value) -> list[str]:
    strings: list[str] = []
    _strings(value, strings)
    out = []
    for text in strings:
        text = text.strip()
        if text.startswith("file://"):
            text = text[len("file://"):]
        text = text.lstrip("/")
        if not text or "\n" in text or len(text) > 300 or "://" in text:
            continue
        for token in [text, *(text.split() if " " in text else [])]:
            if "/" in token or "." in token.rsplit("/", 1)[-1]:
                out.append(token.lstrip("/"))
    return out


def search_roots(base: Path, root: Path) -> list[Path]:
    """Where AgentV looks for a file the suite in ``base`` names: ``base``, its parents up to the repository
    root (the nearest folder holding ``.git``), then the working folder. Never above ``root`` (the imported
    folder), which stands for the working folder too."""
    roots = [base]
    current = base
    while current != root and root in current.parents and not (current / ".git").exists():
        current = current.parent
        roots.append(current)
    if root not in roots:
        roots.append(root)
    return roots


def collect_companions(path: str | Path, text: str, root: str | Path | None = None, *,
                       loaded: Loaded | None = None) -> dict[str, str]:
    """``{path relative to the suite's folder: text}`` of the files the suite at ``path`` names.

    ``loaded``: the text already loaded (saves loading it again).
    """
    path = Path(path).resolve()
    base = path.parent
    if loaded is None and not _MAY_NAME_FILES.search(text):
        return {}  # no key that names files (fixtures, tests, cases): no need to load a large text twice
    if loaded is None:
        try:
            loaded = load(text, detect_format(text, str(path)))
        except SourceError:
            return {}
    dialect = detect_dialect_of(loaded.documents)
    if root is None:
        root = base.parent if dialect == AIEVAL and (base.parent / "prompts").is_dir() else base
    root = Path(root).resolve()
    if dialect == AIEVAL:
        return _aieval_prompts(loaded.documents[0], base, root)
    if dialect == AGENTV:
        return _agentv_files(loaded.documents[0], base, root, path)
    if dialect == WEVAL:
        return _weval_fixtures(loaded.documents, base, root)
    return {}


def _weval_fixtures(documents, base: Path, root: Path) -> dict[str, str]:
    header = documents[0] if documents and isinstance(documents[0], dict) else {}
    name = header.get("fixtures")
    if not isinstance(name, str):
        return {}
    target = (base / name).resolve()
    text = _read(target) if _inside(target, root) else None
    return {posixpath.normpath(name): text} if text is not None else {}


def _aieval_prompts(suite: dict, base: Path, root: Path) -> dict[str, str]:
    name = suite.get("prompt")
    out: dict[str, str] = {}
    if not isinstance(name, str):
        return out
    for folder in (base / "prompts", base.parent / "prompts"):
        folder = folder.resolve()
        if not folder.is_dir() or not _inside(folder, root):
            continue
        for candidate in sorted(folder.iterdir()):
            if candidate.suffix.lower() not in (".yaml", ".yml"):
                continue
            text = _read(candidate)
            if text is None:
                continue
            try:
                docs = load(text, "yaml").documents
            except SourceError:
                continue
            if len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("name") == name:
                out[_relative(candidate, base)] = text
    return out


def _agentv_files(suite: dict, base: Path, root: Path, own: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    roots = search_roots(base, root)
    queue = [suite]
    seen_docs = 0

    def add(key: str, target: Path) -> None:
        text = _read(target)
        if text is None:
            return
        out[key] = text
        if target.suffix.lower() in (".yaml", ".yml", ".jsonl", ".json") and seen_docs < 50:
            nested = _load_rows(text, target.suffix.lower())
            if nested is not None:
                queue.append(nested)  # AgentV resolves every path from the suite's folder

    while queue and len(out) < MAX_FILES:
        document = queue.pop(0)
        seen_docs += 1
        for candidate in _candidates(document):
            key = posixpath.normpath(candidate)
            if key in out:
                continue
            if any(ch in candidate for ch in "*?["):
                for match in sorted(p for p in base.rglob("*") if p.is_file()
                                    and fnmatch.fnmatch(_relative(p, base), key)):
                    target = match.resolve()
                    if target != own and _inside(target, root) and _relative(target, base) not in out:
                        add(_relative(target, base), target)
                continue
            for where in roots:
                target = (where / key).resolve()
                if target == own or not _inside(target, root):
                    continue
                if target.is_file():
                    add(key, target)
                    break
                if target.is_dir() and where == base:
                    _case_folder(key, target, root, add)
                    break
    return out


def _case_folder(key: str, folder: Path, root: Path, add) -> None:
    """``tests: ./cases/``: each immediate subfolder's ``case.yaml`` (or ``case.yml``) is one test."""
    for sub in sorted(p for p in folder.iterdir() if p.is_dir())[:MAX_FILES]:
        for name in ("case.yaml", "case.yml"):
            target = (sub / name).resolve()
            if target.is_file() and _inside(target, root):
                add(posixpath.join(key, sub.name, name), target)
                break


def _load_rows(text: str, suffix: str):
    from .importers.common import jsonl_as_array

    try:
        if suffix == ".jsonl":
            return load(jsonl_as_array(text), "json").documents
        return load(text, "json" if suffix == ".json" else "yaml").documents
    except SourceError:
        return None
