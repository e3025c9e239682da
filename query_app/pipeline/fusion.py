"""The fuse stage: combine per-probe rankings by the transform's kind, then MMR.

- ``single`` (no transform): the one list, deduplicated.
- ``union`` (multi-query, hyde with several documents): union by chunk id, the
  maximum retrieval score wins on duplicates.
- ``fusion`` (rag-fusion): Reciprocal Rank Fusion of the probes' rankings,
  with the same k as the hybrid legs.

Optional MMR re-orders the result to trade relevance against redundancy:
each pick maximises ``lambda * relevance - (1 - lambda) * max similarity to the picks so far``.
Similarity is the cosine of the chunks' stored embeddings, or word Jaccard when
a chunk has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from query_app.pipeline.leg_fusion import rrf_scores
from query_app.pipeline.lexical import content_terms, jaccard
from query_app.pipeline.types import Candidate

FUSION_METHODS = {
    "single": "dedup",
    "union": "union-max",
    "fusion": "rrf",
    "replacement": "union-max",
}


@dataclass
class FuseResult:
    candidates: list[Candidate]
    details: dict[str, Any] = field(default_factory=dict)


def fuse(
    per_probe: Sequence[Sequence[Candidate]],
    *,
    kind: str,
    rrf_k: int,
    mmr: bool = False,
    mmr_lambda: float = 0.7,
) -> FuseResult:
    """Merge the probes' candidate lists into one ranking (deduplicated by chunk id)."""
    method = FUSION_METHODS[kind]
    total_in = sum(len(c) for c in per_probe)
    if method == "rrf":
        fused = rrf_scores([[c.chunk_id for c in lst] for lst in per_probe], k=rrf_k)
        merged = _merge(
            per_probe, prefer=lambda old, new: new.retrieval_score > old.retrieval_score
        )
        for cand in merged.values():
            cand.fused_score = fused[cand.chunk_id]
    else:
        merged = _merge(
            per_probe, prefer=lambda old, new: new.retrieval_score > old.retrieval_score
        )
        for cand in merged.values():
            cand.fused_score = cand.retrieval_score
    ranked = sorted(
        merged.values(), key=lambda c: (-(c.fused_score or 0.0), _best_rank(c), c.chunk_id)
    )
    details: dict[str, Any] = {
        "method": method,
        "probes": len(per_probe),
        "in": total_in,
        "out": len(ranked),
        "duplicates": total_in - len(ranked),
    }
    if method == "rrf":
        details["k"] = rrf_k
    if mmr and len(ranked) > 1:
        ranked, similarity = mmr_order(ranked, mmr_lambda=mmr_lambda)
        details["mmr"] = {"lambda": mmr_lambda, "similarity": similarity}
    else:
        details["mmr"] = False
    return FuseResult(candidates=ranked, details=details)


def _best_rank(candidate: Candidate) -> int:
    return min(candidate.probe_ranks.values(), default=10**9)


def _merge(per_probe: Sequence[Sequence[Candidate]], *, prefer: Any) -> dict[str, Candidate]:
    """Dedupe by chunk id keeping the preferred copy; remember every probe's rank."""
    merged: dict[str, Candidate] = {}
    for candidates in per_probe:
        for cand in candidates:
            existing = merged.get(cand.chunk_id)
            if existing is None:
                merged[cand.chunk_id] = cand
                continue
            ranks = {**existing.probe_ranks, **cand.probe_ranks}
            similarity = _max_optional(existing.vector_similarity, cand.vector_similarity)
            coverage = _max_optional(existing.keyword_coverage, cand.keyword_coverage)
            keep = cand if prefer(existing, cand) else existing
            keep.probe_ranks = ranks
            keep.vector_similarity = similarity
            keep.keyword_coverage = coverage
            keep.exact_match = existing.exact_match or cand.exact_match
            keep.question_similarity = _max_optional(
                existing.question_similarity, cand.question_similarity
            )
            if keep.embedding is None:
                keep.embedding = existing.embedding if keep is cand else cand.embedding
            merged[cand.chunk_id] = keep
    return merged


def _max_optional(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def mmr_order(candidates: list[Candidate], *, mmr_lambda: float) -> tuple[list[Candidate], str]:
    """Greedy Maximal Marginal Relevance over the whole list; returns it and the similarity used."""
    scores = np.clip(
        np.array([c.fused_score or 0.0 for c in candidates], dtype=np.float64), 0, None
    )
    # Relevance on [0, 1] so it trades fairly against a cosine/Jaccard
    # similarity; scaled by the best score (not min-max, which would call the
    # last candidate irrelevant however close its score is).
    top = scores.max()
    relevance = scores / top if top > 0 else np.ones_like(scores)
    sim, label = _similarity_matrix(candidates)
    n = len(candidates)
    picked: list[int] = []
    max_sim = np.zeros(n)
    remaining = set(range(n))
    while remaining:
        best = max(
            remaining,
            key=lambda i: (mmr_lambda * relevance[i] - (1 - mmr_lambda) * max_sim[i], -i),
        )
        picked.append(best)
        remaining.discard(best)
        max_sim = np.maximum(max_sim, sim[best])
    return [candidates[i] for i in picked], label


def _similarity_matrix(candidates: list[Candidate]) -> tuple[np.ndarray, str]:
    if all(c.embedding is not None for c in candidates):
        matrix = np.stack([np.asarray(c.embedding, dtype=np.float64) for c in candidates])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1, norms)
        return matrix @ matrix.T, "embedding-cosine"
    terms = [set(content_terms(c.text)) for c in candidates]
    n = len(candidates)
    sim = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            sim[i, j] = sim[j, i] = jaccard(terms[i], terms[j])
    return sim, "word-jaccard"
