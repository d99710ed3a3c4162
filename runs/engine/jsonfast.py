"""JSON on a run's hot path, through orjson.

The standard library's encoder, with ``ensure_ascii=False``, took 24 us to write a judge request's body of 3 KB
where orjson takes 1 us (tests/bench/bench_run.py's judged run: about a tenth of the worker's CPU per call, in the
request's body, its cache key, the response cache and the call log). Each function here falls back to the standard
library where orjson refuses a value (an integer past 64 bits, a lone surrogate, a non-JSON type), so nothing that
worked before fails now.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_PLAIN = (str, type(None))


def dumps(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes; keys that are not strings become strings, as ``json.dumps`` makes them."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dumps_text(value: Any) -> str:
    """:func:`dumps` as text; a value JSON cannot hold is written as its ``str`` (as ``default=str``)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def loads(data: bytes | str) -> Any:
    """The value of a JSON text; what orjson refuses (``NaN``, an integer past 64 bits, bad JSON) is read by the
    standard library, which accepts the first two and raises its own ``JSONDecodeError`` for the last."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def sorted_messages(messages: list[dict]) -> bytes | None:
    """``json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` as UTF-8, byte for byte
    (a cache key is a hash over it: a different spelling would lose every cached answer), for messages whose roles
    are strings and whose contents are strings or None; None for any other messages (the caller writes them with
    the standard library)."""
    for message in messages:
        if type(message.get("role")) is not str or not isinstance(message.get("content"), _PLAIN):
            return None
    try:
        return orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a lone surrogate: the standard library's way raises as it did
        return None
