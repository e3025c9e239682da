"""The staged pipeline: transform → retrieve → fuse → rerank → assemble → generate → groundedness.

``pipeline_run`` is a generator of events (a trace step as each stage ends,
the assembled citations, answer tokens, then the finished ``RagAnswer``), so
the browser can render progress; ``pipeline_answer`` runs it to the end.
Every stage appends exactly one ``TraceStep``, also when it is skipped, with
the reason in its details.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from query_app.chat import ChatClient, CountingChatClient
from query_app.pipeline.assembly import AssembledContext, assemble
from query_app.pipeline.cache import retrieval_cache_get, retrieval_cache_key, retrieval_cache_set
from query_app.pipeline.fusion import fuse
from query_app.pipeline.generation import RESET, GenerationResult, generate
from query_app.pipeline.groundedness import check_groundedness
from query_app.pipeline.keyword import KeywordResult, keyword_search
from query_app.pipeline.options import FloorOptions
from query_app.pipeline.rerankers import RERANKERS
from query_app.pipeline.retrieval import RETRIEVAL_MODES, collection_embedder, retrieve_probe
from query_app.pipeline.transforms import TRANSFORMS, TransformResult
from query_app.pipeline.types import (
    AnswerEvent,
    AnswerMode,
    Candidate,
    ContextEvent,
    PipelineEvent,
    RagAnswer,
    RagQuery,
    StepEvent,
    TokenEvent,
    TraceStep,
    timed_step,
)

logger = logging.getLogger(__name__)

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


def pipeline_answer(query: RagQuery, *, chat: ChatClient | None) -> RagAnswer:
    """Run every stage and return the answer (no streaming)."""
    for event in pipeline_run(query, chat=chat):
        if isinstance(event, AnswerEvent):
            return event.answer
    raise AssertionError("the pipeline ended without an answer")


def pipeline_run(query: RagQuery, *, chat: ChatClient | None) -> Iterator[PipelineEvent]:
    """Run the stages, yielding events; the last event is an AnswerEvent."""
    counting = CountingChatClient(chat) if chat is not None else None
    trace: list[TraceStep] = []

    def emit(step: TraceStep) -> StepEvent:
        # Trace warnings are for the person reading the answer, and most are
        # expected (no chat model configured, only common terms): the log gets
        # them at info level. Real failures are logged where they happen.
        for warning in step.warnings:
            logger.info("%s stage: %s", step.stage, warning)
        trace.append(step)
        return StepEvent(step)

    # --- 1-3: transform, retrieve, fuse (cached together) -------------------
    candidates: list[Candidate] | None = None
    cache_key = ""
    if query.options.cache.enabled:
        with timed_step("transform") as lookup:
            cache_key = retrieval_cache_key(query)
            cached = retrieval_cache_get(cache_key)
        if cached is not None:
            steps = [TraceStep(**s) for s in cached["steps"]]
            for step in steps:
                # The lookup is all the work these stages did this time.
                step.duration_ms = lookup.duration_ms if step is steps[0] else 0.0
                step.details["cache"] = "hit"
                step.details["model_calls"] = 0
                yield emit(step)
            candidates = [Candidate.from_dict(c) for c in cached["candidates"]]
    if candidates is None:
        produced: list[TraceStep] = []
        for event in _retrieve_stages(query, counting, produced):
            if isinstance(event, list):
                candidates = event
            else:
                if cache_key:
                    event.details["cache"] = "miss"
                yield emit(event)
        assert candidates is not None
        if cache_key:
            retrieval_cache_set(
                cache_key,
                {
                    "steps": [_step_state(s) for s in produced],
                    "candidates": [c.as_dict() for c in candidates],
                },
                ttl_s=query.options.cache.ttl_s,
            )

    # --- 4: rerank (+ minimum score and relevance floor) --------------------
    with timed_step("rerank") as step:
        kept = _rerank(query, candidates, counting, step)
    yield emit(step)

    # --- 5: assemble -------------------------------------------------------
    with timed_step("assemble") as step:
        context, details, warnings = assemble(kept, options=query.options.context)
        step.details.update(details)
        step.warnings += warnings
    yield emit(step)
    citations = context.citations()
    yield ContextEvent(citations)

    # --- 6: generate -------------------------------------------------------
    result: GenerationResult | None = None
    if query.retrieval_only:
        step = TraceStep(
            stage="generate",
            skipped=True,
            details={"reason": "retrieval-only request: generation skipped on purpose"},
        )
        yield emit(step)
    else:
        with timed_step("generate") as step:
            calls_before = counting.calls if counting else 0
            gen = generate(
                question=query.question,
                context=context,
                options=query.options.generation,
                chat=counting,
                allow_fallback=query.allow_fallback,
                stream=query.stream,
            )
            while True:
                try:
                    piece = next(gen)
                except StopIteration as stop:
                    result = stop.value
                    break
                yield TokenEvent("", reset=True) if piece is RESET else TokenEvent(piece)
            step.details.update(result.details)
            step.details["model_calls"] = (counting.calls if counting else 0) - calls_before
            step.warnings += result.warnings
        yield emit(step)
    if result is not None:
        for citation in citations:
            citation.cited = citation.marker in result.cited

    # --- 7: groundedness ---------------------------------------------------
    groundedness = yield from _groundedness_stage(query, result, context, counting, emit)

    mode: AnswerMode
    if result is None:
        text, mode = "", "retrieval-only"
    else:
        text, mode = result.text, result.mode
    answer = RagAnswer(
        question=query.question,
        text=text,
        mode=mode,
        citations=citations,
        trace=trace,
        model_calls=counting.calls if counting else 0,
        groundedness=groundedness,
    )
    yield AnswerEvent(answer)


RANKING_IN_TRACE = 50


def _ranking_entry(candidate: Candidate) -> dict[str, Any]:
    return {
        "chunk_id": candidate.chunk_id,
        "legs": {name: hit.as_dict() for name, hit in candidate.legs.items()},
        "retrieval_score": candidate.retrieval_score,
        "fused_score": candidate.fused_score,
        "probe_ranks": {str(k): v for k, v in candidate.probe_ranks.items()},
    }


def _step_state(step: TraceStep) -> dict[str, Any]:
    return {
        "stage": step.stage,
        "duration_ms": step.duration_ms,
        "details": dict(step.details),
        "warnings": list(step.warnings),
        "skipped": step.skipped,
    }


def _retrieve_stages(
    query: RagQuery, chat: CountingChatClient | None, produced: list[TraceStep]
) -> Iterator[TraceStep | list[Candidate]]:
    """Transform, retrieve and fuse; yields their steps, then the fused candidates."""
    o = query.options
    with timed_step("transform") as step:
        if o.transform.kind == "none":
            transformed = TransformResult(probes=[query.question], kind="single")
            step.skipped = True
            step.details["reason"] = "transform 'none': the question is the only probe"
        else:
            calls_before = chat.calls if chat else 0
            transformed = TRANSFORMS[o.transform.kind](
                query.question,
                variants=o.transform.variants,
                chat=chat,
                allow_fallback=query.allow_fallback,
            )
            step.details["model_calls"] = (chat.calls if chat else 0) - calls_before
            step.warnings += transformed.warnings
        step.details.update(
            {
                "transform": o.transform.kind,
                "kind": transformed.kind,
                "source": transformed.source,
                "probes": transformed.probes,
            }
        )
    produced.append(step)
    yield step

    with timed_step("retrieve") as step:
        legs = RETRIEVAL_MODES[o.retrieval.mode]
        probes = transformed.probes
        vectors: list[Any] = [None] * len(probes)
        keyword: list[KeywordResult | None] = [None] * len(probes)
        encoding: Future[Any] | None = None
        if "vector" in legs:
            embedder = collection_embedder(query.collection)
            step.details["embedder"] = embedder.profile.model
            if "keyword" in legs:
                # Hybrid: the probes are embedded on another thread while
                # Postgres runs the keyword leg, so the legs overlap.
                encoding = _embedding_pool().submit(embedder.encode, probes)
            else:
                vectors = list(embedder.encode(probes))
        if "keyword" in legs:
            keyword = [
                keyword_search(
                    collection=query.collection, text=p, k=o.candidate_k, options=o.retrieval
                )
                for p in probes
            ]
        if encoding is not None:
            vectors = list(encoding.result())
        per_probe = []
        probe_details = []
        for index, (probe, vector) in enumerate(zip(probes, vectors, strict=True)):
            result = retrieve_probe(
                collection=query.collection,
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
        step.details.update(
            {
                "mode": o.retrieval.mode,
                "legs": list(legs),
                "candidate_k": o.candidate_k,
                "candidates": sum(len(c) for c in per_probe),
                "per_probe": probe_details,
            }
        )
    produced.append(step)
    yield step

    with timed_step("fuse") as step:
        fused = fuse(
            per_probe,
            kind=transformed.kind,
            rrf_k=o.retrieval.rrf_k,
            mmr=o.fusion.mmr,
            mmr_lambda=o.fusion.mmr_lambda,
        )
        step.details.update(fused.details)
        # Where each candidate stood in each leg, for the trace view and for
        # evaluation (retrieved but ranked out vs never retrieved).
        step.details["ranking"] = [_ranking_entry(c) for c in fused.candidates[:RANKING_IN_TRACE]]
        for cand in fused.candidates:
            cand.embedding = None  # not needed downstream, not cached
    produced.append(step)
    yield step
    yield fused.candidates


def _rerank(
    query: RagQuery, candidates: list[Candidate], chat: ChatClient | None, step: TraceStep
) -> list[Candidate]:
    o = query.options.rerank
    result = RERANKERS[o.kind](
        query.question, candidates, options=o, chat=chat, allow_fallback=query.allow_fallback
    )
    kept = result.candidates
    step.details.update({"reranker": o.kind, "candidates": len(candidates), "top_n": o.top_n})
    step.details.update(result.details)
    step.details["model_calls"] = result.model_calls
    step.warnings += result.warnings
    if o.min_score is not None:
        before = len(kept)
        kept = [c for c in kept if c.score >= o.min_score]
        step.details["min_score"] = {"value": o.min_score, "dropped": before - len(kept)}
    passed, floor = relevance_floor_check(kept, query.options.floor)
    step.details["floor"] = floor
    if not passed:
        kept = []
    step.details["kept"] = len(kept)
    step.details["ranking"] = [
        {"chunk_id": c.chunk_id, "rerank_score": c.rerank_score, "score": c.score} for c in kept
    ]
    if not kept:
        step.details["decision"] = "declined" if candidates else "no candidates"
    else:
        step.details["decision"] = "answer"
    return kept


def relevance_floor_check(
    candidates: list[Candidate], floor: FloorOptions
) -> tuple[bool, dict[str, Any]]:
    """Whether the best evidence is relevant enough to answer from.

    The cosine to the probe is the judge whenever the vector measure exists
    (vector and hybrid retrieval score every candidate on it); keyword
    coverage judges only keyword-only retrieval, where it is the sole measure
    (it separates answerable from off-topic questions much less well, see
    docs/answering.md). A chunk holding the exact codes or quoted phrases the
    question asked for always counts as relevant.
    """
    sims = [c.vector_similarity for c in candidates if c.vector_similarity is not None]
    covs = [c.keyword_coverage for c in candidates if c.keyword_coverage is not None]
    best_sim = max(sims) if sims else None
    best_cov = max(covs) if covs else None
    exact = any(c.exact_match for c in candidates)
    if not candidates:
        passed, judge = False, "no candidates"
    elif exact:
        passed, judge = True, "exact match of the required codes or phrases"
    elif best_sim is not None and floor.min_vector_similarity is not None:
        passed, judge = best_sim >= floor.min_vector_similarity, "vector similarity"
    elif best_sim is None and best_cov is not None and floor.min_keyword_coverage is not None:
        passed, judge = best_cov >= floor.min_keyword_coverage, "keyword coverage"
    else:
        passed, judge = True, "no floor applies"
    return passed, {
        "min_vector_similarity": floor.min_vector_similarity,
        "best_vector_similarity": None if best_sim is None else round(best_sim, 4),
        "min_keyword_coverage": floor.min_keyword_coverage,
        "best_keyword_coverage": None if best_cov is None else round(best_cov, 4),
        "judged_by": judge,
        "passed": passed,
    }


def _groundedness_stage(
    query: RagQuery,
    result: GenerationResult | None,
    context: AssembledContext,
    chat: CountingChatClient | None,
    emit: Any,
) -> Generator[PipelineEvent, None, dict[str, Any] | None]:
    o = query.options.groundedness
    reason = ""
    if not o.enabled:
        reason = "disabled by the profile"
    elif result is None:
        reason = "retrieval-only request: nothing was generated"
    elif result.mode == "not-found":
        reason = "the fixed not-found answer has nothing to check"
    if reason:
        yield emit(TraceStep(stage="groundedness", skipped=True, details={"reason": reason}))
        return None
    assert result is not None
    with timed_step("groundedness") as step:
        verdict = check_groundedness(
            answer=result.text,
            context=context,
            checker=o.checker,
            chat=chat,
            min_support=o.min_support,
        )
        step.details.update(verdict.as_dict())
        step.details["model_calls"] = verdict.model_calls
        step.warnings += verdict.warnings
    yield emit(step)
    return verdict.as_dict()
