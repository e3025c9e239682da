"""The retrieve stage: vector, keyword or hybrid candidates for each probe.

The legs' searches are the search index's own
(:func:`collections_app.search_index.vector_search` over the collection's
partial HNSW index, the keyword leg through :mod:`query_app.pipeline.keyword`).
Each leg's scores are first corrected by the size of their documents
(:mod:`query_app.pipeline.document_prior`), and the vector leg's mixed with
their documents' (:mod:`query_app.pipeline.document_similarity`);
hybrid retrieval then fuses both legs (:mod:`query_app.pipeline.leg_fusion`:
weighted Reciprocal Rank Fusion by default, or relative scores); every
candidate keeps its rank and score in each leg.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collections_app import search_index
from collections_app.embedding import Embedder, get_embedder
from collections_app.models import Collection
from collections_app.search_index.passages import PassageRow
from query_app.exceptions import EmbeddingProfileMismatch, UnknownRetrievalMode
from query_app.pipeline.decisive_keyword import decisive_keyword_promote
from query_app.pipeline.document_prior import document_sizes, keyword_prior, vector_prior
from query_app.pipeline.document_similarity import document_similarity_mix
from query_app.pipeline.keyword import KeywordResult, keyword_search
from query_app.pipeline.leg_fusion import (
    keyword_evidence,
    relative_score_fusion,
    rrf_scores,
    weighted_rrf_scores,
)
from query_app.pipeline.options import MAX_EF_SEARCH, QueryOptions
from query_app.pipeline.summary_nodes import summaries_expand
from query_app.pipeline.types import Candidate, LegHit
from query_app.pipeline.unit_similarity import nearest_unit_reorder
from ragsite.registry import Registry


@dataclass(frozen=True)
class RetrievalMode:
    """A retrieval mode: the legs it runs for each probe (two legs are fused by RRF)."""

    legs: tuple[str, ...]


RETRIEVAL_MODES: Registry[RetrievalMode] = Registry("retrieval mode", unknown=UnknownRetrievalMode)
RETRIEVAL_MODES.add("vector", RetrievalMode(legs=("vector",)))
RETRIEVAL_MODES.add("keyword", RetrievalMode(legs=("keyword",)))
RETRIEVAL_MODES.add("hybrid", RetrievalMode(legs=("vector", "keyword")))


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


def _vector_hits(
    *, collection: Collection, vector: np.ndarray, k: int, ef_search: int
) -> list[tuple[str, float]]:
    """(chunk id, cosine similarity) of the ``k`` nearest chunks, via the HNSW index."""
    dims = int(collection.embedding_dimensions or len(vector))
    if len(vector) != dims:
        raise EmbeddingProfileMismatch(
            f"the probe has {len(vector)} dimensions but collection {collection.slug!r} "
            f"stores {dims}; reindex the collection"
        )
    return search_index.vector_search(
        collection_id=int(collection.pk), dimensions=dims, vector=vector, k=k, ef_search=ef_search
    )


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
    legs = RETRIEVAL_MODES.get(options.retrieval.mode).legs
    found = _legs_run(
        collection=collection,
        probe=probe,
        vector=vector,
        options=options,
        legs=legs,
        keyword=keyword,
    )
    leg_ranks = {
        name: {cid: LegHit(rank=i, score=score) for i, (cid, score) in enumerate(hits, start=1)}
        for name, hits in found.hits.items()
    }
    order, scores = _ranked(found, leg_ranks=leg_ranks, options=options)
    rows = _hydrate(
        collection=collection,
        ids=order,
        vector=vector if "vector" in legs else None,
        with_embeddings=with_embeddings,
    )
    # Summary-tree nodes give way to their member passages (cited as themselves).
    order, scores, summaries = summaries_expand(
        order,
        scores,
        rows,
        hydrate=lambda ids: _hydrate(
            collection=collection,
            ids=ids,
            vector=vector if "vector" in legs else None,
            with_embeddings=with_embeddings,
        ),
        per_summary=options.retrieval.summary_members,
    )
    if summaries is not None:
        found.details["summaries"] = summaries
    if options.retrieval.per_document:
        order = _per_document(order, rows, limit=options.retrieval.per_document)
        found.details["per_document"] = {
            "limit": options.retrieval.per_document,
            "read": len(rows),
            "kept": min(len(order), options.candidate_k),
        }
        order = order[: options.candidate_k]
    candidates = [
        _candidate(
            row,
            chunk_id=cid,
            probe_index=probe_index,
            rank=rank,
            score=scores[cid],
            leg_ranks=leg_ranks,
            found=found,
            with_embeddings=with_embeddings,
        )
        for rank, cid in enumerate(order, start=1)
        # A missing row was removed by a concurrent re-ingestion.
        if (row := rows.get(cid)) is not None
    ]
    return ProbeResult(candidates=candidates, details=found.details, warnings=found.warnings)


def _per_document(order: list[str], rows: Mapping[str, PassageRow], *, limit: int) -> list[str]:
    """``order`` with at most ``limit`` chunks of each source (the best ones) ahead of
    any further chunk of a source, which follow in their order.

    Demoted, not dropped: a question about one long document among few others
    (a handbook of 240 passages beside a dozen short pages) still gets a full
    set of candidates, the handbook's next best after every other document's.
    """
    taken: dict[int, int] = {}
    kept: list[str] = []
    later: list[str] = []
    for cid in order:
        row = rows.get(cid)
        if row is None:
            continue
        count = taken.get(row.source_id, 0)
        taken[row.source_id] = count + 1
        (kept if count < limit else later).append(cid)
    return kept + later


def leg_depth(options: QueryOptions) -> int:
    """How many chunks each leg reads: deeper when chunks are collapsed per document."""
    k = options.candidate_k
    if options.retrieval.per_document:
        k *= options.retrieval.per_document_pool
    return k


@dataclass
class _LegHits:
    """What each leg found for one probe, before fusion."""

    hits: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    coverage: dict[str, float] = field(default_factory=dict)  # keyword hits only
    # Keyword hits holding the question's codes / quoted phrases, when it has any.
    exact: set[str] = field(default_factory=set)
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _legs_run(
    *,
    collection: Collection,
    probe: str,
    vector: np.ndarray | None,
    options: QueryOptions,
    legs: tuple[str, ...],
    keyword: KeywordResult | None,
) -> _LegHits:
    found = _LegHits()
    k = leg_depth(options)
    if "vector" in legs and vector is not None:
        # HNSW returns at most ef_search neighbours: never fewer than the depth read.
        ef_search = min(MAX_EF_SEARCH, max(options.ef_search, k))
        found.hits["vector"] = _vector_hits(
            collection=collection, vector=vector, k=k, ef_search=ef_search
        )
        found.details["vector"] = {"hits": len(found.hits["vector"]), "ef_search": ef_search}
        if options.retrieval.unit_similarity > 0 and found.hits["vector"]:
            found.hits["vector"] = nearest_unit_reorder(
                found.hits["vector"],
                vector=vector,
                weight=options.retrieval.unit_similarity,
                fill=collection_embedder(collection),
            )
            found.details["vector"]["unit_similarity"] = options.retrieval.unit_similarity
        if options.retrieval.document_similarity > 0 and found.hits["vector"]:
            found.hits["vector"] = document_similarity_mix(
                found.hits["vector"],
                collection=collection,
                vector=vector,
                weight=options.retrieval.document_similarity,
            )
            found.details["vector"]["document_similarity"] = options.retrieval.document_similarity
    if "keyword" in legs:
        result = keyword or keyword_search(
            collection=collection, text=probe, k=k, options=options.retrieval
        )
        found.hits["keyword"] = [(hit.chunk_id, hit.score) for hit in result.hits]
        found.coverage = {hit.chunk_id: hit.coverage for hit in result.hits}
        # The hits holding the codes / quoted phrases the question asked for (every
        # hit, unless a hit lacking a code is kept: retrieval.missing_code_weight).
        if result.details.get("codes") or result.details.get("phrases"):
            found.exact = {hit.chunk_id for hit in result.hits if hit.exact}
        found.details["keyword"] = {"hits": len(result.hits), **result.details}
        found.warnings += result.warnings
    _document_prior(found, collection=collection, options=options)
    return found


def _document_prior(found: _LegHits, *, collection: Collection, options: QueryOptions) -> None:
    """Each leg's hits rescored by the size of their documents (retrieval.document_prior)."""
    weights = {
        "vector": options.retrieval.document_prior,
        "keyword": options.retrieval.keyword_document_prior,
    }
    legs = [leg for leg, hits in found.hits.items() if hits and weights[leg] > 0]
    if not legs:
        return
    sizes = document_sizes(
        collection=collection,
        chunk_ids=list(dict.fromkeys(cid for leg in legs for cid, _ in found.hits[leg])),
    )
    for leg in legs:
        prior = vector_prior if leg == "vector" else keyword_prior
        found.hits[leg] = prior(found.hits[leg], sizes=sizes, weight=weights[leg])
        found.details[leg]["document_prior"] = weights[leg]


