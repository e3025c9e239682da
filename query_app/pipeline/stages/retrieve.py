"""Stage 2, retrieve: vector, keyword or hybrid candidates for each probe."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypedDict, cast

import numpy as np

from query_app.pipeline.embed_cache import QuestionVectors, question_vectors
from query_app.pipeline.keyword import KeywordResult, keyword_search
from query_app.pipeline.retrieval import (
    RETRIEVAL_MODES,
    collection_embedder,
    leg_depth,
    retrieve_probe,
)
from query_app.pipeline.stages.base import PipelineState, Stage, StageCheck
from query_app.pipeline.types import Candidate, TraceStep

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _embedding_pool() -> ThreadPoolExecutor:
    """The threads that embed probes during hybrid retrieval (made on first use, after any fork)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            # The model runs one batch at a time; more threads than one let the
            # probes of concurrent questions wait together and share a micro-batch.
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rag-embed")
        return _pool


class RetrieveDetails(TypedDict, total=False):
    embedder: str
    mode: str
    legs: list[str]
    candidate_k: int
    candidates: int  # over all probes
    per_probe: list[dict[str, Any]]
    cache: str
    # Probes whose vectors came from the question cache (embed_cache.py).
    vectors_cached: int
    # Rewritten probes whose candidates carry their cosine to the question.
    judged_by_question: list[str]


class RetrieveStage(Stage):
    name = "retrieve"
    cacheable = True

    def check(self, check: StageCheck) -> None:
        # A collection indexed with another embedding model fails before any work.
        legs = RETRIEVAL_MODES.get(check.options.retrieval.mode).legs
        if "vector" in legs and check.collection is not None:
            collection_embedder(check.collection)

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options
        collection = state.query.collection
        legs = RETRIEVAL_MODES.get(o.retrieval.mode).legs
        probes = list(state.probes)
        question = state.search_question
        rewritten = {
            p for p in state.notes.get("rewritten_probes", ()) if p in probes and p != question
        }
        vectors: list[Any] = [None] * len(probes)
        keyword: list[KeywordResult | None] = [None] * len(probes)
        encoding: Future[QuestionVectors] | None = None
        details: RetrieveDetails = {}
        if "vector" in legs:
            embedder = collection_embedder(collection)
            details["embedder"] = embedder.profile.model
            if "keyword" in legs:
                # Hybrid: the probes are embedded on another thread while
                # Postgres runs the keyword leg, so the legs overlap.
                encoding = _embedding_pool().submit(question_vectors, embedder, probes)
            else:
                encoded = question_vectors(embedder, probes)
                vectors = list(encoded.vectors)
                details["vectors_cached"] = encoded.cached
        if "keyword" in legs:
            keyword = [
                keyword_search(collection=collection, text=p, k=leg_depth(o), options=o.retrieval)
                for p in probes
            ]
        if encoding is not None:
            encoded = encoding.result()
            vectors = list(encoded.vectors)
            details["vectors_cached"] = encoded.cached
        per_probe: list[list[Candidate]] = []
        probe_details = []
        for index, (probe, vector) in enumerate(zip(probes, vectors, strict=True)):
            result = retrieve_probe(
                collection=collection,
                probe=probe,
                probe_index=index,
                vector=vector,
                options=o,
                keyword=keyword[index],
                with_embeddings=o.fusion.mmr or probe in rewritten,
            )
            per_probe.append(list(result.candidates))
            probe_details.append({"candidates": len(result.candidates), **result.details})
            step.warnings += result.warnings
        if rewritten:
            per_probe = _judged_by_question(per_probe, probes, vectors, question, rewritten)
            details["judged_by_question"] = sorted(rewritten)
        details.update(
            {
                "mode": o.retrieval.mode,
                "legs": list(legs),
                "candidate_k": o.candidate_k,
                "candidates": sum(len(c) for c in per_probe),
                "per_probe": probe_details,
            }
        )
        step.details.update(details)
        return state.with_(per_probe=tuple(per_probe))

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(RetrieveDetails, details)
        parts = [f"{d.get('candidates', 0)} candidates", f"mode {d.get('mode', '?')}"]
        if d.get("candidate_k"):
            parts.append(f"k={d['candidate_k']}")
        return parts


def _judged_by_question(
    per_probe: list[list[Candidate]],
    probes: list[str],
    vectors: list[Any],
    question: str,
    rewritten: set[str],
) -> list[list[Candidate]]:
    """Each candidate with its similarity to the question itself.

    A rewritten probe matches its own words: pseudo-relevance feedback adds words
    (and codes) of the passages it came from, so they match it however far they
    are from the question. Its candidates keep their retrieval scores, lose the
    exact-match standing that only the question's own codes give, and carry the
    cosine to the question (the question is searched beside the probe, so its
    vector is at hand; none in keyword-only retrieval).
    """
    asked = vectors[probes.index(question)] if question in probes else None
    judged = []
    for probe, candidates in zip(probes, per_probe, strict=True):
        redone = []
        for candidate in candidates:
            if probe not in rewritten:
                similarity = candidate.vector_similarity
                redone.append(replace(candidate, question_similarity=similarity))
                continue
            similarity = None
            if asked is not None and candidate.embedding is not None:
                a, b = np.asarray(asked, dtype=np.float32), candidate.embedding
                norms = float(np.linalg.norm(a) * np.linalg.norm(b)) or 1.0
                similarity = float(np.dot(a, b)) / norms
            redone.append(replace(candidate, question_similarity=similarity, exact_match=False))
        judged.append(redone)
    return judged
