"""The retrieve stage: vector, keyword or hybrid candidates for each probe.

The vector leg casts and filters exactly like the collection's partial HNSW
index (``embedding::vector(d)`` ... ``WHERE collection_id = <id>``, see
``collections_app.vector_index``), so Postgres answers from that index instead
of scanning. Hybrid retrieval fuses both legs by Reciprocal Rank Fusion,
``Σ 1/(k + rank)``; every candidate keeps its rank and score in each leg.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models.expressions import RawSQL

from collections_app.embedding import Embedder, get_embedder
from collections_app.models import Chunk, Collection
from collections_app.vector_index import vector_index_predicate
from query_app.exceptions import EmbeddingProfileMismatch
from query_app.pipeline.keyword import KeywordResult, keyword_search
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.types import Candidate, LegHit

# Mode name → the legs it runs.
RETRIEVAL_MODES: dict[str, tuple[str, ...]] = {
    "vector": ("vector",),
    "keyword": ("keyword",),
    "hybrid": ("vector", "keyword"),
}


def collection_embedder(collection: Collection) -> Embedder:
    """The embedder for ``collection``, checked against the profile it was indexed with.

    Vectors of another model live in another space: comparing them would
    return confident nonsense, so a mismatch is an error telling what to do.
    """
    embedder = get_embedder(collection.embedding_config or None)
    recorded = collection.embedding_profile
    if recorded is None:
        return embedder
    active = embedder.profile
    if (recorded["provider"], recorded["model"], recorded["dimensions"]) != (
        active.provider,
        active.model,
        active.dimensions,
    ):
        raise EmbeddingProfileMismatch(
            f"collection {collection.slug!r} was indexed with {recorded['provider']} "
            f"{recorded['model']} ({recorded['dimensions']} dimensions) but the active "
            f"embedding model is {active.provider} {active.model} ({active.dimensions} "
            f"dimensions); reindex the collection to query it with this model"
        )
    return embedder


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def vector_search(
    *, collection: Collection, vector: np.ndarray, k: int, ef_search: int
) -> list[tuple[str, float]]:
    """(chunk id, cosine similarity) of the ``k`` nearest chunks, via the HNSW index."""
    dims = int(collection.embedding_dimensions or len(vector))
    if len(vector) != dims:
        raise EmbeddingProfileMismatch(
            f"the probe has {len(vector)} dimensions but collection {collection.slug!r} "
            f"stores {dims}; reindex the collection"
        )
    literal = vector_literal(vector)
    # Same expression and predicate as the partial index; the id is an int.
    sql = (
        f"SELECT id, 1 - ((embedding::vector({dims})) <=> %s::vector({dims})) AS similarity "
        f"FROM collections_app_chunk WHERE "
        f"{vector_index_predicate(collection_id=collection.pk, dimensions=dims)} "
        f"ORDER BY (embedding::vector({dims})) <=> %s::vector({dims}) LIMIT %s"
    )
    with transaction.atomic(), connection.cursor() as cur:
        # ef_search bounds the HNSW candidate list: it must be ≥ k or the
        # index returns fewer rows than asked for. Local to this transaction.
        cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
        cur.execute(sql, [literal, literal, k])
        return [(row[0], float(row[1])) for row in cur.fetchall()]


def rrf_scores(rankings: Sequence[Sequence[str]], *, k: int) -> dict[str, float]:
    """Reciprocal Rank Fusion: each list adds 1/(k + rank) to the items it ranks."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