def _ranked(
    found: _LegHits, *, leg_ranks: dict[str, dict[str, LegHit]], options: QueryOptions
) -> tuple[list[str], dict[str, float]]:
    """The probe's chunk ids in order, and their retrieval scores (RRF when fused)."""
    if len(found.hits) <= 1:
        only = next(iter(found.hits.values()), [])
        return [cid for cid, _ in only], dict(only)
    rrf_k = options.retrieval.rrf_k
    method = options.retrieval.fusion
    weights = {
        "vector": options.retrieval.vector_weight,
        "keyword": options.retrieval.keyword_weight,
    }
    extra: dict[str, Any] = {}
    if method in ("adaptive", "scores"):
        keyword_hits = found.hits.get("keyword", [])
        evidence = keyword_evidence(
            [found.coverage.get(cid, 0.0) for cid, _ in keyword_hits],
            exact=bool(keyword_hits) and keyword_hits[0][0] in found.exact,
        )
    if method == "scores":
        share = options.retrieval.keyword_share * evidence
        weights = {"vector": 1.0 - share, "keyword": share}
        extra["keyword_evidence"] = round(evidence, 4)
        fused = relative_score_fusion(found.hits, keyword_share=share)
    elif method == "adaptive":
        weights["keyword"] *= evidence
        extra["keyword_evidence"] = round(evidence, 4)
        fused = weighted_rrf_scores(found.hits, k=rrf_k, weights=weights, evidence={})
    elif method == "evidence":
        fused = weighted_rrf_scores(
            found.hits,
            k=rrf_k,
            weights=weights,
            # Keyword hits that hold the question's codes or quoted phrases are
            # exact matches: full evidence whatever share of the other words they hold.
            evidence={
                "keyword": {c: 1.0 if c in found.exact else v for c, v in found.coverage.items()}
            },
        )
    else:
        fused = rrf_scores([[cid for cid, _ in hits] for hits in found.hits.values()], k=rrf_k)
    # Ties (same RRF sum) keep the vector leg's order.
    order = sorted(
        fused,
        key=lambda cid: (
            -fused[cid],
            leg_ranks.get("vector", {}).get(cid, LegHit(10**9, 0)).rank,
            cid,
        ),
    )[: leg_depth(options)]
    found.details["fusion"] = {"method": method, "fused": len(fused)}
    if method != "scores":
        found.details["fusion"]["k"] = rrf_k
    if method in ("evidence", "adaptive", "scores"):
        found.details["fusion"]["weights"] = {leg: round(w, 4) for leg, w in weights.items()}
    found.details["fusion"].update(extra)
    scores = {cid: fused[cid] for cid in order}
    if options.retrieval.decisive_keyword:
        found.details["fusion"]["decisive_keyword"] = decisive_keyword_promote(
            order,
            scores,
            keyword_hits=found.hits.get("keyword", []),
            coverage=found.coverage,
            options=options.retrieval,
        )
    return order, scores


