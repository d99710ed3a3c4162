"""One thread at a time per key for a piece of work whose result is then kept: the others wait for it, and find it.

A web process's threads meeting something cold together (a revision to parse, a matrix's intervals to draw) each
did the work themselves: eight 1,000-prompt parses at once took a process past 400 MB. ``runs.spec`` and
``runs.grid`` use it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Hashable, Iterator


class OnePerKey:
    """``with one(key):`` lets one thread in per key; a key's lock is dropped when its last thread leaves."""

    def __init__(self, held: dict | None = None) -> None:
        """``held``: the dict of keys in use (key -> [its lock, threads in or waiting]), when the owner keeps it."""
        self._lock = threading.Lock()
        self._held: dict[Hashable, list] = {} if held is None else held

    @contextmanager
    def __call__(self, key: Hashable) -> Iterator[None]:
        with self._lock:
            entry = self._held.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if not entry[1]:
                    self._held.pop(key, None)
