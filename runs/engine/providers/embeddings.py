"""Embeddings for similarity to a prompt's ideal answer (DESIGN deviation 18, reference 4.6).

Two API formats serve embeddings: OpenAI's ``POST .../embeddings`` (OpenAI,
Mistral, Together, and custom endpoints that inherit the OpenAI format, such
as Ollama or vLLM) and Gemini's ``models/<m>:batchEmbedContents``. Anthropic,
xAI and OpenRouter have no embeddings endpoint; asking them is a clear error.
"""

from __future__ import annotations

from typing import Any

from .endpoints import Endpoint

NO_EMBEDDINGS = {"anthropic", "xai", "openrouter"}


def embeddings_request(endpoint: Endpoint, texts: list[str]) -> tuple[str, dict[str, Any]] | str:
    """``(url, body)`` for embedding ``texts`` at ``endpoint``, or why it cannot be done."""
    if endpoint.custom is None and endpoint.provider in NO_EMBEDDINGS:
        return (f"{endpoint.provider} has no embeddings API; choose an embeddings model such as "
                "openai:text-embedding-3-small for EVALSITE_EMBEDDINGS_MODEL or the blueprint's embeddingModel")
    if endpoint.api_format == "gemini":
        url = endpoint.url.rsplit(":", 1)[0] + ":batchEmbedContents"
        name = endpoint.model_name if endpoint.model_name.startswith("models/") else f"models/{endpoint.model_name}"
        return url, {"requests": [{"model": name, "content": {"parts": [{"text": t}]}} for t in texts]}
    if endpoint.api_format.startswith("openai"):
        url = endpoint.url
        for suffix in ("/chat/completions", "/completions"):
            if url.endswith(suffix):
                url = url[: -len(suffix)] + "/embeddings"
                break
        return url, {"model": endpoint.model_name, "input": texts}
    return f"{endpoint.label} speaks the {endpoint.api_format} format, which has no embeddings API"


def read_embeddings(endpoint: Endpoint, data: Any, count: int) -> list[list[float]] | str:
    """The vectors, in the order of the texts, or what was wrong with the answer."""
    try:
        if endpoint.api_format == "gemini":
            vectors = [item["values"] for item in data["embeddings"]]
        else:
            items = sorted(data["data"], key=lambda item: item.get("index", 0))
            vectors = [item["embedding"] for item in items]
    except (KeyError, TypeError):
        return "the embeddings answer did not have the expected shape"
    if len(vectors) != count or not all(isinstance(v, list) and v for v in vectors):
        return f"expected {count} embeddings, got {len(vectors)}"
    try:
        return [[float(x) for x in vector] for vector in vectors]
    except (TypeError, ValueError):
        return "an embedding held something that is not a number"
