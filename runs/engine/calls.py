"""Every call an item makes, as sent and as answered, kept for the reviewer.

The router describes each chat call it answers (:func:`record`): the request
body as sent (messages and parameters; never headers, which carry keys), the
URL without its query, each attempt's status, latency and reason, the raw body
of the answer, tokens, cost, and whether the cache or a fixture answered. The
pipeline collects them per item (:func:`recording`), and the store keeps them
as one compressed blob per response (:func:`pack`, :func:`unpack`), read only
when a reviewer opens them.

Bounded: at most ``MAX_CALLS`` per item and ``MAX_BODY_CHARS`` of any one body
(the rest is cut with a note), so a model that answers a megabyte, or a prompt
that makes hundreds of judge calls, costs a known amount of storage.

Each answered call also keeps the answer's text as the run used it (``text``,
:func:`keep_answer`, up to ``MAX_ANSWER_CHARS``): the run's own answers, which
a replay serves back call for call (:func:`take_recorded`,
:func:`replayed_result`) whatever the shared response cache holds since.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

from . import jsonfast
from .types import ChatRequest, ChatResult, Usage

MAX_CALLS = 200  # per item; more are counted, not kept
MAX_BODY_CHARS = 64_000  # per request or answer body
MAX_ANSWER_CHARS = 1_000_000  # an answer's text kept for a replay; a longer one is counted, not kept
FORMAT = 1  # the version of the packed layout

_current: ContextVar[list | None] = ContextVar("evalsite_calls", default=None)


@contextmanager
def recording() -> Iterator[list[dict]]:
    """Collect the calls made by the code inside (and the tasks it starts) into the list it yields."""
    log: list[dict] = []
    token = _current.set(log)
    try:
        yield log
    finally:
        _current.reset(token)


def recording_now() -> bool:
    return _current.get() is not None


def record(entry: dict) -> None:
    """Add one call to the item's list, if something is collecting (a run is; a one-off check is not)."""
    log = _current.get()
    if log is None:
        return
    if len(log) >= MAX_CALLS:
        if log and log[-1].get("dropped") is not None:
            log[-1]["dropped"] += 1
        else:
            log.append({"dropped": 1})
        return
    log.append(entry)


def clip(text: str | None, limit: int = MAX_BODY_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters not kept]"


def bare_url(url: str) -> str:
    """The URL without query or fragment (a custom model's URL could carry a key there)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


# An entry's request body as the JSON text that left (already checked for secrets by the router): ``pack``
# writes it in place of ``request`` instead of encoding the same body a second time (most of a judge call's
# log is its prompt). Never stored under this name.
REQUEST_JSON = "_requestJson"


def _encoded(entry: dict) -> str:
    raw = entry.get(REQUEST_JSON)
    if not isinstance(raw, str):
        return jsonfast.dumps_text({k: v for k, v in entry.items() if k != REQUEST_JSON} if REQUEST_JSON in entry
                                   else entry)
    head = jsonfast.dumps_text({k: v for k, v in entry.items() if k not in ("request", REQUEST_JSON)})
    return f'{head[:-1]}{"," if len(head) > 2 else ""}"request":{raw}}}'


def pack(entries: list[dict] | tuple[dict, ...] | None) -> bytes | None:
    """One compressed blob for a response's calls (None when there are none)."""
    if not entries:
        return None
    data = f'{{"v":{FORMAT},"calls":[{",".join(_encoded(e) for e in entries)}]}}'
    # A small window and memory level: most logs are a few kilobytes, and zlib's default set-up for a
    # 32 KB window costs seven times the compressing itself (measured: 53 us against 7 us per call).
    # Level 1: an item of ten judge calls (35 KB of JSON) packs in 62 us instead of 129 us at level 6,
    # 10% larger (2.3 KB against 2.1 KB).
    packer = zlib.compressobj(1, zlib.DEFLATED, 13, 5)
    return packer.compress(data.encode("utf-8")) + packer.flush()


def unpack(blob: bytes | memoryview | None) -> list[dict]:
    """The calls of a stored blob; an unreadable blob reads as one entry that says so."""
    if not blob:
        return []
    try:
        data = jsonfast.loads(zlib.decompress(bytes(blob)))
        calls = data.get("calls") if isinstance(data, dict) else None
        if not isinstance(calls, list):
            raise ValueError("no calls list")
        return [c for c in calls if isinstance(c, dict)]
    except (zlib.error, ValueError, UnicodeDecodeError) as exc:
        return [{"unreadable": f"the stored call log could not be read ({exc})"}]


# --- the run's own answers, for a replay ---------------------------------------------------------------


