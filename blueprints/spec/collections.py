"""Model collections: upper-case names such as ``CORE`` that stand for a list of models.

A blueprint repository keeps them as ``models/<NAME>.json`` (a JSON list of
model ids) at its root; blueprints sit in folders below. So for a file we look
in ``models/`` beside it and in every parent folder, nearest first.
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


def lookup_for_file(
    blueprint_path: str | Path, stored: Mapping[str, list[str]] | None = None
) -> Callable[[str], list[str] | None]:
    """A lookup for the parser: files near the blueprint first, then stored collections."""
    folder = str(Path(blueprint_path).resolve().parent)

    def lookup(name: str) -> list[str] | None:
        if not is_collection(name):
            return None
        found = _collection_near(folder, name)
        if found is not None:
            return list(found)
        if stored and name in stored:
            return list(stored[name])
        return None

    return lookup


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
