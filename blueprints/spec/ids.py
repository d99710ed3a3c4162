"""Identifiers that must match the upstream's, so results stay comparable.

- A blueprint's id comes from its path: ``subdir/my-test.yml`` -> ``subdir__my-test``.
- A prompt without an id gets ``hash-`` plus the first 12 hex digits of the
  SHA-256 of its normalised form, serialised as json-stable-stringify does
  (keys sorted, no whitespace, numbers printed as JavaScript prints them).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath

from .model_ids import format_js_number as js_number

_SUFFIXES = (".civic.yml", ".civic.yaml", ".weval.yml", ".weval.yaml", ".yml", ".yaml", ".json")


def blueprint_id_from_path(path: str) -> str:
    """The id the upstream derives from a path relative to a blueprint repository.

    A leading ``blueprints/`` is dropped, as for blueprints read from a repository.
    """
    text = str(PurePosixPath(str(path).replace("\\", "/")))
    if text.startswith("./"):
        text = text[2:]
    if text.startswith("blueprints/"):
        text = text[len("blueprints/") :]
    lowered = text.lower()
    for suffix in _SUFFIXES:
        if lowered.endswith(suffix):
            text = text[: -len(suffix)]
            break
    return text.replace("/", "__")


def blueprint_id_for_file(path: str) -> str:
    """The id for a file on disk: relative to the nearest ``blueprints`` folder above it,
    else its name alone (a stray file has no repository to be relative to)."""
    parts = PurePosixPath(str(path).replace("\\", "/")).parts
    if "blueprints" in parts[:-1]:
        last = len(parts) - 1 - parts[::-1].index("blueprints", 1)
        return blueprint_id_from_path("/".join(parts[last + 1 :]))
    return blueprint_id_from_path(parts[-1] if parts else str(path))


def stable_stringify(value) -> str:
    """json-stable-stringify: sorted keys, no whitespace, None-valued keys dropped."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}:{stable_stringify(v)}"
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
            if v is not None or _keeps_null(k)
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(stable_stringify(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _keeps_null(key) -> bool:
    # A JSON null that the author wrote is a value, not a missing key: the upstream keeps
    # `content: null` (an assistant turn to be generated) and `fnArgs: null` (`$is_json: null`) in the hash.
    return key in ("content", "fnArgs")


def prompt_hash_id(normalised_prompt_without_id: dict) -> str:
    digest = hashlib.sha256(stable_stringify(normalised_prompt_without_id).encode("utf-8")).hexdigest()
    return "hash-" + digest[:12]


_TAG_SEPARATORS = re.compile(r"[\s_]+")
_TAG_DROP = re.compile(r"[^a-z0-9-]")


def normalize_tags(tags: list[str]) -> list[str]:
    """Tags starting with `_` are internal and kept verbatim; others are slugged."""
    out: list[str] = []
    for tag in tags:
        if tag.startswith("_"):
            slug = tag
        else:
            slug = _TAG_DROP.sub("", _TAG_SEPARATORS.sub("-", tag.lower()))
        if slug and slug not in out:
            out.append(slug)
    return out
