"""``retrieval.document_similarity``: the vector leg's hits weighed with their whole document.

A passage is embedded alone, so what the rest of its document says is lost: an
abstract cut into three passages ranks by whichever third best resembles the
question, though the question may speak of the study as a whole. Each hit's
score becomes ``(1 - weight) x`` its own similarity ``+ weight x`` that of its
document, whose vector is the mean of its passages' vectors. A long page that
covers many subjects has a mean near none of them, so its passages also lose
against a short document that is about the question, as they should. A hit
whose document has no passage vector keeps its own score.

The documents' vectors change only with the collection's index: PostgreSQL
averages those of the hits' documents once, and they are kept per process
(``index_memo.py``), so most questions read none.

Measured with the retrieval lab (docs/answering.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from collections_app import search_index
from collections_app.models import Collection
from query_app.pipeline.index_memo import IndexMemo, index_key
from query_app.pipeline.unit_similarity import similarity_mix

# Chunk ids per collection whose document vector is kept (the chunks of one
# document share one array of 4 x dimensions bytes).
MEANS_KEPT_PER_COLLECTION = 50_000
_means_held: IndexMemo[np.ndarray] = IndexMemo(limit=MEANS_KEPT_PER_COLLECTION)


def document_vectors(
    *, collection: Collection, chunk_ids: Sequence[str], dimensions: int
) -> dict[str, np.ndarray]:
    """The unit-length mean vector of each chunk's document, by chunk id (those that have one)."""
    return _means_held.read_through(
        collection_id=int(collection.pk),
        index=(index_key(collection), int(dimensions)),
        keys=chunk_ids,
        read=lambda missing: search_index.document_means(
            collection_id=int(collection.pk), dimensions=dimensions, chunk_ids=missing
        ),
    )


def document_similarity_mix(
    hits: Sequence[tuple[str, float]],
    *,
    collection: Collection,
    vector: np.ndarray,
    weight: float,
) -> list[tuple[str, float]]:
    """``hits`` (chunk id, similarity) with the mixed score, best first; ties keep their order."""
    means = document_vectors(
        collection=collection,
        chunk_ids=[cid for cid, _ in hits],
        dimensions=int(collection.embedding_dimensions or len(vector)),
    )
    probe = np.asarray(vector, dtype=np.float32)
    probe = probe / (float(np.linalg.norm(probe)) or 1.0)
    documents = {cid: float(mean @ probe) for cid, mean in means.items()}
    return similarity_mix(hits, documents, weight=weight)
