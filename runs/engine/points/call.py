"""`$call`: score a response with an external HTTP service; `$factcheck`: not supported.

The request, retries, response checks and error texts follow the upstream
(reference section 2.4, conformance call_service.json). Two guards are ours
(DESIGN deviations 10 and 11):

* a request goes out only to a host listed in `EVALSITE_CALL_HOSTS`
  (comma-separated `host` or `host:port`, read at call time); any other host
  leaves the point not evaluated, with the reason;
* `${NAME}` in a header is filled only for names listed in
  `EVALSITE_BLUEPRINT_ENV`, so an imported blueprint cannot send a key of its
  choosing to a host of its choosing.

And, as for every request the engine sends (runs/engine/providers/own.py), a
`$call` never goes to evalsite itself, listed host or not, and carries the
engine's mark, which evalsite refuses.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from ..providers.own import OwnAddresses, with_engine_header
from .result import PointResult, not_evaluated

CONFIG_KEYS = ("service", "url", "method", "headers", "timeout_ms", "cache", "max_retries", "retry_backoff_ms")
DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_MAX_RETRIES = 2
DEFAULT_BACKOFF_MS = 1000
CACHE_SECONDS = 24 * 60 * 60
_ENV_REFERENCE = re.compile(r"\$\{([^}]+)\}")

FACTCHECK_UNSUPPORTED = (
    "`$factcheck` is not supported: it needs the upstream's hosted fact-checking service. "
    "Use `$call` with a service of your own, or a judged point."
)


class ResultCache:
    """Successful `$call` results for 24 hours, in memory, bounded."""

    def __init__(self, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: OrderedDict[str, tuple[float, dict]] = OrderedDict()
        self._max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored_at, result = entry
            if self._clock() - stored_at > CACHE_SECONDS:
                del self._entries[key]
                return None
            return result

    def put(self, key: str, result: dict) -> None:
        with self._lock:
            self._entries[key] = (self._clock(), result)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)


@dataclass
class CallTransport:
    """How `$call` reaches the network: the HTTP client, how to wait between retries, the cache."""

    client: httpx.Client
    sleep: Callable[[float], None] = time.sleep
    cache: ResultCache = field(default_factory=ResultCache)


_default_transport: CallTransport | None = None
_default_lock = threading.Lock()


def default_transport() -> CallTransport:
    global _default_transport
    with _default_lock:
        if _default_transport is None:
            # Per-request timeouts are set on every call; redirects are not
            # followed so that the host allow-list cannot be stepped around.
            _default_transport = CallTransport(client=httpx.Client(follow_redirects=False))
        return _default_transport


class _CallFailed(Exception):
    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def factcheck(*_: object) -> PointResult:
    return not_evaluated(FACTCHECK_UNSUPPORTED)


def call(
    response: str,
    args: object,
    *,
    model_id: str | None,
    prompt_id: str | None,
    messages: list | None,
    external_services: Mapping | None,
    transport: CallTransport | None = None,
    hosts: frozenset[str] = frozenset(),
    blueprint_env: Mapping[str, str] | None = None,
    blueprint_env_names: frozenset[str] = frozenset(),
    own: OwnAddresses | None = None,
) -> PointResult:
    """`$call`: POST (or GET) to a service and read its score. Only ``hosts`` may be reached
    (EVALSITE_CALL_HOSTS); ``${NAME}`` in headers is filled from ``blueprint_env`` for the
    ``blueprint_env_names`` the operator allowed (EVALSITE_BLUEPRINT_ENV)."""
    if not isinstance(args, (dict, list)):
        return not_evaluated("Argument for 'call' must be an object")
    spec = args if isinstance(args, dict) else {}
    try:
        config, service_name = _resolve_service(spec, external_services)
    except _CallFailed as failure:
        return not_evaluated(f"External service call failed: {failure}")

    url = config.get("url")
    refusal = _host_refusal(url, hosts) or (own.refusal(url, "`$call`") if own is not None else None)
    if refusal:
        return not_evaluated(refusal)

    params = {key: value for key, value in spec.items() if key not in CONFIG_KEYS}
    body = _request_body(response, model_id, prompt_id, messages, params)
    transport = transport or default_transport()
    use_cache = config.get("cache") is not False
    cache_key = json.dumps(["call", service_name, url, body], sort_keys=True, default=str)
    if use_cache:
        cached = transport.cache.get(cache_key)
        if cached is not None:
            explain = cached.get("explain")
            return PointResult(score=float(cached["score"]), explain=f"{explain} (cached)" if explain else None)

    try:
        headers = _headers(config, blueprint_env or {}, blueprint_env_names)
        result = _request_with_retries(config, body, transport, headers)
    except _CallFailed as failure:
        return not_evaluated(f"External service call failed: {failure}")
    if result.get("error"):
        return not_evaluated(f"External service error: {result['error']}")
    if use_cache:
        transport.cache.put(cache_key, result)
    explain = result.get("explain")
    return PointResult(score=float(result["score"]), explain=None if explain is None else str(explain))


def _resolve_service(spec: dict, services: Mapping | None) -> tuple[dict, str]:
    if spec.get("service"):
        name = spec["service"]
        if not services or name not in services or not isinstance(services[name], Mapping):
            available = ", ".join(services) if services else "none"
            raise _CallFailed(f"External service '{name}' not found in config. Available services: {available}")
        return dict(services[name]), str(name)
    if spec.get("url"):
        config = {key: spec.get(key) for key in CONFIG_KEYS if key != "service"}
        config["method"] = spec.get("method") or "POST"
        return config, "inline"
    raise _CallFailed("Must provide either 'service' (named service) or 'url' (inline service)")


def _host_refusal(url: object, hosts: frozenset[str]) -> str | None:
    if not isinstance(url, str) or not url:
        return "External service call failed: the service has no `url`"
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return f"External service call failed: `{url}` is not a valid URL"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return f"External service call failed: `{url}` is not an http or https URL"
    host = parsed.host.lower()
    if host in hosts or (parsed.port is not None and f"{host}:{parsed.port}" in hosts):
        return None
    if not hosts:
        return (
            f"`$call` is not evaluated: no host is allowed (the request would go to {host}). "
            "Set EVALSITE_CALL_HOSTS to the hosts `$call` points may reach."
        )
    return f"`$call` is not evaluated: {host} is not in EVALSITE_CALL_HOSTS, the hosts `$call` points may reach."


def _request_body(
    response: str, model_id: str | None, prompt_id: str | None, messages: list | None, params: dict
) -> dict:
    values = {
        "response": response,
        "modelId": model_id,
        "promptId": prompt_id,
        "messages": messages if messages is not None else [],
        "promptText": _prompt_text(messages),
    }
    body = {"response": response}
    # JSON.stringify drops undefined values, so absent ids are absent keys.
    if model_id is not None:
        body["modelId"] = model_id
    if prompt_id is not None:
        body["promptId"] = prompt_id
    body.update(_substitute(params, values))
    return body


def _prompt_text(messages: list | None) -> str:
    """The text of the last user message: what the model was answering."""
    for message in reversed(messages or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _substitute(value: object, values: dict) -> object:
    if isinstance(value, str):
        if value == "{messages}":
            return values["messages"]  # the array itself, not its JSON text
        for name, replacement in values.items():
            placeholder = "{" + name + "}"
            if placeholder in value:
                if replacement is None:
                    text = "undefined"
                elif isinstance(replacement, str):
                    text = replacement
                else:
                    text = json.dumps(replacement, ensure_ascii=False)
                value = value.replace(placeholder, text)
        return value
    if isinstance(value, list):
        return [_substitute(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, values) for key, item in value.items()}
    return value


def _headers(config: dict, values: Mapping[str, str], permitted: frozenset[str]) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    configured = config.get("headers")
    if not isinstance(configured, Mapping):
        return with_engine_header(headers)
    for key, value in configured.items():
        try:
            headers[str(key)] = _fill_env(str(value), values, permitted)
        except _CallFailed as failure:
            raise _CallFailed(f"Failed to substitute env var in header '{key}': {failure}") from None
    return with_engine_header(headers)


def _fill_env(text: str, values: Mapping[str, str], permitted: frozenset[str]) -> str:

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in permitted:
            raise _CallFailed(
                f"Environment variable {name} is not available to blueprints: "
                "list it in EVALSITE_BLUEPRINT_ENV to allow it"
            )
        value = values.get(name)
        if value is None:
            raise _CallFailed(f"Environment variable {name} is not defined")
        return value

    return _ENV_REFERENCE.sub(fill, text)


def _number_setting(config: dict, key: str, default: float) -> float:
    value = config.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def _request_with_retries(config: dict, body: dict, transport: CallTransport, headers: dict[str, str]) -> dict:
    max_retries = config.get("max_retries")
    if not (isinstance(max_retries, int) and not isinstance(max_retries, bool) and max_retries >= 0):
        max_retries = DEFAULT_MAX_RETRIES
    backoff_ms = _number_setting(config, "retry_backoff_ms", DEFAULT_BACKOFF_MS)
    attempt = 0
    while True:
        try:
            return _request_once(config, body, transport, headers)
        except _CallFailed as failure:
            if attempt < max_retries and failure.retryable:
                transport.sleep(backoff_ms * (attempt + 1) / 1000)
                attempt += 1
                continue
            raise


def _request_once(config: dict, body: dict, transport: CallTransport, headers: dict[str, str]) -> dict:
    timeout_ms = _number_setting(config, "timeout_ms", DEFAULT_TIMEOUT_MS)
    method = str(config.get("method") or "POST").upper()
    try:
        reply = transport.client.request(
            method,
            config["url"],
            headers=headers,
            content=json.dumps(body, ensure_ascii=False, default=str).encode(),
            timeout=timeout_ms / 1000,
        )
    except httpx.TimeoutException:
        raise _CallFailed(f"timed out after {timeout_ms:g} ms", retryable=True) from None
    except httpx.TransportError as error:
        # Node's fetch reports every network failure as "fetch failed", which the upstream retries.
        raise _CallFailed(str(error) or type(error).__name__, retryable=True) from None
    if not reply.is_success:
        raise _CallFailed(f"HTTP {reply.status_code}: {reply.text[:200]}", retryable=reply.status_code >= 500)
    try:
        result = reply.json()
    except ValueError as error:
        raise _CallFailed(f"the service did not answer with JSON: {error}") from None
    problem = _response_problem(result)
    if problem:
        raise _CallFailed(f"Invalid service response: {problem}")
    return result


def _js_typeof(value: object, present: bool = True) -> str:
    if not present:
        return "undefined"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _response_problem(result: object) -> str | None:
    if not isinstance(result, dict):
        return "Response must be an object"
    if result.get("error"):
        return None  # a well-formed report of failure
    score = result.get("score")
    if _js_typeof(score, "score" in result) != "number":
        return f"score must be a number, got {_js_typeof(score, 'score' in result)}"
    if not 0 <= score <= 1:
        return f"score must be between 0 and 1, got {score:g}"
    return None
