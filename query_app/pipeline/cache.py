"""Caching of the first three stages (transform → retrieve → fuse) in a bounded cache.

The key covers everything the passages depend on: the collection and its
``index_version`` (bumped by every ingestion that changes chunks; the
collection is read fresh from the database when the query is prepared, with
its permission check, so a re-ingested collection never serves stale passages),
its embedding profile, the options of those stages, the question, and the
caller's permission scope. Access is checked before the cache is consulted; the
scope in the key keeps entries from ever crossing callers who see a collection
differently.

An entry keeps the candidates' ids, scores and positions and the stages' trace
steps, never the passage texts: a hit reads the texts back from the database in
one query by primary key. Entries live in their own cache (``CACHES["retrieval"]``:
at most ``RAG_RETRIEVAL_CACHE_ENTRIES`` per process with the in-memory backend),
and an entry larger than ``RAG["query_limits"]["max_cache_entry_bytes"]`` is not
kept at all, so the cache's memory is bounded whatever the questions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache, caches

from collections_app.models import Chunk
from query_app.pipeline.types import Candidate, RagQuery

logger = logging.getLogger(__name__)

KEY_PREFIX = "rag:retrieval:v2:"
CACHE_ALIAS = "retrieval"
DEFAULT_MAX_ENTRY_BYTES = 128 * 1024


def retrieval_cache() -> BaseCache:
    """The retrieval cache: its own alias when configured, else the default cache."""
    return caches[CACHE_ALIAS if CACHE_ALIAS in settings.CACHES else "default"]


def retrieval_cache_max_entry_bytes() -> int:
    limits = settings.RAG.get("query_limits", {})
    return int(limits.get("max_cache_entry_bytes", DEFAULT_MAX_ENTRY_BYTES))


def retrieval_cache_key(query: RagQuery) -> str:
    o = query.options
    payload = {
        "collection": query.collection.pk,
        "index_version": query.collection.index_version,
        "embedding": query.collection.embedding_profile,
        "transform": asdict(o.transform),
        "retrieval": asdict(o.retrieval),
        "fusion": asdict(o.fusion),
        "candidate_k": o.candidate_k,
        "question": query.question,
        "scope": query.scope,
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return KEY_PREFIX + digest


def cached_candidate(candidate: Candidate) -> dict[str, Any]:
    """A candidate as the cache keeps it: everything but its text."""
    data = candidate.as_dict()
    del data["text"]
    return data


def retrieval_cache_get(key: str) -> dict[str, Any] | None:
    value = retrieval_cache().get(key)
    return value if isinstance(value, dict) else None


def retrieval_cache_set(key: str, value: dict[str, Any], *, ttl_s: int) -> bool:
    """Keep ``value`` for ``ttl_s`` seconds unless it is over the size bound; say whether kept."""
    if ttl_s <= 0:
        return False
    size = len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    bound = retrieval_cache_max_entry_bytes()
    if size > bound:
        logger.info("retrieval cache: an entry of %d bytes is over the %d-byte bound", size, bound)
        return False
    retrieval_cache().set(key, value, timeout=ttl_s)
    return True


def retrieval_cache_candidates(
    collection_id: int, cached: Sequence[dict[str, Any]]
) -> list[Candidate] | None:
    """The cached candidates with their texts read back (one query by primary key).

    None when a chunk is gone (the entry is stale: run the stages again).
    """
    ids = [str(c["chunk_id"]) for c in cached]
    texts = dict(
        Chunk.objects.filter(collection_id=collection_id, pk__in=ids).values_list("pk", "text")
    )
    if any(chunk_id not in texts for chunk_id in ids):
        return None
    return [Candidate.from_dict({**c, "text": texts[str(c["chunk_id"])]}) for c in cached]
