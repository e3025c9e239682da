"""retrieval.document_similarity: a passage weighed with its whole document, on real
PostgreSQL + pgvector with the real embedding model."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from collections_app.models import Chunk, Collection
from query_app.exceptions import InvalidOption
from query_app.pipeline.document_similarity import document_vectors
from query_app.pipeline.profiles import options_resolve
from query_app.pipeline.retrieval import collection_embedder, retrieve_probe
from tests.support.factories import Doc, indexed_collection

# A study cut into three passages: its methods passage says little of the question
# alone, its results and conclusion say the rest.
STUDY = [
    "Methods. Two hundred adults were randomised to a lactase supplement or a placebo "
    "taken with every dairy meal for eight weeks.",
    "Results. Bloating and cramps after milk fell by half in the lactase group; "
    "the placebo group did not change.",
    "Conclusion. A lactase supplement relieves the symptoms of lactose intolerance.",
]
LONE = "Dairy-free diets are one way to live with lactose intolerance."


@pytest.fixture
def corpus(db):
    return indexed_collection(
        [Doc(location="/study.md", chunks=STUDY), Doc(location="/lone.md", chunks=[LONE])]
    )


def _probe_between(collection, *, near: str, far: str) -> np.ndarray:
    """A probe a little nearer ``near`` than ``far`` (the two chunks' own vectors mixed)."""
    a, b = collection_embedder(collection).encode([near, far])
    probe = 0.55 * a + 0.45 * b
    return probe / np.linalg.norm(probe)


def _ranked(collection, vector, weight: float):
    _, options = options_resolve(
        overrides={
            "retrieval": {
                "mode": "vector",
                "document_similarity": weight,
                "document_prior": 0,
                "per_document": 0,
            }
        },
        top_n=4,
    )
    result = retrieve_probe(
        collection=collection, probe="", probe_index=0, vector=vector, options=options
    )
    return result.candidates, result.details["vector"]


def _vectors(collection) -> dict[str, np.ndarray]:
    return {
        cid: np.asarray(vector, dtype=np.float64)
        for cid, vector in Chunk.objects.filter(collection=collection).values_list(
            "id", "embedding"
        )
    }


def test_each_score_mixes_the_passage_and_the_mean_of_its_documents_passages(corpus):
    vector = _probe_between(corpus, near=LONE, far=STUDY[0])
    plain, details = _ranked(corpus, vector, 0.0)
    assert "document_similarity" not in details
    mixed, details = _ranked(corpus, vector, 0.4)
    assert details["document_similarity"] == 0.4
    vectors = _vectors(corpus)
    own = {c.chunk_id: c.retrieval_score for c in plain}
    for candidate in mixed:
        siblings = [
            vectors[c.chunk_id] for c in plain if c.source_location == candidate.source_location
        ]
        mean = np.mean(siblings, axis=0)
        document = float(mean @ vector / np.linalg.norm(mean))
        assert candidate.retrieval_score == pytest.approx(
            0.6 * own[candidate.chunk_id] + 0.4 * document, abs=1e-5
        )
    # A one-passage document's mean is the passage itself: its score is unchanged.
    lone = next(c for c in mixed if c.source_location == "/lone.md")
    assert lone.retrieval_score == pytest.approx(own[lone.chunk_id], abs=1e-5)


def test_a_passage_whose_document_speaks_of_the_question_passes_a_lone_one(corpus):
    # A question about the study as a whole (its passages' mean) and the lone
    # passage's subject: every passage of the study alone is behind the lone one
    # (0.867 at best against 0.891), the study as a whole ahead (0.928).
    lone, *study = collection_embedder(corpus).encode([LONE, *STUDY])
    whole = np.mean(study, axis=0)
    vector = 0.45 * lone / np.linalg.norm(lone) + 0.55 * whole / np.linalg.norm(whole)
    vector /= np.linalg.norm(vector)
    plain, _ = _ranked(corpus, vector, 0.0)
    assert plain[0].source_location == "/lone.md"
    mixed, _ = _ranked(corpus, vector, 0.5)
    assert mixed[0].source_location == "/study.md"
    assert {c.chunk_id for c in mixed} == {c.chunk_id for c in plain}


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_a_weight_outside_zero_to_one_is_refused(value):
    with pytest.raises(InvalidOption, match=r"retrieval\.document_similarity"):
        options_resolve(overrides={"retrieval": {"document_similarity": value}})


def test_document_vectors_are_kept_until_the_collections_index_changes(corpus):
    ids = list(corpus.chunks.values_list("id", flat=True))
    with CaptureQueriesContext(connection) as first:
        means = document_vectors(collection=corpus, chunk_ids=ids, dimensions=384)
    with CaptureQueriesContext(connection) as again:
        assert document_vectors(collection=corpus, chunk_ids=ids, dimensions=384).keys() == set(ids)
    assert len(first) == 1
    assert len(again) == 0
    study = list(
        corpus.chunks.filter(source__location="/study.md")
        .order_by("ordinal")
        .values_list("id", flat=True)
    )
    # The chunks of one document share its vector, of unit length.
    assert means[study[0]] is means[study[1]]
    assert float(np.linalg.norm(means[study[0]])) == pytest.approx(1.0, abs=1e-6)
    # The study loses its conclusion: the index changes, the mean is read again.
    Chunk.objects.filter(source__location="/study.md", ordinal=2).delete()
    Collection.objects.filter(pk=corpus.pk).update(index_version=F("index_version") + 1)
    corpus.refresh_from_db()
    with CaptureQueriesContext(connection) as fresh:
        changed = document_vectors(collection=corpus, chunk_ids=study[:2], dimensions=384)
    assert len(fresh) == 1
    assert not np.allclose(changed[study[0]], means[study[0]])
