"""``retrieval.document_prior``: a long document's passages weighed against their number.

A document ranks by its best passage, and the best of many passages is higher by
chance alone: a manual page of twenty passages has twenty tries at resembling a
question, a two-line answer one. Short answers among long pages then lose to
passages that merely share the question's subject. Each leg's score of a passage
is corrected by ``ln n``, ``n`` the passages of its document (1 for a one-passage
document, which keeps its score):

- vector: ``similarity - vector_weight x ln n`` (the best of ``n`` draws grows
  with ``ln n``; 0.02 is a small fraction of the spread of a question's similarities);
- keyword: ``BM25 / (1 + keyword_weight x ln n)`` (BM25 is a ratio scale).

Measured with the retrieval lab (docs/answering.md): the manual-shaped set gains
where short answers compete with pages of 15-20 passages; SciFact and PubMedQA,
whose documents are 1-4 passages, barely move.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from collections_app.models import Collection
from collections_app.selectors import chunk_document_sizes
from query_app.pipeline.index_memo import IndexMemo, index_key

# A chunk's document size changes only with the collection's index: the sizes are
# kept per process (index_memo.py), so most questions read none.
SIZES_KEPT_PER_COLLECTION = 50_000
_sizes_held: IndexMemo[int] = IndexMemo(limit=SIZES_KEPT_PER_COLLECTION)


def document_sizes(*, collection: Collection, chunk_ids: Sequence[str]) -> dict[str, int]:
    """How many passages the document of each chunk has (at least 1), by chunk id."""
    return _sizes_held.read_through(
        collection_id=int(collection.pk),
        index=index_key(collection),
        keys=chunk_ids,
        read=lambda missing: chunk_document_sizes(chunk_ids=missing),
    )


def vector_prior(
    hits: Sequence[tuple[str, float]], *, sizes: Mapping[str, int], weight: float
) -> list[tuple[str, float]]:
    """``hits`` (chunk id, similarity) with the corrected score, best first (stable)."""
    scored = [(cid, score - weight * math.log(sizes.get(cid, 1))) for cid, score in hits]
    return sorted(scored, key=lambda hit: -hit[1])


def keyword_prior(
    hits: Sequence[tuple[str, float]], *, sizes: Mapping[str, int], weight: float
) -> list[tuple[str, float]]:
    """``hits`` (chunk id, BM25 score) with the corrected score, best first (stable)."""
    scored = [(cid, score / (1.0 + weight * math.log(sizes.get(cid, 1)))) for cid, score in hits]
    return sorted(scored, key=lambda hit: -hit[1])