def _candidate(
    row: PassageRow,
    *,
    chunk_id: str,
    probe_index: int,
    rank: int,
    score: float,
    leg_ranks: dict[str, dict[str, LegHit]],
    found: _LegHits,
    with_embeddings: bool,
) -> Candidate:
    similarity = row.similarity
    return Candidate(
        chunk_id=chunk_id,
        source_id=row.source_id,
        source_location=row.source_location,
        source_title=row.source_title,
        text=row.text,
        char_start=row.char_start,
        char_end=row.char_end,
        page=row.page,
        section_path=list(row.section_path or []),
        ordinal=row.ordinal,
        legs={name: ranks[chunk_id] for name, ranks in leg_ranks.items() if chunk_id in ranks},
        retrieval_score=score,
        vector_similarity=float(similarity) if similarity is not None else None,
        keyword_coverage=found.coverage.get(chunk_id),
        exact_match=chunk_id in found.exact,
        probe_ranks={probe_index: rank},
        embedding=row.embedding if with_embeddings else None,
    )


def _hydrate(
    *, collection: Collection, ids: list[str], vector: np.ndarray | None, with_embeddings: bool
) -> dict[str, PassageRow]:
    # The ids came from this collection's own search; the read keeps it so.
    return search_index.passages_read(
        collection_id=collection.pk, ids=ids, vector=vector, with_embeddings=with_embeddings
    )