def keep_answer(entry: dict, result: ChatResult) -> None:
    """Keep the text the run used for this answered call, and how many attempts it took (a replay serves
    both back); a text past ``MAX_ANSWER_CHARS`` is counted (``textNotKept``), and a replay of the run is
    refused, naming it."""
    text = result.text
    if not result.ok or not isinstance(text, str):
        return
    entry["attemptCount"] = result.attempts
    if result.tool_calls:  # a native tool loop's step: its calls are the answer as much as its text
        entry["toolCalls"] = [dict(c) for c in result.tool_calls]
    if len(text) > MAX_ANSWER_CHARS:
        entry["textNotKept"] = len(text)
    else:
        entry["text"] = text


def answer_problem(entry: dict) -> str | None:
    """Why a logged call's answer cannot be served by a replay; None: it can."""
    if "dropped" in entry:
        return f"{entry['dropped']} more calls were not kept (an item keeps {MAX_CALLS})"
    if "unreadable" in entry:
        return str(entry["unreadable"])
    if entry.get("error"):
        return f"the original call failed ({entry['error']}), so it has no answer"
    if not entry.get("cacheKey"):
        return "no cache key was kept for it (a run made before replay existed)"
    if isinstance(entry.get("textNotKept"), int):
        return (f"its answer ({entry['textNotKept']:,} characters) was longer than a call log keeps "
                f"({MAX_ANSWER_CHARS:,})")
    text = entry.get("text")
    if not isinstance(text, str):
        return "its answer was not kept in the call log (a run made before replays kept answers)"
    return None


def take_recorded(recorded: list[dict], key: str | None, request: ChatRequest) -> dict | None:
    """The original call that answered ``request`` (same cache key, purpose and turn; the same label first),
    taken out of ``recorded`` so that two identical requests get the two answers the run had, in order."""
    if key is None:
        return None
    found = None
    for entry in recorded:
        if (entry.get("cacheKey") == key and entry.get("purpose") == request.purpose
                and (entry.get("turn") or 0) == request.turn and bool(entry.get("tools")) == bool(request.tools)):
            if entry.get("label") == request.label:
                found = entry
                break
            if found is None:
                found = entry
    if found is not None:
        recorded.remove(found)
    return found


def replayed_result(entry: dict) -> ChatResult | None:
    """The answer an original call got, as the caller received it (its text, tokens, cost, latency, cache
    flag, finish reason); None when its text was not kept."""
    if answer_problem(entry) is not None:
        return None
    attempts = entry.get("attemptCount")
    calls = entry.get("toolCalls")
    return ChatResult(text=entry["text"], usage=Usage(entry.get("input_tokens"), entry.get("output_tokens")),
                      latency_ms=entry.get("latency_ms"), cost_usd=entry.get("cost_usd"),
                      cached=bool(entry.get("cached")), finish_reason=entry.get("finish_reason"),
                      attempts=attempts if isinstance(attempts, int) else 0,
                      tool_calls=tuple(c for c in calls if isinstance(c, dict)) if isinstance(calls, list) else ())


# --- what calls spent ----------------------------------------------------------------------------


def requests_sent(entry: dict) -> int:
    """The requests a call sent to a provider: each HTTP attempt (a retry too). None for an answer from the
    cache or the fixtures, or a call the cancel or the budget held back. A replay's call stands for its
    original's (it carries the original's attempts, tokens and cost), so a replay's figures are the original's."""
    if entry.get("source") != "provider":
        return 0
    return len(entry.get("attempts") or ())


def unknown_price(entry: dict) -> bool:
    """A call of unknown price: it went to a provider (a replay's stands for its original's) and came back
    without a cost (a model without a price, or no usage). A call never sent is not one."""
    return (entry.get("source") == "provider" and bool(entry.get("attempts")) and not entry.get("cached")
            and entry.get("cost_usd") is None)


def spent(entries) -> dict:
    """What ``entries`` (call-log entries) spent: ``sent`` requests, tokens as the answers gave them, the cost of
    the calls of known price (None when no call of known price was made and some call's price is unknown), and
    ``unknownCostCalls``. ``calls`` counts the calls answered or sent (a cache hit too), as ``JudgeUsage`` does;
    a call the cancel or the budget held back is none of these."""
    made = [e for e in entries if "purpose" in e and (e.get("attempts") or e.get("source") != "provider")]
    known = [e["cost_usd"] for e in made if e.get("cost_usd") is not None]
    unknown = sum(1 for e in made if unknown_price(e))
    return {"calls": len(made), "sent": sum(requests_sent(e) for e in made),
            "inputTokens": sum(e.get("input_tokens") or 0 for e in made),
            "outputTokens": sum(e.get("output_tokens") or 0 for e in made),
            "costUsd": float(sum(known)) if known or not unknown else None, "unknownCostCalls": unknown}


def traced_instead(recorded: list[dict], key: str | None, request: ChatRequest) -> bool:
    """Whether the original run sent this request without tools (its model took none, toolUse.mode auto)."""
    return bool(request.tools) and key is not None and any(
        e.get("cacheKey") == key and e.get("purpose") == request.purpose and (e.get("turn") or 0) == request.turn
        and not e.get("tools") for e in recorded)
