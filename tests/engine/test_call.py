"""`$call` beyond the upstream records: the host allow-list, the env allow-list, retries, caching, templates."""

from __future__ import annotations

import json

import httpx
import pytest

from runs.engine.config import EngineConfig
from runs.engine.points import CallTransport, ResultCache, evaluate_point
from runs.engine.providers import settings_from_env

SERVICES = {
    "checker": {"url": "https://scores.example.org/check", "headers": {"Authorization": "Bearer ${SCORE_KEY}"}},
    "local": {"url": "http://127.0.0.1:8123/score", "timeout_ms": 250, "max_retries": 1, "retry_backoff_ms": 10},
}


class Service:
    """A scripted HTTP service: answers in order, remembers requests."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.waits: list[float] = []
        self.transport = CallTransport(
            client=httpx.Client(transport=httpx.MockTransport(self.handle)), sleep=self.waits.append
        )

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def body(self, index: int = 0) -> dict:
        return json.loads(self.requests[index].content)


def call_config(hosts: str = "", allowed: str = "", **environ: str) -> EngineConfig:
    """What the operator configured: EVALSITE_CALL_HOSTS, EVALSITE_BLUEPRINT_ENV and the environment's values."""
    return EngineConfig(call_hosts=frozenset(h.strip().lower() for h in hosts.split(",") if h.strip()),
                        providers=settings_from_env({"EVALSITE_BLUEPRINT_ENV": allowed, **environ}))


# SCORE_KEY may be used in headers; HOME_SECRET is in the environment but not allowed.
CONFIG = call_config("scores.example.org, 127.0.0.1:8123", "SCORE_KEY", SCORE_KEY="k-123", HOME_SECRET="do-not-send")


def call(service: Service, args: dict, response: str = "The answer is 4.", **extra):
    extra.setdefault("config", CONFIG)
    return evaluate_point(
        "call",
        args,
        response,
        model_id="openai:gpt-4o",
        prompt_id="p1",
        external_services=SERVICES,
        call_transport=service.transport,
        **extra,
    )


def ok(score: float, explain: str | None = None) -> httpx.Response:
    return httpx.Response(200, json={"score": score, **({"explain": explain} if explain else {})})


def test_a_host_not_listed_is_not_evaluated_and_no_request_is_made() -> None:
    service = Service(ok(1))
    result = call(service, {"url": "https://elsewhere.example.com/x"})
    assert result.score is None
    assert result.error == "`$call` is not evaluated: elsewhere.example.com is not in EVALSITE_CALL_HOSTS, the hosts `$call` points may reach."
    assert service.requests == []


def test_with_no_hosts_configured_nothing_is_reached() -> None:
    service = Service(ok(1))
    result = call(service, {"service": "checker"}, config=call_config("", "SCORE_KEY", SCORE_KEY="k-123"))
    assert "Set EVALSITE_CALL_HOSTS" in result.error and service.requests == []


def test_a_port_in_the_allow_list_must_match() -> None:
    service = Service(ok(1))
    assert call(service, {"url": "http://127.0.0.1:9999/score"}).score is None
    assert call(service, {"service": "local"}).score == 1.0


@pytest.mark.parametrize("url", ["ftp://scores.example.org/x", "not a url", "https://"])
def test_only_http_urls(url: str) -> None:
    assert call(Service(ok(1)), {"url": url}).score is None


def test_a_header_may_only_use_permitted_variables() -> None:
    service = Service(ok(1))
    inline = {"url": "https://scores.example.org/check", "headers": {"X-Key": "${HOME_SECRET}"}}
    result = call(service, inline)
    assert result.error == (
        "External service call failed: Failed to substitute env var in header 'X-Key': Environment variable "
        "HOME_SECRET is not available to blueprints: list it in EVALSITE_BLUEPRINT_ENV to allow it"
    )
    assert service.requests == []


