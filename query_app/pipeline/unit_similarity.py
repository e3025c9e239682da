"""``retrieval.unit_similarity``: the vector leg's hits reordered by their nearest unit.

A claim or a short question often matches one sentence of a passage far better
than the passage as a whole. Each hit's score becomes ``(1 - weight) x`` its own
similarity ``+ weight x`` that of its nearest unit (sentence, list item, row). The
units' vectors are those stored at ingestion for extractive answers (embedded
now, and stored, where missing); a hit without units (a summary node) keeps its
own similarity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from collections_app.embedding import Embedder
from collections_app.embedding.unit_vectors import unit_vectors_by_chunk


def nearest_unit_reorder(
    hits: list[tuple[str, float]], *, vector: np.ndarray, weight: float, fill: Embedder
) -> list[tuple[str, float]]:
    """``hits`` (chunk id, similarity) with the mixed score, best first; ties keep their order."""
    units = unit_vectors_by_chunk(chunk_ids=[cid for cid, _ in hits], fill=fill)
    # The embedders' vectors are unit length: a dot product is the cosine.
    best = {cid: float(np.max(vectors @ vector)) for cid, (_, vectors) in units.items()}
    return similarity_mix(hits, best, weight=weight)


def similarity_mix(
    hits: Sequence[tuple[str, float]], other: Mapping[str, float], *, weight: float
) -> list[tuple[str, float]]:
    """``hits`` scored ``(1 - weight) x`` their own ``+ weight x`` their ``other`` similarity
    (a hit without one keeps its own), best first; ties keep their order."""
    mixed = [
        (cid, (1.0 - weight) * score + weight * other[cid] if cid in other else score)
        for cid, score in hits
    ]
    return sorted(mixed, key=lambda hit: -hit[1])
