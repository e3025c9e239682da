"""Stage 4, rerank: narrow the candidates to top_n, then apply the minimum score and the floor.

The relevance floor decides whether the collection holds an answer at all: when
the best evidence is below it, nothing is kept and the answer declines.

A reranker whose part is missing here (no cross-encoder configured, no chat
model for ``llm``) is skipped: the step keeps the retrieval order, warns with
how to enable it and says in its details what was skipped and why. With
``rerank.required`` the request fails before any work instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from query_app.pipeline.options import FloorOptions, QueryOptions
from query_app.pipeline.rerankers import RERANKERS, reranker_gap
from query_app.pipeline.stages.base import MissingPart, PipelineState, Stage, StageCheck
from query_app.pipeline.types import Candidate, TraceStep


class RerankDetails(TypedDict, total=False):
    reranker: str
    candidates: int  # in
    top_n: int
    model_calls: int
    min_score: dict[str, Any]
    floor: dict[str, Any]
    kept: int
    ranking: list[dict[str, Any]]
    decision: str  # answer | declined | no candidates
    skipped: str  # the reranker that was asked for and could not run here
    skipped_reason: str
    enable: str  # how to enable it


class RerankStage(Stage):
    name = "rerank"
    listed = frozenset({"parsed_ids"})

    def check(self, check: StageCheck) -> None:
        o = check.options.rerank
        gap = reranker_gap(o, chat_configured=check.chat_configured)
        if gap is not None and o.required:
            raise gap.error

    def runs_without(self, check: StageCheck) -> list[MissingPart]:
        o = check.options.rerank
        gap = reranker_gap(o, chat_configured=check.chat_configured)
        if gap is None or o.required:
            return []
        return [MissingPart(stage=self.name, short=gap.short, enable=gap.enable)]

    def chat_use(self, options: QueryOptions) -> str:
        kind = options.rerank.kind
        return f"its {kind!r} reranker" if RERANKERS.get(kind)().uses_chat else ""

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options.rerank
        candidates = list(state.candidates)
        gap = reranker_gap(o, chat_configured=state.chat is not None)
        if gap is not None and o.required:
            raise gap.error
        # Without its missing part the step keeps the retrieval order ("none").
        reranker = RERANKERS.get("none" if gap is not None else o.kind)()
        result = reranker.rerank(
            state.search_question,
            candidates,
            options=o,
            chat=state.chat,
            allow_fallback=state.query.allow_fallback,
        )
        kept = result.candidates
        details: RerankDetails = {
            "reranker": o.kind,
            "candidates": len(candidates),
            "top_n": o.top_n,
        }
        if gap is not None:
            details["skipped"] = gap.short
            details["skipped_reason"] = str(gap.error)
            details["enable"] = gap.enable
            step.warnings.append(gap.warning)
        step.details.update(details)
        step.details.update(result.details)
        step.warnings += result.warnings
        details = {"model_calls": result.model_calls}
        if o.min_score is not None:
            before = len(kept)
            kept = [c for c in kept if c.score >= o.min_score]
            details["min_score"] = {"value": o.min_score, "dropped": before - len(kept)}
        passed, floor = relevance_floor_check(kept, state.options.floor)
        if not passed and floor["judged_by"] == "vector similarity":
            passed = sentence_clears(state, kept, floor)
        details["floor"] = floor
        if not passed:
            kept = []
        details["kept"] = len(kept)
        details["ranking"] = [
            {"chunk_id": c.chunk_id, "rerank_score": c.rerank_score, "score": c.score} for c in kept
        ]
        if not kept:
            details["decision"] = "declined" if candidates else "no candidates"
        else:
            details["decision"] = "answer"
        step.details.update(details)
        return state.with_(kept=tuple(kept))

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(RerankDetails, details)
        reranker = str(d.get("reranker", ""))
        return [
            f"{d.get('candidates', '?')} → {d.get('kept', '?')} kept",
            f"{reranker} skipped" if d.get("skipped") else reranker,
            str(d.get("decision", "")),
        ]


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


def sentence_clears(
    state: PipelineState, candidates: list[Candidate], floor: dict[str, Any]
) -> bool:
    """Whether one sentence (list item, row) of the candidates is near enough the question
    on its own (``floor.min_unit_similarity``, never below the vector floor), though
    no whole passage is.

    A page of notes on five subjects reads, as a whole, like none of them: "On call
    this week: Jonas Peeters (primary)" answers "Who is on call?" from a passage
    whose cosine is 0.29. Each unit is read as the extractive answer reads it,
    its vector taken from those stored with the chunk. ``floor`` (the trace's
    details) gains the figures and, when it clears, the sentence.
    """
    minimum = state.options.floor.unit_floor
    if minimum is None or not candidates:
        return False
    from query_app.pipeline.embed_cache import cached_encoder
    from query_app.pipeline.quotable import units_read
    from query_app.pipeline.retrieval import collection_embedder

    # Each unit's own text (for the trace) by the text embedded for it.
    units = dict(
        (read, own)
        for c in candidates
        for own, read in units_read(c.text, title=c.source_title, location=c.source_location)
    )
    texts = list(units)
    if not texts:
        return False
    embedder = collection_embedder(state.query.collection)
    encode = cached_encoder(embedder, chunk_ids=[c.chunk_id for c in candidates])
    vectors = encode([state.search_question, *texts])
    similarities = vectors[1:] @ vectors[0]
    best = int(similarities.argmax())
    floor["min_unit_similarity"] = minimum
    floor["best_unit_similarity"] = round(float(similarities[best]), 4)
    if similarities[best] < minimum:
        return False
    floor.update(passed=True, judged_by="one sentence's similarity", sentence=units[texts[best]])
    return True
