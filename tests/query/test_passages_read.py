"""search_index.passages_read: the passages a search found, read in one plain statement,
on real PostgreSQL + pgvector with the real embedding model."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collections_app.models import Chunk
from collections_app.search_index import passages_read
from query_app.pipeline.retrieval import collection_embedder
from tests.support.factories import Doc, indexed_collection

GUIDE = [
    "Mooring buoys are inspected every spring before the season opens.",
    "A damaged buoy is replaced within two weeks of the report.",
]


@pytest.fixture
def two_collections(db):
    guide = indexed_collection([Doc(location="/guide.md", title="Harbour guide", chunks=GUIDE)])
    other = indexed_collection(["Tide tables are published every month."])
    return guide, other


def test_each_row_holds_what_the_chunk_and_its_document_store(two_collections):
    guide, _ = two_collections
    stored = {c.pk: c for c in Chunk.objects.filter(collection=guide).select_related("source")}
    with CaptureQueriesContext(connection) as ctx:
        rows = passages_read(collection_id=guide.pk, ids=list(stored))
    assert len(ctx.captured_queries) == 1
    assert set(rows) == set(stored)
    for cid, row in rows.items():
        chunk = stored[cid]
        assert (row.id, row.source_id, row.text) == (cid, chunk.source_id, chunk.text)
        assert (row.char_start, row.char_end, row.ordinal) == (
            chunk.char_start,
            chunk.char_end,
            chunk.ordinal,
        )
        assert row.source_location == chunk.source.location == "/guide.md"
        assert row.source_title == chunk.source.title == "Harbour guide"
        assert (row.kind, row.members, row.section_path) == (
            chunk.kind,
            list(chunk.members),
            list(chunk.section_path),
        )
        assert row.metadata == chunk.metadata
        assert row.similarity is None and row.embedding is None


def test_similarity_is_the_cosine_to_the_probe_and_embeddings_come_when_asked(two_collections):
    guide, _ = two_collections
    probe = collection_embedder(guide).encode(["When are the buoys checked?"])[0]
    rows = passages_read(
        collection_id=guide.pk,
        ids=list(Chunk.objects.filter(collection=guide).values_list("id", flat=True)),
        vector=probe,
        with_embeddings=True,
    )
    stored = dict(Chunk.objects.filter(collection=guide).values_list("id", "embedding"))
    assert len(rows) == len(GUIDE)
    for cid, row in rows.items():
        vector = np.asarray(stored[cid], dtype=np.float64)
        assert row.embedding is not None and row.embedding.dtype == np.float32
        np.testing.assert_allclose(row.embedding, vector, rtol=0, atol=1e-6)
        cosine = float(vector @ probe / (np.linalg.norm(vector) * np.linalg.norm(probe)))
        assert row.similarity == pytest.approx(cosine, abs=1e-5)
    # The inspection passage answers the question better than the replacement one.
    by_text = {row.text: row.similarity for row in rows.values()}
    assert by_text[GUIDE[0]] > by_text[GUIDE[1]]


def test_ids_of_another_collection_or_gone_are_left_out(two_collections):
    guide, other = two_collections
    theirs = list(Chunk.objects.filter(collection=other).values_list("id", flat=True))
    ours = list(Chunk.objects.filter(collection=guide).values_list("id", flat=True))
    rows = passages_read(collection_id=guide.pk, ids=ours + theirs + ["no-such-chunk"])
    assert set(rows) == set(ours)
    assert passages_read(collection_id=guide.pk, ids=[]) == {}
