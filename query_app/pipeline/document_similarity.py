"""``retrieval.document_similarity``: the vector leg's hits weighed with their whole document.

A passage is embedded alone, so what the rest of its document says is lost: an
abstract cut into three passages ranks by whichever third best resembles the
question, though the question may speak of the study as a whole. Each hit's
score becomes ``(1 - weight) x`` its own similarity ``+ weight x`` that of its
document, whose vector is the mean of its passages' vectors (computed by
PostgreSQL for the hits' documents only, one statement a probe). A hit whose
document has no passage vector (a summary node's document has its passages)
keeps its own score.

Measured with the retrieval lab (docs/answering.md): on full SciFact, documents
of 1-4 passages, the best option set gains; it is off by default, being
unmeasured where one document holds many subjects (a manual page).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from collections_app import search_index
from collections_app.models import Collection


def document_similarity_mix(
    hits: Sequence[tuple[str, float]],
    *,
    collection: Collection,
    vector: np.ndarray,
    weight: float,
) -> list[tuple[str, float]]:
    """``hits`` (chunk id, similarity) with the mixed score, best first; ties keep their order."""
    documents = search_index.document_similarities(
        collection_id=int(collection.pk),
        dimensions=int(collection.embedding_dimensions or len(vector)),
        vector=vector,
        chunk_ids=[cid for cid, _ in hits],
    )
    mixed = [
        (cid, (1.0 - weight) * score + weight * documents[cid] if cid in documents else score)
        for cid, score in hits
    ]
    return sorted(mixed, key=lambda hit: -hit[1])
