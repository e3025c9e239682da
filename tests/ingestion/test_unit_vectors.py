"""Ingestion stores, with each chunk, the vectors of the units an extractive answer reads.

Real PostgreSQL, the real ingestion pipeline and the real embedder
(all-MiniLM-L6-v2); the other model is a tiny one built by the test.
"""

from __future__ import annotations

import unittest.mock

import numpy as np
import pytest

from collections_app.embedding import get_embedder
from collections_app.embedding.unit_vectors import unit_key, unit_vectors_unpack
from collections_app.models import Chunk
from collections_app.services import collection_ingest
from query_app.pipeline.quotable import read_as_texts
from tests.support.documents import INSTALL, REFUNDS

pytestmark = pytest.mark.django_db

BACKUPS = """# Backup handbook

## Schedule

Backups run every night at 02:00 UTC. Each backup is kept for 30 days.

## Restoring

- Open the admin console and choose Restore.
- Pick the backup by its date; the newest is listed first.

| Tier | Copies |
| --- | --- |
| Basic | 2 |
| Pro | 5 |
"""


@pytest.fixture(autouse=True)
def units_at_ingestion(settings):
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "unit_vectors": "ingestion"},
    }


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "install.md").write_text(INSTALL)
    (root / "refunds.md").write_text(REFUNDS)
    (root / "backups.md").write_text(BACKUPS)
    return root


def _units(chunk: Chunk) -> list[str]:
    return read_as_texts(chunk.text, title=chunk.source.title, location=chunk.source.location)


def test_every_unit_an_answer_embeds_has_its_vector_stored_with_the_chunk(collection, corpus):
    collection_ingest(collection=collection, locations=[str(corpus)])
    embedder = get_embedder()

    chunks = list(Chunk.objects.filter(collection=collection).select_related("source"))
    assert chunks
    stored = 0
    for chunk in chunks:
        texts = _units(chunk)
        keys, vectors = unit_vectors_unpack(chunk.unit_vectors)
        assert keys == [unit_key(embedder.profile, t) for t in texts], chunk.text
        # The model's own vectors (batched otherwise: equal up to rounding).
        np.testing.assert_allclose(vectors, embedder.encode(texts), atol=1e-4)
        stored += len(texts)
    assert stored >= 8  # sentences, list items and table rows of the three documents
    by_title = {c.source.title for c in chunks}
    assert {"Backup handbook", "Refund policy", "Install guide"} <= by_title


def test_a_reindex_with_another_model_stores_that_models_unit_vectors(
    collection, corpus, settings, tmp_path
):
    from tests.support.tiny_models import build_tiny_sentence_transformer

    collection_ingest(collection=collection, locations=[str(corpus)])
    before = {
        key
        for blob in Chunk.objects.filter(collection=collection).values_list(
            "unit_vectors", flat=True
        )
        for key in unit_vectors_unpack(blob)[0]
    }
    tiny = build_tiny_sentence_transformer(tmp_path / "tiny", dimensions=48)
    settings.RAG = {
        **settings.RAG,
        "embedding": {**settings.RAG["embedding"], "model": str(tiny), "model_name": "tiny-48"},
    }

    report = collection_ingest(collection=collection, locations=[str(corpus)], reindex=True)

    assert report.as_dict()["sources_failed"] == 0
    embedder = get_embedder()
    assert embedder.profile.model == "tiny-48"
    after: set[bytes] = set()
    for chunk in Chunk.objects.filter(collection=collection).select_related("source"):
        texts = _units(chunk)
        keys, vectors = unit_vectors_unpack(chunk.unit_vectors)
        assert keys == [unit_key(embedder.profile, t) for t in texts]
        assert vectors.shape == (len(texts), 48)
        np.testing.assert_allclose(vectors, embedder.encode(texts), atol=1e-4)
        after.update(keys)
    assert before and after
    assert not before & after  # no vector of the old model is found for any text


def _when(settings, when: str) -> None:  # type: ignore[no-untyped-def]
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "unit_vectors": when},
    }


