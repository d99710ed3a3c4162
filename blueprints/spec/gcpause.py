"""The cyclic garbage collector held off while a blueprint is read.

A parse makes tens of thousands of containers that all outlive it (the loaded values, their positions, the
schema objects), so the collections their allocation sets off find nothing to free: a 2,000-prompt blueprint spent
about a third of its parse in them (tests/bench/bench_parse.py). Reference counting still frees everything that
is not a cycle meanwhile. Held across threads: the collector is enabled again when the last parse under way ends,
and only if it was enabled when the first began.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_LOCK = threading.Lock()
_held = 0  # parses under way
_was_enabled = False


@contextmanager
def collector_held():
    global _held, _was_enabled
    with _LOCK:
        if _held == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _held += 1
    try:
        yield
    finally:
        with _LOCK:
            _held -= 1
            if _held == 0 and _was_enabled:
                gc.enable()
