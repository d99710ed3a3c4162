"""Embeddings for similarity to an ideal: request shapes per format, the fake server end to end, the cache."""

import asyncio
import json

import httpx
import pytest

from runs.engine.providers import MemoryCache, Router, settings_from_env
from runs.engine.providers.embeddings import embeddings_request
from runs.engine.providers.endpoints import resolve_endpoint
from runs.engine.scoring import cosine_similarity

ENV = {"OPENAI_API_KEY": "sk-test-secret", "GEMINI_API_KEY": "g-test", "ANTHROPIC_API_KEY": "a-test"}


@pytest.mark.parametrize("model, url, body", [
    ("openai:text-embedding-3-small", "https://api.openai.com/v1/embeddings",
     {"model": "text-embedding-3-small", "input": ["a", "b"]}),
    ("google:text-embedding-004",
     "https://generativelanguage.googleapis.com/v1beta/models/text-embedding-004:batchEmbedContents",
     {"requests": [{"model": "models/text-embedding-004", "content": {"parts": [{"text": "a"}]}},
                   {"model": "models/text-embedding-004", "content": {"parts": [{"text": "b"}]}}]}),
])
def test_each_format_asks_for_embeddings_as_its_api_reference_says(model, url, body):
    endpoint = resolve_endpoint(model, settings_from_env(ENV), {})
    assert embeddings_request(endpoint, ["a", "b"]) == (url, body)


def test_a_provider_without_embeddings_says_which_model_to_choose():
    endpoint = resolve_endpoint("anthropic:claude-3-5-haiku", settings_from_env(ENV), {})
    reason = embeddings_request(endpoint, ["a"])
    assert isinstance(reason, str) and "no embeddings API" in reason and "EVALSITE_EMBEDDINGS_MODEL" in reason


def run(coroutine):
    return asyncio.run(coroutine)


def test_the_fake_server_embeds_and_the_cache_keeps_each_text_once(fake_llm):
    settings = settings_from_env({"OPENAI_BASE_URL": fake_llm.base_url + "/v1", "OPENAI_API_KEY": "sk-x"})
    cache = MemoryCache()

    async def main():
        async with Router(settings, cache=cache) as router:
            first = await router.embed("openai:embed-model", ["Paris is the capital.", "Paris is the capital."])
            second = await router.embed("openai:embed-model", ["Paris is the capital.", "Lyon, maybe."])
            return first, second

    first, second = run(main())
    assert cosine_similarity(*first) == pytest.approx(1.0)
    assert cosine_similarity(*second) < 0.95
    requests = [r for r in fake_llm.requests() if r["protocol"] == "embeddings"]
    assert [r["body"]["input"] for r in requests] == [["Paris is the capital.", "Paris is the capital."],
                                                      ["Lyon, maybe."]]


def test_a_failing_embeddings_call_is_a_reason_without_the_key():
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "bad key sk-test-secret"}})

    settings = settings_from_env(ENV, max_attempts=1)

    async def main():
        async with Router(settings, transport=httpx.MockTransport(answer)) as router:
            return await router.embed("openai:text-embedding-3-small", ["x"])

    reason = run(main())
    assert isinstance(reason, str) and "401" in reason and "sk-test-secret" not in reason
