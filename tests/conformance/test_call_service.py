"""Every record of shared/conformance/call_service.json, with the HTTP layer mocked by httpx.MockTransport.

Deviations 10 and 11 (DESIGN.md): `$call` reaches only hosts listed in
EVALSITE_CALL_HOSTS, and `${NAME}` in headers is filled only for names listed
in EVALSITE_BLUEPRINT_ENV. Each record runs with an engine configuration (what
those settings become, runs.engine.config) set to what it needs
(the hosts it names, the variables its headers use), so every record keeps the
upstream's expectation; tests/engine/test_call.py covers what happens otherwise.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from runs.engine.config import EngineConfig
from runs.engine.points import CallTransport, evaluate_point
from runs.engine.providers import settings_from_env

from .matchers import assert_matches, load_records, record_ids

RECORDS = load_records("call_service.json")


def hosts_named_in(record: dict) -> set[str]:
    urls = [service.get("url", "") for service in record["context"].get("externalServices", {}).values()]
    if isinstance(record["args"], dict) and isinstance(record["args"].get("url"), str):
        urls.append(record["args"]["url"])
    return {httpx.URL(url).host for url in urls if url.startswith("http")}


def env_names_used_in(record: dict) -> set[str]:
    return set(re.findall(r"\$\{([^}]+)\}", json.dumps(record)))


def mock_transport(record: dict, requests: list[httpx.Request]) -> httpx.MockTransport:
    mock = record.get("http_mock")

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if mock is None:
            return httpx.Response(599, text="this record expects no request")
        if "network_error" in mock:
            raise httpx.ConnectError(mock["network_error"], request=request)
        if mock["ok"]:
            return httpx.Response(200, json=mock["json"])
        return httpx.Response(mock["status"], text=mock.get("text", ""))

    return httpx.MockTransport(handle)


def as_upstream_result(result) -> dict:
    if result.error is not None:
        return {"error": result.error}
    return {key: value for key, value in (("score", result.score), ("explain", result.explain)) if value is not None}


@pytest.mark.parametrize("record", RECORDS, ids=record_ids(RECORDS))
def test_call_service_record(record: dict) -> None:
    # The operator's configuration for this record: the hosts it names, the variables its headers use.
    config = EngineConfig(call_hosts=frozenset(h.lower() for h in hosts_named_in(record)),
                          providers=settings_from_env({**record["env"],
                                                       "EVALSITE_BLUEPRINT_ENV": ",".join(env_names_used_in(record))}))

    requests: list[httpx.Request] = []
    waits: list[float] = []
    transport = CallTransport(client=httpx.Client(transport=mock_transport(record, requests)), sleep=waits.append)
    context = record["context"]
    result = evaluate_point(
        "call",
        record["args"],
        record["response"],
        model_id=context.get("modelId"),
        prompt_id=context.get("promptId"),
        external_services=context.get("externalServices"),
        call_transport=transport,
        config=config,
    )
    actual = as_upstream_result(result)

    expect = record["expect"]
    if "http_mock" not in record:
        assert requests == [], "no request was expected"
    if "result" in expect:
        assert_matches(actual, expect["result"])
    if "result_include" in expect:
        assert_matches(actual, expect["result_include"], partial=True)
    if "result_score" in expect:
        assert result.error is None, result.error
        assert_matches(result.score, expect["result_score"])
    if "result_explain" in expect:
        assert_matches(actual.get("explain"), expect["result_explain"])
    for fragment in expect.get("error_contains", []):
        assert result.score is None
        assert fragment in (result.error or ""), f"{fragment!r} not in {result.error!r}"

    wanted = record.get("expect_request")
    if wanted:
        assert requests, "a request was expected"
        request = requests[0]
        body = json.loads(request.content)
        if "url" in wanted:
            assert str(request.url) == wanted["url"]
        if "method" in wanted:
            assert request.method == wanted["method"]
        for header, value in wanted.get("headers_include", {}).items():
            assert request.headers.get(header) == value
        assert_matches(body, wanted.get("body_include", {}), partial=True)
        for key in wanted.get("body_excludes_keys", []):
            assert key not in body
        for fragment in wanted.get("body_text_contains", []):
            assert fragment in request.content.decode()
