"""Caching of the first three stages (transform → retrieve → fuse) in the Django cache.

The key covers everything the passages depend on: the collection and its
``index_version`` (bumped by every ingestion that changes chunks; the
collection is read fresh from the database when the query is prepared, with
its permission check, so a re-ingested collection never serves stale passages), its embedding profile, the options of those stages,
the question, and the caller's permission scope. Access is checked before the
cache is consulted; the scope in the key keeps entries from ever crossing
callers who see a collection differently.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from django.core.cache import cache

from query_app.pipeline.types import RagQuery

KEY_PREFIX = "rag:retrieval:v1:"


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


def retrieval_cache_get(key: str) -> dict[str, Any] | None:
    value = cache.get(key)
    return value if isinstance(value, dict) else None


def retrieval_cache_set(key: str, value: dict[str, Any], *, ttl_s: int) -> None:
    if ttl_s > 0:
        cache.set(key, value, timeout=ttl_s)
