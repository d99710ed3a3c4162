"""Each API format against golden request/response samples written from the providers' API references.

The samples (tests/engine/golden/*.json) were written by hand from each
provider's documentation, not produced by our code: the request we send
must equal the documented shape, and the documented answer must read back as
the text, usage and finish reason the sample states.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from blueprints.spec.schema import CustomModel
from runs.engine.providers import Router, settings_from_env
from runs.engine.types import ChatRequest

GOLDEN = Path(__file__).parent / "golden"
SAMPLES = sorted(p for p in GOLDEN.glob("*.json") if p.name != "errors.json")
ERRORS = json.loads((GOLDEN / "errors.json").read_text(encoding="utf-8"))["cases"]


def _router(sample: dict, handler, **settings) -> Router:
    customs = {}
    if "custom_model" in sample:
        model = CustomModel.model_validate(sample["custom_model"])
        customs[model.id] = model
    env = settings_from_env(sample["env"], backoff_base_s=0.001, backoff_max_s=0.002, **settings)
    return Router(env, custom_models=customs, transport=httpx.MockTransport(handler))


def _call(sample: dict) -> ChatRequest:
    call = sample["call"]
    return ChatRequest(model_id=sample["model_id"], messages=tuple(call["messages"]),
                       temperature=call.get("temperature"), max_tokens=call.get("max_tokens"))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_the_request_and_the_answer_match_the_golden_sample(path):
    sample = json.loads(path.read_text(encoding="utf-8"))
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(sample["response"]["status"], json=sample["response"]["json"])

    async def main():
        async with _router(sample, handler) as router:
            return await router.complete(_call(sample))

    result = asyncio.run(main())

    assert len(seen) == 1
    request, expected = seen[0], sample["request"]
    assert request.method == expected["method"]
    assert str(request.url) == expected["url"]
    for name, value in expected["headers"].items():
        assert request.headers.get(name) == value, name
    for name in expected.get("absent_headers", []):
        assert name not in request.headers, name
    assert json.loads(request.content) == expected["json"]

    assert result.error is None, result.error
    want = sample["result"]
    assert result.text == want["text"]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (want["input_tokens"], want["output_tokens"])
    assert result.finish_reason == want["finish_reason"]
    assert result.attempts == 1 and not result.cached


@pytest.mark.parametrize("case", ERRORS, ids=[c["name"] for c in ERRORS])
def test_a_documented_error_answer_becomes_a_reason_without_the_key(case):
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(case["status"], json=case["json"], headers=case.get("headers", {}))

    sample = {"env": case["env"], "model_id": case["model_id"],
              "call": {"messages": [{"role": "user", "content": "hi"}], "temperature": 0}}

    async def main():
        async with _router(sample, handler, max_attempts=2) as router:
            return await router.complete(_call(sample))

    result = asyncio.run(main())

    assert result.text is None
    for fragment in case["reason_contains"]:
        assert fragment in result.error, (fragment, result.error)
    assert result.retryable is case["retryable"]
    assert calls == (2 if case["retryable"] else 1)
    for key in case["env"].values():
        assert key not in result.error
