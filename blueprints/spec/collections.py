"""Model collections: upper-case names such as ``CORE`` that stand for a list of models.

A blueprint repository keeps them as ``models/<NAME>.json`` (a JSON list of
model ids) at its root; blueprints sit in folders below. So for a file we look
in ``models/`` beside it and in every parent folder, nearest first.

One rule, from every door (``validate_blueprint``, ``run_blueprint``, the blueprint page and its run form,
the start of a run): a blueprint's own collections win (the ``models/`` folders near its file, or the copies
of them kept with its revision, see ``collection_files_near``), then the collections evalsite has stored.
``lookup_for_file`` and ``lookup_for_files`` are that rule for a file on disk and for a stored revision.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping

from .model_ids import is_collection_name


# Only these characters make up a collection name; checked first because ``is_collection_name``'s
# pattern backtracks on long text that is almost a name (`AAAA…Ax`: 5 s for 30,000 characters).
_NAME_CHARS = re.compile(r"[A-Z0-9_-]+")


def is_collection(value) -> bool:
    """``model_ids.is_collection_name``, in time linear in the value's length."""
    return (isinstance(value, str) and _NAME_CHARS.fullmatch(value) is not None
            and is_collection_name(value))


class CollectionError(ValueError):
    """A collection file exists but is not a JSON list of model id strings."""


def read_collection_file(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CollectionError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(m, str) for m in data):
        raise CollectionError(f"{path}: a collection must be a JSON list of model ids")
    return [m.strip() for m in data if m.strip()]


@lru_cache(maxsize=1024)
def _collection_near(folder: str, name: str) -> tuple[str, ...] | None:
    for parent in (Path(folder), *Path(folder).parents):
        candidate = parent / "models" / f"{name}.json"
        if candidate.is_file():
            try:
                return tuple(read_collection_file(candidate))
            except CollectionError:
                return None
    return None


Lookup = Callable[[str], "list[str] | None"]
Stored = "Mapping[str, list[str]] | Lookup | None"


def own_then_stored(own: Lookup, stored: Stored = None) -> Lookup:
    """The rule: a blueprint's own collections (``own``) first, then the stored ones (a mapping by name, or a
    lookup such as ``ModelCollection.lookup()``)."""

    def lookup(name: str) -> list[str] | None:
        if not is_collection(name):
            return None
        found = own(name)
        if found is not None:
            return list(found)
        if callable(stored):
            answer = stored(name)
            return list(answer) if answer is not None else None
        if stored and name in stored:
            return list(stored[name])
        return None

    return lookup


def lookup_for_file(blueprint_path: str | Path, stored: Stored = None) -> Lookup:
    """A lookup for the parser: files near the blueprint first, then stored collections."""
    folder = str(Path(blueprint_path).resolve().parent)

    def near(name: str) -> list[str] | None:
        found = _collection_near(folder, name)
        return list(found) if found is not None else None

    return own_then_stored(near, stored)


# A collection file kept with a revision, by its path from the blueprint's folder: models/CORE.json,
# ../models/CORE.json, ../../models/CORE.json...
_KEPT_FILE = re.compile(r"((?:\.\./)*)models/([A-Z0-9_-]+)\.json")


def collection_file_name(key) -> str | None:
    """The collection a kept file stands for (``../models/CORE.json`` -> ``CORE``), else None."""
    match = _KEPT_FILE.fullmatch(key) if isinstance(key, str) else None
    return match.group(2) if match else None


def lookup_in_files(files: Mapping[str, str] | None) -> Lookup:
    """The collections kept with a revision (its ``files``, see ``collection_files_near``): the nearest file of
    each name (fewest ``../``); a file that is not a JSON list of model ids answers nothing, as on disk."""
    nearest: dict[str, tuple[int, str]] = {}
    for key, text in (files or {}).items():
        match = _KEPT_FILE.fullmatch(key) if isinstance(key, str) else None
        if match is None or not isinstance(text, str):
            continue
        depth = match.group(1).count("../")
        name = match.group(2)
        if name not in nearest or depth < nearest[name][0]:
            nearest[name] = (depth, text)

    def lookup(name: str) -> list[str] | None:
        if name not in nearest:
            return None
        try:
            data = json.loads(nearest[name][1])
        except ValueError:
            return None
        if not isinstance(data, list) or not all(isinstance(m, str) for m in data):
            return None
        return [m.strip() for m in data if m.strip()]

    return lookup


def lookup_for_files(files: Mapping[str, str] | None, stored: Stored = None) -> Lookup:
    """The rule for a stored revision: the collection files kept with it first, then stored collections."""
    return own_then_stored(lookup_in_files(files), stored)


def collection_files_near(blueprint_path: str | Path, names, root: str | Path | None = None) -> dict[str, str]:
    """The ``models/<NAME>.json`` files a blueprint file comes with, for the collection ``names`` it asks about:
    the one ``lookup_for_file`` reads for each (the nearest ``models/`` folder holding it, from the file's own
    folder up to ``root``, or every parent when None), keyed by its path from the file's folder
    (``models/CORE.json``, ``../models/CORE.json``), its text as read. Kept with the revision like any file that
    came with it, so a stored blueprint resolves its collections as its file did. A file that is not a JSON list
    of model ids is left out (the stored collections answer instead, as on disk)."""
    folder = Path(blueprint_path).resolve().parent
    top = Path(root).resolve() if root is not None else None
    out: dict[str, str] = {}
    for name in dict.fromkeys(n for n in names if is_collection(n)):
        for depth, parent in enumerate((folder, *folder.parents)):
            if top is not None and parent != top and top not in parent.parents:
                break
            candidate = parent / "models" / f"{name}.json"
            if candidate.is_file():
                try:
                    read_collection_file(candidate)
                    out[f"{'../' * depth}models/{name}.json"] = candidate.read_text(encoding="utf-8")
                except (CollectionError, OSError, UnicodeDecodeError):
                    pass
                break
    return out


def has_collection_folder(blueprint_path: str | Path, root: str | Path | None = None) -> bool:
    """True when a ``models/`` folder sits beside the file or above it (up to ``root``)."""
    folder = Path(blueprint_path).resolve().parent
    top = Path(root).resolve() if root is not None else None
    for parent in (folder, *folder.parents):
        if top is not None and parent != top and top not in parent.parents:
            return False
        if (parent / "models").is_dir():
            return True
    return False


def resolve_models(models: list, lookup: Callable[[str], list[str] | None] | None) -> tuple[list, list[str]]:
    """Expand collection names; returns (models, names that could not be resolved). Order kept, duplicates dropped."""
    out: list = []
    seen: set[str] = set()
    missing: list[str] = []
    for model in models or ["CORE"]:
        expanded = [model]
        if is_collection(model):
            found = lookup(model) if lookup else None
            if found is None:
                missing.append(model)
                continue
            expanded = found
        for item in expanded:
            key = item if isinstance(item, str) else item.id
            if key not in seen:
                seen.add(key)
                out.append(item)
    return out, missing