def test_the_request_carries_standard_fields_templates_and_headers() -> None:
    service = Service(ok(0.9, "good"))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    args = {
        "service": "checker",
        "claim": "{response}",
        "meta": {"who": "{modelId} on {promptId}", "list": ["{promptText}"]},
        "history": "{messages}",
        "history_text": "all: {messages}",
    }
    result = call(service, args, messages=messages)
    assert (result.score, result.explain, result.error) == (0.9, "good", None)
    request = service.requests[0]
    assert request.method == "POST"
    assert request.headers["Authorization"] == "Bearer k-123"
    assert request.headers["Content-Type"] == "application/json"
    body = service.body()
    assert body["response"] == body["claim"] == "The answer is 4."
    assert body["modelId"] == "openai:gpt-4o" and body["promptId"] == "p1"
    assert body["meta"] == {"who": "openai:gpt-4o on p1", "list": ["What is 2+2?"]}
    assert body["history"] == messages
    assert body["history_text"] == "all: " + json.dumps(messages, ensure_ascii=False)
    assert "service" not in body


def test_server_errors_and_network_failures_are_retried_with_growing_waits() -> None:
    service = Service(httpx.Response(503, text="busy"), httpx.ConnectError("refused"), ok(0.5))
    assert call(service, {"service": "checker"}).score == 0.5
    assert len(service.requests) == 3
    assert service.waits == [1.0, 2.0]


def test_retries_stop_at_max_retries_and_report_the_last_failure() -> None:
    service = Service(httpx.Response(500, text="x" * 500))
    result = call(service, {"service": "local"})
    assert result.error == "External service call failed: HTTP 500: " + "x" * 200
    assert len(service.requests) == 2 and service.waits == [0.01]


def test_client_errors_are_not_retried() -> None:
    service = Service(httpx.Response(404, text="no such route"))
    assert call(service, {"service": "checker"}).error == "External service call failed: HTTP 404: no such route"
    assert len(service.requests) == 1


def test_a_timeout_is_reported_in_milliseconds() -> None:
    service = Service(httpx.ReadTimeout("slow"))
    result = call(service, {"service": "local"})
    assert result.error == "External service call failed: timed out after 250 ms"


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (httpx.Response(200, json=[0.5]), "Invalid service response: Response must be an object"),
        (httpx.Response(200, json={"score": "0.5"}), "Invalid service response: score must be a number, got string"),
        (httpx.Response(200, json={"score": True}), "Invalid service response: score must be a number, got boolean"),
        (httpx.Response(200, json={"score": 1.5}), "Invalid service response: score must be between 0 and 1, got 1.5"),
        (httpx.Response(200, text="<html>"), "the service did not answer with JSON"),
        (httpx.Response(200, json={"error": "quota"}), "External service error: quota"),
    ],
)
def test_bad_answers_are_errors(answer: httpx.Response, error: str) -> None:
    result = call(Service(answer), {"service": "checker"})
    assert result.score is None and error in result.error


def test_successes_are_cached_and_marked() -> None:
    service = Service(ok(0.7, "fine"))
    assert call(service, {"service": "checker"}).explain == "fine"
    again = call(service, {"service": "checker"})
    assert (again.score, again.explain) == (0.7, "fine (cached)")
    assert len(service.requests) == 1
    call(service, {"service": "checker"}, response="another answer")
    assert len(service.requests) == 2


def test_cache_false_always_asks() -> None:
    service = Service(ok(0.7))
    inline = {"url": "https://scores.example.org/check", "cache": False}
    call(service, inline)
    call(service, inline)
    assert len(service.requests) == 2


def test_failures_are_not_cached() -> None:
    service = Service(httpx.Response(400, text="bad"), ok(1))
    assert call(service, {"service": "checker"}).score is None
    assert call(service, {"service": "checker"}).score == 1.0


def test_cache_entries_expire_after_a_day() -> None:
    now = [0.0]
    cache = ResultCache(clock=lambda: now[0])
    cache.put("k", {"score": 1})
    now[0] = 24 * 3600 - 1
    assert cache.get("k") == {"score": 1}
    now[0] = 24 * 3600 + 1
    assert cache.get("k") is None


def test_a_real_server_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = json.dumps({"score": 1 if "4" in body["response"] else 0, "explain": "checked"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        transport = CallTransport(client=httpx.Client())
        result = evaluate_point(
            "$call", {"url": f"http://127.0.0.1:{port}/score"}, "It is 4.", call_transport=transport,
            config=call_config(f"127.0.0.1:{port}"),
        )
        assert (result.score, result.explain) == (1.0, "checked")
    finally:
        server.shutdown()
        server.server_close()


def test_factcheck_is_not_evaluated() -> None:
    assert evaluate_point("$factcheck", None, "x").error.startswith("`$factcheck` is not supported")
