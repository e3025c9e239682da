"""Stage 6, generate: the answer with ``[n]`` markers (chat model, extractive, or not found)."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, TypedDict, cast

from query_app.exceptions import ChatNotConfigured
from query_app.pipeline.assembly import AssembledContext
from query_app.pipeline.coverage import WordFrequencies, collection_frequencies
from query_app.pipeline.embed_cache import cached_encoder
from query_app.pipeline.generation import GENERATORS, LLM_NOT_CONFIGURED, RESET, generate
from query_app.pipeline.index_memo import index_key
from query_app.pipeline.lexical import answer_sentences
from query_app.pipeline.names import names_absent, question_names, words_absent
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.output_filter import output_filter_stage
from query_app.pipeline.retrieval import collection_embedder
from query_app.pipeline.stages.base import PipelineState, Stage, StageCheck
from query_app.pipeline.types import PipelineEvent, TokenEvent, TraceStep
from query_app.pipeline.unaddressed import AbsentWords


class GenerateDetails(TypedDict, total=False):
    generator: str  # llm | extractive | none (the not-found answer)
    model: str
    cited: list[int]
    sentences: int
    skipped_instruction_like: int
    fallback_from: str
    model_calls: int
    reason: str
    unknown_names: list[str]
    unaddressed_words: dict[str, float]


def _already_said(state: PipelineState) -> frozenset[str]:
    """The sentences of a follow-up's previous answer (a follow-up wants something new)."""
    if not state.query.history:
        return frozenset()
    previous = state.query.history[-1].answer
    return frozenset(text.rstrip(".") for text, _ in answer_sentences(previous))


def _quotes_only(state: PipelineState, context: AssembledContext) -> bool:
    """Whether the answer will quote the passages rather than have a chat model read
    them: a chat model can say what they lack; quoting the nearest passages cannot."""
    if not context.passages or state.query.collection is None:
        return False
    return not (
        GENERATORS.get(state.options.generation.generator).uses_chat and state.chat is not None
    )


def _unknown_names(state: PipelineState, context: AssembledContext) -> tuple[str, ...]:
    """The question's codes and identifiers the collection never mentions (extractive only)."""
    if not _quotes_only(state, context) or state.query.collection is None:
        return ()
    names = question_names(state.answer_question)
    return tuple(names_absent(collection_id=int(state.query.collection.pk), names=names))


def _absent_words(state: PipelineState, context: AssembledContext) -> AbsentWords | None:
    """Which of some words the collection never holds (extractive only; asked only
    when the quoted sentences might not speak of a word of the question)."""
    if not _quotes_only(state, context) or state.query.collection is None:
        return None
    collection = state.query.collection
    return lambda words: words_absent(
        collection_id=int(collection.pk), words=words, index=index_key(collection)
    )


def _frequencies(state: PipelineState, context: AssembledContext) -> WordFrequencies | None:
    """The collection's word frequencies, to weigh the question's words (extractive only)."""
    if not _quotes_only(state, context) or state.query.collection is None:
        return None
    return collection_frequencies(state.query.collection)


class GenerateStage(Stage):
    name = "generate"

    def check(self, check: StageCheck) -> None:
        generator = GENERATORS.get(check.options.generation.generator)
        if (
            generator.requires_chat
            and not check.chat_configured
            and not check.allow_fallback
            and not check.retrieval_only
        ):
            raise ChatNotConfigured(LLM_NOT_CONFIGURED)

    def chat_use(self, options: QueryOptions) -> str:
        kind = options.generation.generator
        return f"its generator {kind!r}" if GENERATORS.get(kind).uses_chat else ""

    def skip_reason(self, state: PipelineState) -> str:
        if state.query.retrieval_only:
            return "retrieval-only request: generation skipped on purpose"
        return ""

    def stream(
        self, state: PipelineState, step: TraceStep
    ) -> Generator[PipelineEvent, None, PipelineState]:
        calls_before = state.chat_calls
        context = state.context or AssembledContext()
        embedder = collection_embedder(state.query.collection) if context.passages else None
        pieces = generate(
            question=state.answer_question,
            context=context,
            options=state.options.generation,
            chat=state.chat,
            allow_fallback=state.query.allow_fallback,
            stream=state.query.stream,
            # The question's vector comes from retrieval's cache, the sentences' from
            # their chunks (stored at ingestion), not the model again.
            encode=cached_encoder(
                embedder, chunk_ids=[p.candidate.chunk_id for p in context.passages]
            )
            if embedder is not None
            else None,
            model=embedder.profile.model if embedder is not None else "",
            floor=state.options.floor.min_vector_similarity,
            unit_floor=state.options.floor.unit_floor,
            said=_already_said(state),
            unknown_names=_unknown_names(state, context),
            absent_words=_absent_words(state, context),
            frequencies=_frequencies(state, context),
        )
        while True:
            try:
                piece = next(pieces)
            except StopIteration as stop:
                result = stop.value
                break
            yield TokenEvent("", reset=True) if piece is RESET else TokenEvent(piece)
        # Links not in the cited passages, and quotes of flagged text, never leave.
        result = yield from output_filter_stage(result, context)
        step.details.update(result.details)
        details: GenerateDetails = {"model_calls": state.chat_calls - calls_before}
        step.details.update(details)
        step.warnings += result.warnings
        if result.mode == "not-found":
            # Nothing qualified: no passage is presented as the answer's evidence.
            return state.with_(generation=result, citations=())
        by_marker = {p.marker: p for p in context.passages}
        for citation in state.citations:
            citation.cited = citation.marker in result.cited
            passage = by_marker.get(citation.marker)
            if passage is not None:
                citation.spans = passage.spans(result.spans.get(citation.marker, []))
        return state.with_(generation=result)

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(GenerateDetails, details)
        return [str(d.get("generator", "")), f"{d.get('model_calls', 0)} model call(s)"]
