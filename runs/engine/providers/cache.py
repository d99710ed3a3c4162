"""The response cache: a small protocol, a key recipe, and two stores.

Protocol (anything with these two methods is a cache)::

    get(key: str) -> dict | None        # the stored value, or None
    set(key: str, value: dict) -> None

Either method may be a plain function or a coroutine function: the router
awaits the result when it is awaitable. Plain methods must be quick (they run
on the event loop); a store that does blocking I/O behind an ORM should be
written with ``async def`` (for Django, the async ORM methods ``aget`` and
``aupdate_or_create``). Values are JSON-able dicts; a store must return an
equal dict.

Keys come from :func:`cache_key`: a SHA-256 over the endpoint's identity
(provider, model, base URL; for a custom model its definition without header
values), the messages, the temperature, the token limit and, for trials after
the first, the trial number (or every trial would get the same answer); for a judge asked again about the
same answer, the repeat number (likewise; the first asking keeps the key it always had).

:class:`MemoryCache` is for tests and one-off runs; :class:`SqliteCache` keeps
answers in one SQLite file across runs and processes (WAL, busy timeout).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Protocol

from runs.engine import jsonfast

KEY_VERSION = 1


class ResponseCache(Protocol):
    def get(self, key: str) -> dict | None | Awaitable[dict | None]: ...

    def set(self, key: str, value: dict) -> None | Awaitable[None]: ...


# Made once: ``json.dumps`` with options builds an encoder per call, which cost more than the encoding of a key's
# small parts.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_dumps = _ENCODER.encode


def key_head(messages, *, max_tokens: int | None):
    """The key's hash over its first part (its token limit and messages), to finish with :func:`key_from_head`.

    The key is a SHA-256 over one JSON text with sorted keys: ``max_tokens``, ``messages``, then the rest. A
    caller keying many requests with the same messages (the estimate: every variant and trial of a prompt)
    hashes them once here and copies the result; :func:`cache_key` is these two steps."""
    head = hashlib.sha256()
    limit = str(max_tokens) if type(max_tokens) is int else _dumps(max_tokens)  # an int is its digits
    head.update(('{"max_tokens":' + limit + ',"messages":').encode("utf-8"))
    plain = [{"role": m["role"], "content": m.get("content")} for m in messages]
    head.update(jsonfast.sorted_messages(plain) or _dumps(plain).encode("utf-8"))
    return head


def key_rest(identity: dict[str, Any], *, temperature: float | None, trial: int = 0, repeat: int = 0) -> bytes:
    """The key's text after its messages: the request's other parts (the same for every call of an endpoint with
    this temperature, trial and repeat, so a caller may keep it: ``Endpoint.answer_key_from``)."""
    rest: dict[str, Any] = {
        "v": KEY_VERSION,
        "target": identity,
        # 0 and 0.0 are one temperature; JSON would spell them differently.
        "temperature": None if temperature is None else float(temperature),
    }
    if trial:
        rest["trial"] = trial
    if repeat:
        rest["repeat"] = repeat
    return ("," + _dumps(rest)[1:]).encode("utf-8")  # every other key sorts after "messages"


def key_with_rest(head, rest: bytes) -> str:
    """The key from :func:`key_head`'s hash (not changed: it is copied) and :func:`key_rest`'s text."""
    digest = head.copy()
    digest.update(rest)
    return digest.hexdigest()


def key_from_head(head, identity: dict[str, Any], *, temperature: float | None, trial: int = 0,
                  repeat: int = 0) -> str:
    """The key from :func:`key_head`'s hash (not changed: it is copied) and the request's other parts."""
    return key_with_rest(head, key_rest(identity, temperature=temperature, trial=trial, repeat=repeat))


def cache_key(identity: dict[str, Any], messages, *, temperature: float | None, max_tokens: int | None,
              trial: int = 0, repeat: int = 0) -> str:
    return key_from_head(key_head(messages, max_tokens=max_tokens), identity, temperature=temperature,
                         trial=trial, repeat=repeat)


class MemoryCache:
    """A dict; values are copied in and out so callers cannot change what is stored."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}

    def get(self, key: str) -> dict | None:
        raw = self._data.get(key)
        return None if raw is None else json.loads(raw)

    def set(self, key: str, value: dict) -> None:
        self._data[key] = json.dumps(value)

    def __len__(self) -> int:
        return len(self._data)


class SqliteCache:
    """Answers in one SQLite file, shared safely by several processes.

    WAL lets readers and one writer work at once; ``busy_timeout`` makes a
    second writer wait instead of failing; ``synchronous=NORMAL`` is safe with
    WAL (a power cut can lose the last answers, never corrupt the file), which
    is the right trade for a cache. One connection per thread.
    """

    # Writes are kept and stored together, in one transaction per this many answers (or on
    # flush/close): one commit per answer was the biggest single cost of a run. An answer
    # not yet stored when a process dies only costs asking the model again.
    WRITE_BATCH = 64

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._pending: dict[str, tuple[str, float]] = {}
        self._pending_lock = threading.Lock()
        with self._connection() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS responses ("
                " key TEXT PRIMARY KEY, value TEXT NOT NULL, stored_at REAL NOT NULL)"
            )

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict | None:
        pending = self._pending.get(key)
        if pending is not None:
            return jsonfast.loads(pending[0])
        row = self._connection().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else jsonfast.loads(row[0])

    def set(self, key: str, value: dict) -> None:
        with self._pending_lock:
            self._pending[key] = (jsonfast.dumps_text(value), time.time())
            full = len(self._pending) >= self.WRITE_BATCH
        if full:
            self.flush()

    def flush(self) -> None:
        """Store every answer kept so far, in one transaction."""
        with self._pending_lock:
            batch, self._pending = self._pending, {}
        if not batch:
            return
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR REPLACE INTO responses (key, value, stored_at) VALUES (?, ?, ?)",
                             [(key, value, stored) for key, (value, stored) in batch.items()])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def __len__(self) -> int:
        self.flush()
        return self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self.flush()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
