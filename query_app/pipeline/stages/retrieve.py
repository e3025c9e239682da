"""Stage 2, retrieve: vector, keyword or hybrid candidates for each probe."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypedDict, cast

from query_app.pipeline.keyword import KeywordResult, keyword_search
from query_app.pipeline.retrieval import (
    RETRIEVAL_MODES,
    collection_embedder,
    leg_depth,
    retrieve_probe,
)
from query_app.pipeline.stages.base import PipelineState, Stage, StageCheck
from query_app.pipeline.types import TraceStep

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _embedding_pool() -> ThreadPoolExecutor:
    """The thread that embeds probes during hybrid retrieval (made on first use, after any fork)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            # The embedder serialises encoding with its own lock: one thread is enough.
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-embed")
        return _pool


class RetrieveDetails(TypedDict, total=False):
    embedder: str
    mode: str
    legs: list[str]
    candidate_k: int
    candidates: int  # over all probes
    per_probe: list[dict[str, Any]]
    cache: str


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
        vectors: list[Any] = [None] * len(probes)
        keyword: list[KeywordResult | None] = [None] * len(probes)
        encoding: Future[Any] | None = None
        details: RetrieveDetails = {}
        if "vector" in legs:
            embedder = collection_embedder(collection)
            details["embedder"] = embedder.profile.model
            if "keyword" in legs:
                # Hybrid: the probes are embedded on another thread while
                # Postgres runs the keyword leg, so the legs overlap.
                encoding = _embedding_pool().submit(embedder.encode, probes)
            else:
                vectors = list(embedder.encode(probes))
        if "keyword" in legs:
            keyword = [
                keyword_search(collection=collection, text=p, k=leg_depth(o), options=o.retrieval)
                for p in probes
            ]
        if encoding is not None:
            vectors = list(encoding.result())
        per_probe = []
        probe_details = []
        for index, (probe, vector) in enumerate(zip(probes, vectors, strict=True)):
            result = retrieve_probe(
                collection=collection,
                probe=probe,
                probe_index=index,
                vector=vector,
                options=o,
                keyword=keyword[index],
                with_embeddings=o.fusion.mmr,
            )
            per_probe.append(result.candidates)
            probe_details.append({"candidates": len(result.candidates), **result.details})
            step.warnings += result.warnings
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
