"""The stages end to end, offline (no chat model): the retrieval cache.

Entries are keyed by the index version, the options and the caller's scope, keep
ids and scores (the texts are read back from the database), can be disabled per
request, and are bounded in number and size.
"""

from __future__ import annotations

import pickle

from django.core.cache import caches

from collections_app.models import Chunk
from query_app.services import QueryRequest, query_retrieve
from tests.support.factories import Doc, chunks_replace
from tests.support.knowledge_base import REFUND_QUESTION, step


def test_retrieval_results_are_cached_per_index_version(kb, reader):
    first = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    second = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert step(first, "retrieve")["details"]["cache"] == "miss"
    assert step(second, "retrieve")["details"]["cache"] == "hit"
    assert second.citations == first.citations

    # A re-ingestion bumps index_version: the old passages are never served again.
    chunks_replace(
        kb,
        [
            Doc(
                location="/kb/refunds.md",
                chunks=["Customers can request a refund within 60 days of purchase."],
            )
        ],
    )
    third = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert step(third, "retrieve")["details"]["cache"] == "miss"
    assert third.citations[0]["snippet"] == (
        "Customers can request a refund within 60 days of purchase."
    )
    assert third.index_version == first.index_version + 1


def test_the_cache_key_includes_the_options_and_the_callers_scope(kb, reader, django_user_model):
    from collections_app.models import CollectionMembership

    query_retrieve(user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION))
    other_k = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION, top_n=2)
    )
    assert step(other_k, "retrieve")["details"]["cache"] == "miss"
    admin = django_user_model.objects.create_user(username="kb-admin", password="pw")
    CollectionMembership.objects.create(collection=kb, user=admin, role="admin")
    as_admin = query_retrieve(
        user=admin, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert step(as_admin, "retrieve")["details"]["cache"] == "miss"


def test_cache_can_be_disabled_per_request(kb, reader):
    overrides = {"cache": {"enabled": False}}
    query_retrieve(
        user=reader,
        request=QueryRequest(collection="kb", question=REFUND_QUESTION, overrides=overrides),
    )
    again = query_retrieve(
        user=reader,
        request=QueryRequest(collection="kb", question=REFUND_QUESTION, overrides=overrides),
    )
    assert "cache" not in step(again, "retrieve")["details"]


def _cache_entries() -> dict[str, object]:
    backend = caches["retrieval"]
    return {
        key: backend.get(key.split(":", 2)[-1])
        for key in list(backend._cache)  # type: ignore[attr-defined]
    }


def test_the_retrieval_cache_keeps_ids_and_scores_and_reads_texts_back(kb, reader):
    first = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    (entry,) = [e for e in _cache_entries().values() if isinstance(e, dict)]
    kept = pickle.dumps(entry)
    assert entry["candidates"] and all("text" not in c for c in entry["candidates"])
    assert b"refund within 30 days" not in kept
    assert {c["chunk_id"] for c in entry["candidates"]} >= {c["chunk_id"] for c in first.citations}

    # The text a hit serves is the one in the database now, read by primary key.
    cited = first.citations[0]["chunk_id"]
    Chunk.objects.filter(pk=cited).update(text="Refunds are paid within 30 days, by transfer.")
    second = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert step(second, "retrieve")["details"]["cache"] == "hit"
    assert second.citations[0]["chunk_id"] == cited
    assert second.citations[0]["snippet"] == "Refunds are paid within 30 days, by transfer."

    # A chunk gone behind the cache's back makes the entry stale: the stages run again.
    Chunk.objects.filter(pk=cited).delete()
    third = query_retrieve(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
    )
    assert step(third, "retrieve")["details"]["cache"] == "miss"
    assert cited not in {c["chunk_id"] for c in third.citations}


def test_the_retrieval_cache_is_bounded_in_entries_and_entry_size(kb, reader, settings, rag_set):
    settings.CACHES = {
        **settings.CACHES,
        "retrieval": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "retrieval-bounded",
            "OPTIONS": {"MAX_ENTRIES": 3, "CULL_FREQUENCY": 3},
        },
    }
    for number in range(8):
        query_retrieve(
            user=reader,
            request=QueryRequest(collection="kb", question=f"{REFUND_QUESTION} ({number})"),
        )
        assert len(_cache_entries()) <= 3

    caches["retrieval"].clear()
    rag_set("query_limits.max_cache_entry_bytes", 200)
    for _ in range(2):
        run = query_retrieve(
            user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION)
        )
        assert step(run, "retrieve")["details"]["cache"] == "miss"
    assert _cache_entries() == {}
