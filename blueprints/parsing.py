"""One parse per text: the import, the new revision and the run's start read the same text, and a large
blueprint costs most of a second to parse, so the result is kept (a few, per process, bounded by their estimated
size) and reused.

A parse depends on the text, its companion files, the blueprint id, the limits and the answers the collection
lookup gave; a kept result is reused only when every collection it asked about answers the same now. Parse
results are shared, so callers treat them as read-only.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import PurePosixPath

from django.conf import settings

from blueprints.spec import ParseResult, parse_any
from blueprints.spec.collections import collection_file_name

_KEEP = 8
# What a kept parse holds, by its text: a 1,000-prompt revision of 785,000 characters (the run of
# tests/bench/bench_results.py) keeps 21 MB (tracemalloc; tests/runs/test_parse_once.py holds the estimate to it).
# The parses kept here and those runs/spec.py keeps for runs are each bounded by KEEP_PARSED_BYTES (they are mostly
# the same objects); the most recently used is kept whatever its size.
PARSE_BYTES_PER_CHAR = 30
KEEP_PARSED_BYTES = 64 << 20  # about three such revisions


def parse_bytes(text: str) -> int:
    """The estimated memory a kept parse of ``text`` holds."""
    return len(text) * PARSE_BYTES_PER_CHAR


_KEPT: OrderedDict[tuple, tuple[ParseResult, dict, int]] = OrderedDict()  # key -> (result, asked, bytes)
_LOCK = threading.Lock()


def forget_parses() -> None:
    """Drop every kept parse (tests, benchmarks)."""
    with _LOCK:
        _KEPT.clear()


def _key(text: str, blueprint_id, files: dict, limits) -> tuple:
    """A kept collection file (``../models/CORE.json``) changes a parse only through the collection lookup, whose
    answers a kept result is checked against, so it is not part of the key (unless the text names the file, as a
    suite may name any file): an import's parse, made before the collection files it came with were added, is the
    revision's."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    for name in sorted(files):
        if collection_file_name(name) is not None and PurePosixPath(name).name not in text:
            continue
        digest.update(f"\0{name}\0{files[name]}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest(), blueprint_id, repr(limits)


def parse_text(text: str, *, blueprint_id: str | None, collections, files: dict | None = None) -> ParseResult:
    """``parse_any`` with the site's limits, reusing a result for the same inputs."""
    files = files or {}
    limits = settings.EVALSITE_LIMITS
    key = _key(text, blueprint_id, files, limits)
    with _LOCK:
        kept = _KEPT.get(key)
    if kept is not None:
        result, asked, _ = kept
        if all(collections(name) == answer for name, answer in asked.items()):
            with _LOCK:
                _KEPT.move_to_end(key, last=True) if key in _KEPT else None
            return result
    asked: dict = {}

    def lookup(name):
        answer = collections(name)
        asked[name] = list(answer) if answer is not None else None
        return answer

    result = parse_any(text, blueprint_id=blueprint_id, collections=lookup, files=files, limits=limits)
    with _LOCK:
        _KEPT[key] = (result, asked, parse_bytes(text))
        _KEPT.move_to_end(key)
        total = sum(size for _, _, size in _KEPT.values())
        while len(_KEPT) > 1 and (len(_KEPT) > _KEEP or total > KEEP_PARSED_BYTES):
            total -= _KEPT.popitem(last=False)[1][2]
    return result