@dataclass
class ProbeResult:
    """One probe's ranked candidates and what the legs reported."""

    candidates: list[Candidate]
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def retrieve_probe(
    *,
    collection: Collection,
    probe: str,
    probe_index: int,
    vector: np.ndarray | None,
    options: QueryOptions,
    keyword: KeywordResult | None = None,
    with_embeddings: bool = False,
) -> ProbeResult:
    """Run the configured legs for one probe; fuse them when there are two.

    ``keyword`` is the keyword leg's result when the caller already ran it
    (hybrid retrieval runs it while the probes are being embedded).
    """
    legs = RETRIEVAL_MODES[options.retrieval.mode]
    k = options.candidate_k
    leg_hits: dict[str, list[tuple[str, float]]] = {}
    coverage: dict[str, float] = {}
    exact = False
    details: dict[str, Any] = {}
    warnings: list[str] = []
    if "vector" in legs and vector is not None:
        leg_hits["vector"] = vector_search(
            collection=collection, vector=vector, k=k, ef_search=options.ef_search
        )
        details["vector"] = {"hits": len(leg_hits["vector"]), "ef_search": options.ef_search}
    if "keyword" in legs:
        result = keyword or keyword_search(
            collection=collection, text=probe, k=k, options=options.retrieval
        )
        leg_hits["keyword"] = [(hit.chunk_id, hit.score) for hit in result.hits]
        coverage = {hit.chunk_id: hit.coverage for hit in result.hits}
        # Every keyword hit contains the codes / quoted phrases the question required.
        exact = bool(result.details.get("codes") or result.details.get("phrases"))
        details["keyword"] = {"hits": len(result.hits), **result.details}
        warnings += result.warnings

    leg_ranks = {
        name: {cid: LegHit(rank=i, score=score) for i, (cid, score) in enumerate(hits, start=1)}
        for name, hits in leg_hits.items()
    }
    if len(leg_hits) > 1:
        fused = rrf_scores(
            [[cid for cid, _ in hits] for hits in leg_hits.values()], k=options.retrieval.rrf_k
        )
        # Ties (same RRF sum) keep the vector leg's order.
        order = sorted(
            fused,
            key=lambda cid: (
                -fused[cid],
                leg_ranks.get("vector", {}).get(cid, LegHit(10**9, 0)).rank,
                cid,
            ),
        )[:k]
        scores = {cid: fused[cid] for cid in order}
        details["fusion"] = {"method": "rrf", "k": options.retrieval.rrf_k, "fused": len(fused)}
    else:
        only = next(iter(leg_hits.values()), [])
        order = [cid for cid, _ in only]
        scores = dict(only)

    rows = _hydrate(
        collection=collection,
        ids=order,
        vector=vector if "vector" in legs else None,
        with_embeddings=with_embeddings,
    )
    candidates: list[Candidate] = []
    for rank, cid in enumerate(order, start=1):
        row = rows.get(cid)
        if row is None:  # removed by a concurrent re-ingestion
            continue
        similarity = getattr(row, "similarity", None)
        candidates.append(
            Candidate(
                chunk_id=cid,
                source_id=row.source_id,
                source_location=row.source.location,
                source_title=row.source.title,
                text=row.text,
                char_start=row.char_start,
                char_end=row.char_end,
                page=row.page,
                section_path=list(row.section_path or []),
                ordinal=row.ordinal,
                legs={name: ranks[cid] for name, ranks in leg_ranks.items() if cid in ranks},
                retrieval_score=scores[cid],
                vector_similarity=float(similarity) if similarity is not None else None,
                keyword_coverage=coverage.get(cid),
                exact_match=exact and cid in coverage,
                probe_ranks={probe_index: rank},
                embedding=_embedding(row) if with_embeddings else None,
            )
        )
    return ProbeResult(candidates=candidates, details=details, warnings=warnings)


def _hydrate(
    *, collection: Collection, ids: list[str], vector: np.ndarray | None, with_embeddings: bool
) -> dict[str, Chunk]:
    if not ids:
        return {}
    fields = [
        "id",
        "text",
        "char_start",
        "char_end",
        "page",
        "section_path",
        "ordinal",
        "source_id",
        "source__location",
        "source__title",
    ]
    if with_embeddings:
        fields.append("embedding")
    # By primary key alone, without the model's ordering: Postgres then always
    # reads the few rows through the key. With ``collection_id`` in the WHERE, a
    # collection created since the table was last analysed looked empty to the
    # planner, which then walked that whole collection (0.3 s at 100k chunks).
    qs = Chunk.objects.filter(pk__in=ids).select_related("source").order_by()
    qs = qs.only(*fields, "collection_id")
    if vector is not None:
        dims = len(vector)
        # Similarity to the probe for every candidate, keyword-only hits included,
        # so the relevance floor can judge them all on one scale.
        qs = qs.annotate(
            # A chunk embedded at another size (mid-reindex) has no comparable cosine.
            similarity=RawSQL(
                "CASE WHEN vector_dims(collections_app_chunk.embedding) = %s THEN "
                f"1 - ((collections_app_chunk.embedding::vector({dims})) <=> %s::vector({dims})) "
                "END",
                [dims, vector_literal(vector)],
            )
        )
    # The ids came from this collection's own search; the check keeps it so.
    return {row.pk: row for row in qs if row.collection_id == collection.pk}


def _embedding(row: Chunk) -> np.ndarray | None:
    value = row.embedding
    if value is None:
        return None
    return np.asarray(value, dtype=np.float32)
