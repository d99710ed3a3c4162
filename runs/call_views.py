"""The calls a response made, as its 'Every call' section shows them."""

from __future__ import annotations

import json

from runs.engine import calls as calls_log

_SHOWN_CHARS = calls_log.MAX_BODY_CHARS  # a body shown on the page, as bounded as the stored one


def _pretty(value) -> str:
    """JSON indented for reading; text that is not JSON as it came."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value[:_SHOWN_CHARS]
    text = json.dumps(value, ensure_ascii=False, indent=2)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "\n…"


# How an earlier attempt ended (``EarlierAttempt.why``), as the calls page says it.
ENDED = {"retry": "done again by retry failed", "re-run": "done again by a re-run",
         "stopped": "stopped by a cancel or the budget"}


def call_views(calls: list[dict]) -> list[dict]:
    """The stored call log as the calls page shows it: one entry per call, in the order they were made (with
    earlier attempts, each call says the attempt it belonged to)."""
    out = []
    for call in calls:
        if "dropped" in call or "unreadable" in call:
            out.append({"note": call.get("unreadable") or f"{call['dropped']} more calls were made and not kept "
                                                           f"(at most {calls_log.MAX_CALLS} per response are kept)"})
            continue
        request = call.get("request")
        messages = request.get("messages") if isinstance(request, dict) else None
        params = ({k: v for k, v in request.items() if k not in ("messages", "contents", "system")}
                  if isinstance(request, dict) else None)
        out.append({
            "purpose": call.get("purpose") or "candidate", "label": call.get("label") or "",
            "model": call.get("model") or "", "url": call.get("url") or "", "source": call.get("source") or "",
            "status": call.get("status"), "error": call.get("error"), "latency_ms": call.get("latency_ms"),
            "input_tokens": call.get("input_tokens"), "output_tokens": call.get("output_tokens"),
            "cost_usd": call.get("cost_usd"), "cached": bool(call.get("cached")),
            "finish_reason": call.get("finish_reason"),
            "retries": [a for a in call.get("attempts") or () if a.get("reason")],
            "messages": messages if isinstance(messages, list) else None,
            "params": _pretty(params) if params else "",
            "request": _pretty(request) if request is not None else "",
            "answer": _pretty(call.get("answer")) if call.get("answer") is not None else "",
            "attempt": call.get("attempt"), "attempt_ended": ENDED.get(call.get("attemptEnded") or "", ""),
        })
    return out


PURPOSE_NAMES = {"candidate": "Candidate", "user": "Simulated user", "judge": "Judges"}


def by_purpose(calls: list[dict]) -> list[dict]:
    """What the response's calls spent, apart by purpose (the candidate, a simulated user, the judges), summed by
    the engine's ``calls.spent``; shown when there is more than one purpose."""
    groups: dict[str, list[dict]] = {}
    for call in calls:
        if "purpose" in call:
            groups.setdefault(call.get("purpose") or "candidate", []).append(call)
    if len(groups) < 2:
        return []
    return [{"purpose": purpose, "name": PURPOSE_NAMES.get(purpose, purpose), **calls_log.spent(entries)}
            for purpose, entries in groups.items()]


def simulated_user_bill(run) -> dict | None:
    """What a run's simulated users spent (calls of purpose ``user``), summed from every response's call log and
    every earlier attempt's (a retry, a re-run, a stop), as the run page's bill shows it on a line of its own;
    None when the run made no such call. Their figures are part of the candidates' line too (a generation's
    spending includes its user model's); ``dropped``: responses whose log kept only its first ``MAX_CALLS`` calls,
    so the sum may be short."""
    from runs.models import EarlierAttempt, Response

    entries: list[dict] = []
    dropped = 0
    blobs = [*Response.objects.filter(run=run).exclude(candidate_calls=None)
             .values_list("candidate_calls", flat=True).iterator(chunk_size=200),
             *EarlierAttempt.objects.filter(run=run).exclude(calls=None).values_list("calls", flat=True)
             .iterator(chunk_size=200)]
    for blob in blobs:
        log = calls_log.unpack(blob)
        entries.extend(c for c in log if c.get("purpose") == "user")
        dropped += any("dropped" in c for c in log)
    if not entries:
        return None
    return {**calls_log.spent(entries), "dropped": dropped}
