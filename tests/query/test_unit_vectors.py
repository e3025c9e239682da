"""An extractive answer reads its sentences' vectors from the chunks, stored at ingestion.

Real PostgreSQL, the real ingestion pipeline and the real embedder
(all-MiniLM-L6-v2). What reaches the model is recorded by wrapping the real
embedder's ``encode``: every call still runs the model.
"""

from __future__ import annotations

import numpy as np
import pytest

from collections_app.embedding import get_embedder
from collections_app.embedding.unit_vectors import unit_key, unit_vectors_pack, unit_vectors_unpack
from collections_app.ingestion.types import EmbeddingProfile
from collections_app.models import Chunk
from collections_app.services import collection_ingest
from query_app.pipeline import extractive, quotable
from query_app.pipeline.embed_cache import question_cache_clear
from query_app.services import QueryRequest, query_answer
from tests.support.documents import INSTALL, REFUNDS

pytestmark = pytest.mark.django_db

BACKUPS = """# Backup handbook

## Schedule

Backups run every night at 02:00 UTC. Each backup is kept for 30 days and then deleted.

## Restoring

- Open the admin console and choose Restore.
- Pick the backup by its date; the newest is listed first.
"""

QUESTION = "How long is each backup kept?"
ANSWER = "Each backup is kept for 30 days and then deleted."


def _ingest(collection, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "install.md").write_text(INSTALL)
    (root / "refunds.md").write_text(REFUNDS)
    (root / "backups.md").write_text(BACKUPS)
    collection_ingest(collection=collection, locations=[str(root)])
    return collection


def _when(settings, when: str) -> None:  # type: ignore[no-untyped-def]
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "unit_vectors": when},
    }


@pytest.fixture
def docs(collection, tmp_path, settings):
    """Ingested with RAG_UNIT_VECTORS=first-use: no unit stored until an answer reads its passage."""
    _when(settings, "first-use")
    return _ingest(collection, tmp_path)


@pytest.fixture(params=["after", "ingestion"])
def docs_units_at_ingestion(collection, tmp_path, settings, request):
    """Ingested so that the run embeds the units: after its passages (the default) or with them."""
    _when(settings, request.param)
    return _ingest(collection, tmp_path)


@pytest.fixture
def model_texts(monkeypatch):
    """The texts the model is asked to embed, from a process whose caches are cold."""
    embedder = get_embedder()
    real = embedder.encode
    texts: list[str] = []

    def encode(batch):  # type: ignore[no-untyped-def]
        texts.extend(batch)
        return real(batch)

    monkeypatch.setattr(embedder, "encode", encode)
    _cold(monkeypatch)
    return texts


def _cold(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(extractive, "_vectors", extractive._VectorCache())
    question_cache_clear()


def _ask(user):  # type: ignore[no-untyped-def]
    run = query_answer(user=user, request=QueryRequest(collection="docs", question=QUESTION))
    generate = next(step for step in run.trace if step["stage"] == "generate")
    assert generate["details"]["generator"] == "extractive"
    return run


def _all_units(collection) -> set[str]:  # type: ignore[no-untyped-def]
    return {
        text
        for chunk in Chunk.objects.filter(collection=collection).select_related("source")
        for text in quotable.read_as_texts(
            chunk.text, title=chunk.source.title, location=chunk.source.location
        )
    }


def test_units_embedded_at_ingestion_leave_only_the_question_to_the_model(
    docs_units_at_ingestion, user, model_texts
):
    run = _ask(user)

    assert ANSWER in run.answer
    assert model_texts == [QUESTION]  # retrieval's probe; no sentence of any passage
    assert _all_units(docs_units_at_ingestion)


def test_the_first_answer_stores_the_units_it_reads_and_the_next_embeds_only_its_question(
    docs, user, model_texts, monkeypatch
):
    assert not Chunk.objects.filter(collection=docs, unit_vectors__isnull=False).exists()

    first = _ask(user)

    assert ANSWER in first.answer
    assert set(model_texts) & _all_units(docs)  # the passages' units, embedded once
    cited = {c["chunk_id"] for c in first.citations}
    stored = Chunk.objects.filter(collection=docs, unit_vectors__isnull=False)
    assert cited and cited <= set(stored.values_list("pk", flat=True))
    embedder = get_embedder()
    for chunk in stored.select_related("source"):
        texts = quotable.read_as_texts(
            chunk.text, title=chunk.source.title, location=chunk.source.location
        )
        keys, vectors = unit_vectors_unpack(chunk.unit_vectors)
        assert keys == [unit_key(embedder.profile, t) for t in texts]
        np.testing.assert_allclose(vectors, embedder.encode(texts), atol=1e-4)
    _cold(monkeypatch)
    model_texts.clear()

    again = _ask(user)

    assert model_texts == [QUESTION]
    assert again.answer == first.answer


def test_chunks_indexed_without_unit_vectors_give_the_same_answer(
    docs, user, model_texts, monkeypatch
):
    stored = _ask(user)
    Chunk.objects.filter(collection=docs).update(unit_vectors=None)
    _cold(monkeypatch)
    model_texts.clear()

    embedded = _ask(user)

    assert embedded.answer == stored.answer
    assert ANSWER in embedded.answer
    assert [c["spans"] for c in embedded.citations] == [c["spans"] for c in stored.citations]
    # This time the passages' sentences were embedded while the question waited,
    # and stored again.
    assert set(model_texts) & _all_units(docs)
    assert Chunk.objects.filter(collection=docs, unit_vectors__isnull=False).exists()


def test_vectors_stored_under_another_model_are_never_used(docs, user, model_texts, monkeypatch):
    expected = _ask(user)
    # Each chunk's units stored again with wrong vectors, keyed by another model's profile.
    other = EmbeddingProfile(
        provider="sentence-transformers", model="another-model", dimensions=384
    )
    for chunk in Chunk.objects.filter(collection=docs).select_related("source"):
        texts = quotable.read_as_texts(
            chunk.text, title=chunk.source.title, location=chunk.source.location
        )
        _, vectors = unit_vectors_unpack(chunk.unit_vectors)
        Chunk.objects.filter(pk=chunk.pk).update(
            unit_vectors=unit_vectors_pack(other, texts, -vectors) if texts else None
        )
    _cold(monkeypatch)
    model_texts.clear()

    answered = _ask(user)

    assert answered.answer == expected.answer
    assert set(model_texts) & _all_units(docs)


def test_a_stored_vector_is_what_the_answer_scores(docs, user, model_texts, monkeypatch):
    """Proof that the stored vectors are read: the answer's sentence's vector, turned
    away from every question, and the answer no longer quotes it."""
    assert ANSWER in _ask(user).answer
    for chunk in Chunk.objects.filter(collection=docs, text__contains=ANSWER):
        profile = get_embedder().profile
        texts = quotable.read_as_texts(
            chunk.text, title=chunk.source.title, location=chunk.source.location
        )
        _, vectors = unit_vectors_unpack(chunk.unit_vectors)
        vectors = vectors.copy()
        for row, text in enumerate(texts):
            if text.endswith(ANSWER):
                vectors[row] = -vectors[row]
        Chunk.objects.filter(pk=chunk.pk).update(
            unit_vectors=unit_vectors_pack(profile, texts, vectors)
        )
    _cold(monkeypatch)

    assert ANSWER not in _ask(user).answer
