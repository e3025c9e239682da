"""retrieval.document_prior: a long document's many passages weighed against a short answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from collections_app.models import Collection, Source
from query_app.exceptions import InvalidOption
from query_app.pipeline.document_prior import document_sizes, keyword_prior, vector_prior
from query_app.pipeline.profiles import options_resolve
from query_app.pipeline.retrieval import collection_embedder, retrieve_probe
from tests.support.factories import Doc, indexed_collection

SHORT = "Descale the kettle once a month, or every two weeks where the water is hard."
PAGE = [
    "Kettle care. Use citric acid or vinegar to descale; rinse the kettle twice afterwards.",
    "Kettle care. Wipe the kettle's outside with a damp cloth; never put the kettle in water.",
    "Kettle care. The kettle's filter lifts out for rinsing under the tap.",
    "Kettle care. Empty the kettle after use so that water does not stand in it.",
    "Kettle care. A kettle that boils slowly may need its element checked by a technician.",
    "Kettle care. Store the kettle with its lid open so that it dries.",
    "Kettle care. The cable can be wound under the base when the kettle is put away.",
    "Kettle care. Limescale builds up in every kettle; descaling keeps it quick to boil.",
]


def test_a_passage_loses_ln_of_its_documents_size_and_a_one_passage_document_nothing():
    sizes = {"page-1": 20, "answer": 1}
    hits = [("page-1", 0.70), ("answer", 0.66)]
    assert vector_prior(hits, sizes=sizes, weight=0.02) == [
        ("answer", pytest.approx(0.66)),
        ("page-1", pytest.approx(0.70 - 0.02 * math.log(20))),
    ]
    # 9 / (1 + 0.2 x ln 20) = 5.6: the page's passage falls behind the answer's 6.
    assert keyword_prior([("page-1", 9.0), ("answer", 6.0)], sizes=sizes, weight=0.2) == [
        ("answer", pytest.approx(6.0)),
        ("page-1", pytest.approx(9.0 / (1 + 0.2 * math.log(20)))),
    ]


def _probe_between(collection, *, near: str, far: str) -> np.ndarray:
    """A probe a little nearer ``near`` than ``far`` (the two chunks' own vectors mixed)."""
    a, b = collection_embedder(collection).encode([near, far])
    probe = 0.53 * a + 0.47 * b
    return probe / np.linalg.norm(probe)


def test_a_short_answer_a_hair_behind_a_long_pages_passage_comes_first(db):
    collection = indexed_collection(
        [
            Doc(location="/manual/kettle.md", chunks=PAGE),
            Doc(location="/faq/descale.md", chunks=[SHORT]),
        ]
    )
    vector = _probe_between(collection, near=PAGE[0], far=SHORT)

    def ranked(prior: float) -> tuple[list[str], dict]:
        _, options = options_resolve(
            overrides={
                "retrieval": {"mode": "vector", "document_prior": prior, "document_similarity": 0}
            },
            top_n=3,
        )
        result = retrieve_probe(
            collection=collection, probe="", probe_index=0, vector=vector, options=options
        )
        return [c.source_location for c in result.candidates], result.details

    without, details = ranked(0.0)
    assert without[0] == "/manual/kettle.md"
    assert "document_prior" not in details["vector"]
    with_prior, details = ranked(0.02)
    assert with_prior[0] == "/faq/descale.md"
    assert details["vector"]["document_prior"] == 0.02


def test_a_document_prior_out_of_range_is_refused():
    with pytest.raises(InvalidOption, match=r"retrieval\.document_prior"):
        options_resolve(overrides={"retrieval": {"document_prior": -0.1}})


def test_document_sizes_are_kept_until_the_collections_index_changes(db):
    collection = indexed_collection(
        [
            Doc(location="/manual/kettle.md", chunks=PAGE),
            Doc(location="/faq/descale.md", chunks=[SHORT]),
        ]
    )
    ids = list(collection.chunks.order_by("ordinal").values_list("id", flat=True))
    page_chunk = collection.chunks.get(source__location="/manual/kettle.md", ordinal=0).pk
    with CaptureQueriesContext(connection) as first:
        assert document_sizes(collection=collection, chunk_ids=ids)[page_chunk] == len(PAGE)
    with CaptureQueriesContext(connection) as again:
        assert document_sizes(collection=collection, chunk_ids=ids)[page_chunk] == len(PAGE)
    assert len(first) == 1
    assert len(again) == 0
    # The page is cut anew into more passages: the index changes, the size is read again.
    Source.objects.filter(location="/manual/kettle.md").update(chunk_count=12)
    Collection.objects.filter(pk=collection.pk).update(index_version=F("index_version") + 1)
    collection.refresh_from_db()
    assert document_sizes(collection=collection, chunk_ids=ids)[page_chunk] == 12