def test_by_default_the_run_embeds_the_units_once_its_passages_are_stored(
    collection, corpus, settings
):
    from django.conf import settings as live

    _when(settings, "after")
    embedder = get_embedder()
    calls: list[tuple[list[str], int]] = []  # texts embedded, chunks stored at the time
    real = embedder.encode

    def encode(texts):  # type: ignore[no-untyped-def]
        calls.append((list(texts), Chunk.objects.filter(collection=collection).count()))
        return real(texts)

    messages: list[str] = []
    with unittest.mock.patch.object(embedder, "encode", encode):
        report = collection_ingest(
            collection=collection,
            locations=[str(corpus)],
            run_options={"progress": lambda run, message: messages.append(message)},
        )

    chunks = list(Chunk.objects.filter(collection=collection).select_related("source"))
    passages = {c.text for c in chunks}
    units = {t for c in chunks for t in _units(c)}
    # The passages first, then the units, once every passage was stored.
    first_unit_call = next(i for i, (texts, _) in enumerate(calls) if set(texts) & units)
    assert all(set(texts) <= passages for texts, _ in calls[:first_unit_call])
    assert all(stored == len(chunks) for _, stored in calls[first_unit_call:])
    for chunk in chunks:
        keys, vectors = unit_vectors_unpack(chunk.unit_vectors)
        assert keys == [unit_key(embedder.profile, t) for t in _units(chunk)]
        np.testing.assert_allclose(vectors, real(_units(chunk)), atol=1e-4)
    assert report.stage_seconds["units"] > 0
    assert any(m.startswith("preparing extractive answers: ") for m in messages), messages
    assert live.RAG["ingestion"]["unit_vectors"] == "after"


def test_a_failure_embedding_the_units_is_a_warning_of_a_run_whose_sources_are_ingested(
    collection, corpus, settings
):
    _when(settings, "after")
    embedder = get_embedder()
    real = embedder.encode
    passages = 0

    def encode(texts):  # type: ignore[no-untyped-def]
        nonlocal passages
        if Chunk.objects.filter(collection=collection).exists():
            raise RuntimeError("the model ran out of memory")
        passages += len(texts)
        return real(texts)

    with unittest.mock.patch.object(embedder, "encode", encode):
        report = collection_ingest(collection=collection, locations=[str(corpus)])

    data = report.as_dict()
    assert data["sources_ingested"] == 3 and data["sources_failed"] == 0
    chunks = Chunk.objects.filter(collection=collection)
    assert passages == chunks.count()
    assert not chunks.filter(unit_vectors__isnull=False).exists()
    assert any("the model ran out of memory" in w for w in report.warnings), report.warnings


def test_with_first_use_ingestion_embeds_the_passages_alone(collection, corpus, settings):
    _when(settings, "first-use")
    embedder = get_embedder()
    embedded: list[str] = []
    real = embedder.encode

    def encode(texts):  # type: ignore[no-untyped-def]
        embedded.extend(texts)
        return real(texts)

    with unittest.mock.patch.object(embedder, "encode", encode):
        collection_ingest(collection=collection, locations=[str(corpus)])

    chunks = Chunk.objects.filter(collection=collection)
    assert chunks.exists()
    assert len(embedded) == chunks.count()  # one text per passage, no unit
    assert not chunks.filter(unit_vectors__isnull=False).exists()


def test_an_unknown_setting_is_a_clear_error(collection, corpus, settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "unit_vectors": "sometimes"},
    }
    with pytest.raises(ImproperlyConfigured, match="RAG_UNIT_VECTORS is 'sometimes'; it must be"):
        collection_ingest(collection=collection, locations=[str(corpus)])
    assert not Chunk.objects.filter(collection=collection).exists()


def test_a_reindex_stores_unit_vectors_for_chunks_indexed_without_them(collection, corpus):
    """Chunks indexed before unit vectors were stored get them from a reindex."""
    collection_ingest(collection=collection, locations=[str(corpus)])
    Chunk.objects.filter(collection=collection).update(unit_vectors=None)

    collection_ingest(collection=collection, reindex=True)

    chunks = Chunk.objects.filter(collection=collection).select_related("source")
    assert chunks.exists()
    for chunk in chunks:
        keys, _ = unit_vectors_unpack(chunk.unit_vectors)
        assert keys == [unit_key(get_embedder().profile, t) for t in _units(chunk)]


def test_a_stop_while_the_units_are_embedded_keeps_every_source_ingested(
    collection, corpus, settings
):
    from collections_app.ingestion.pipeline import RunInterrupted
    from collections_app.models import Source

    _when(settings, "after")

    def should_stop() -> bool:  # once the passages are stored: in the units step
        return Chunk.objects.filter(collection=collection).count() >= 3

    with pytest.raises(RunInterrupted):
        collection_ingest(
            collection=collection,
            locations=[str(corpus)],
            run_options={"should_stop": should_stop},
        )

    sources = Source.objects.filter(collection=collection)
    assert sources.count() == 3
    assert set(sources.values_list("status", flat=True)) == {Source.Status.READY}
    chunks = Chunk.objects.filter(collection=collection)
    assert chunks.filter(embedding__isnull=False).count() == chunks.count() > 0
    assert not chunks.filter(unit_vectors__isnull=False).exists()  # left to first use
