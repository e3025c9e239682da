"""The generate stage: a grounded answer with ``[n]`` markers.

- No passage: the fixed not-found answer, without any model call.
- ``extractive``: verbatim sentences from the best passages, each followed by
  its passage's marker. Needs no model; labelled extractive everywhere.
- ``llm``: the chat model, with the grounded system prompt; passages and the
  question are delimited data. Markers that point at no passage are removed.
- ``auto``: ``llm`` when a chat model is configured, else ``extractive``.

When the chat model times out or answers garbage, a request that allows
fallback gets the extractive answer with a trace warning; otherwise a clear
``GenerationFailed`` error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from query_app.chat import ChatClient, ChatError
from query_app.exceptions import ChatNotConfigured, GenerationFailed, UnknownGenerator
from query_app.pipeline.assembly import AssembledContext
from query_app.pipeline.coverage import (
    Coverage,
    WordFrequencies,
    question_coverage,
    uncovered_answer,
)
from query_app.pipeline.extractive import Encode, align_spans, extract
from query_app.pipeline.lexical import (
    MARKER_RE,
    markers_in,
)
from query_app.pipeline.names import unknown_names_answer
from query_app.pipeline.options import GenerationOptions
from query_app.pipeline.prompts import answer_messages
from query_app.pipeline.quotable import Quote, read_as
from query_app.pipeline.types import AnswerMode
from query_app.pipeline.unaddressed import (
    AbsentWords,
    unaddressed_answer,
    unaddressed_words,
    words_to_try,
)
from ragsite.registry import Registry

logger = logging.getLogger(__name__)

NOT_FOUND_ANSWER = (
    "Not found in this collection: no passage is relevant enough to answer this question."
)
LLM_NOT_CONFIGURED = (
    "generation.generator is 'llm' but no chat model is configured "
    "(set RAG_CHAT_BASE_URL and RAG_CHAT_MODEL)"
)
# Yielded instead of a token when streamed text must be discarded (the model
# failed mid-stream and the extractive answer replaces it).
RESET = object()


@dataclass
class GenerationResult:
    text: str
    mode: AnswerMode  # llm | extractive | not-found
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    cited: list[int] = field(default_factory=list)
    # Per marker, the spans of its passage the answer rests on (offsets into the passage).
    spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)


def _clean_markers(text: str, n: int) -> tuple[str, list[int], list[int]]:
    """Drop markers that point at no passage; return text, valid and invalid markers."""
    invalid: list[int] = []

    def keep(match: Any) -> str:
        numbers = [int(x) for x in match.group(1).split(",")]
        good = [x for x in numbers if 1 <= x <= n]
        invalid.extend(x for x in numbers if not 1 <= x <= n)
        return "".join(f"[{x}]" for x in good)

    cleaned = MARKER_RE.sub(keep, text)
    return cleaned, [m for m in markers_in(cleaned) if 1 <= m <= n], sorted(set(invalid))


@dataclass(frozen=True)
class GenerationRequest:
    """What a generator writes from: the question, the assembled passages and how."""

    question: str
    context: AssembledContext
    options: GenerationOptions
    chat: ChatClient | None
    allow_fallback: bool
    stream: bool
    # The collection's embedding model, to score sentences against the question.
    encode: Encode | None = None
    model: str = ""
    # The relevance floor every quoted sentence must clear on its own.
    floor: float | None = None
    # A follow-up's previous answer, sentence by sentence: not quoted again if avoidable.
    said: frozenset[str] = frozenset()
    # Codes and identifiers of the question the collection never mentions (names.py).
    unknown_names: tuple[str, ...] = ()
    # Which of some words no chunk of the collection holds (unaddressed.py).
    absent_words: AbsentWords | None = None
    # The collection's document frequencies of words, to weigh the question's (coverage.py).
    frequencies: WordFrequencies | None = None
    # A passage below ``floor`` may be quoted where one of its units is this near the
    # question on its own (``floor.min_unit_similarity``; the rerank stage let it in).
    unit_floor: float | None = None


Writer = Callable[[GenerationRequest], Generator[Any, None, GenerationResult]]


@dataclass(frozen=True)
class AnswerGenerator:
    """A named generator: ``write(request)`` yields answer pieces and returns the result."""

    write: Writer
    # Calls the chat model when one is configured.
    uses_chat: bool
    # Cannot answer at all without a chat model unless the request allows a fallback.
    requires_chat: bool = False


def generate(
    *,
    question: str,
    context: AssembledContext,
    options: GenerationOptions,
    chat: ChatClient | None,
    allow_fallback: bool,
    stream: bool,
    encode: Encode | None = None,
    model: str = "",
    floor: float | None = None,
    said: frozenset[str] = frozenset(),
    unknown_names: tuple[str, ...] = (),
    absent_words: AbsentWords | None = None,
    frequencies: WordFrequencies | None = None,
    unit_floor: float | None = None,
) -> Generator[Any, None, GenerationResult]:
    """Yield answer pieces (or RESET) while generating; return the GenerationResult."""
    if not context.passages:
        return (yield from _not_found({"generator": "none", "model_calls": 0}))
    request = GenerationRequest(
        question,
        context,
        options,
        chat,
        allow_fallback,
        stream,
        encode,
        model,
        floor,
        said,
        unknown_names,
        absent_words,
        frequencies=frequencies,
        unit_floor=unit_floor,
    )
    return (yield from GENERATORS.get(options.generator).write(request))


def _not_found(
    details: dict[str, Any], warnings: list[str] | None = None, text: str = NOT_FOUND_ANSWER
) -> Generator[Any, None, GenerationResult]:
    yield text
    return GenerationResult(text=text, mode="not-found", details=details, warnings=warnings or [])


def _write_extractive(request: GenerationRequest) -> Generator[Any, None, GenerationResult]:
    return (yield from _extractive(request, []))


def _write_auto(request: GenerationRequest) -> Generator[Any, None, GenerationResult]:
    if request.chat is not None:
        return (yield from _llm(request, request.chat, []))
    warnings = ["no chat model is configured; answered extractively"]
    return (yield from _extractive(request, warnings))


def _write_llm(request: GenerationRequest) -> Generator[Any, None, GenerationResult]:
    if request.chat is not None:
        return (yield from _llm(request, request.chat, []))
    if not request.allow_fallback:
        raise ChatNotConfigured(LLM_NOT_CONFIGURED)
    warnings = [
        "generator 'llm' asked for but no chat model is configured",
        "no chat model is configured; answered extractively",
    ]
    return (yield from _extractive(request, warnings))


def _llm(
    request: GenerationRequest, chat: ChatClient, warnings: list[str]
) -> Generator[Any, None, GenerationResult]:
    """The chat model's answer; the extractive one (with a warning) when it fails and may."""
    question, context, options, stream = (
        request.question,
        request.context,
        request.options,
        request.stream,
    )
    messages = answer_messages(
        question=question, passages=context.blocks(), system_prompt=options.system_prompt
    )
    pieces: list[str] = []
    try:
        if stream:
            for piece in chat.stream(
                messages, temperature=options.temperature, max_tokens=options.max_output_tokens
            ):
                pieces.append(piece)
                yield piece
            raw = "".join(pieces)
        else:
            raw = chat.complete(
                messages, temperature=options.temperature, max_tokens=options.max_output_tokens
            )
    except ChatError as exc:
        if not request.allow_fallback:
            raise GenerationFailed(
                f"the chat model {chat.name} failed: {exc}. Retry later, or allow the "
                "extractive fallback"
            ) from exc
        logger.warning("generation fell back to extractive: %s", exc)
        if pieces:
            yield RESET
        warnings.append(f"the chat model {chat.name} failed ({exc}); answered extractively")
        result = yield from _extractive(request, warnings)
        result.details["fallback_from"] = "llm"
        return result

    text, cited, invalid = _clean_markers(raw.strip(), len(context.passages))
    if invalid:
        warnings.append(
            "the answer cited passage numbers that do not exist and were removed: "
            + ", ".join(f"[{m}]" for m in invalid)
        )
    if not cited:
        warnings.append("the answer cites no passage")
    if not stream:
        yield text
    elif invalid:
        # The streamed text carried bad markers: replace it with the cleaned text.
        yield RESET
        yield text
    return GenerationResult(
        text=text,
        mode="llm",
        details={"generator": "llm", "model": chat.name, "cited": cited},
        warnings=warnings,
        cited=cited,
        spans=align_spans(text, context, encode=request.encode, model=request.model),
    )


def _extractive(
    request: GenerationRequest, warnings: list[str]
) -> Generator[Any, None, GenerationResult]:
    if request.unknown_names:
        # Quoting the passages about "Q3" for a question about "Q5" would mislead.
        names = list(request.unknown_names)
        declined: dict[str, Any] = {
            "generator": "extractive",
            "cited": [],
            "unknown_names": names,
            "reason": "the question names what the collection never mentions",
        }
        return (yield from _not_found(declined, warnings, unknown_names_answer(names)))
    found = extract(
        request.question,
        request.context,
        encode=request.encode,
        model=request.model,
        max_sentences=request.options.max_sentences,
        floor=request.floor,
        unit_floor=request.unit_floor,
        sentence_floor=request.options.min_sentence_similarity,
        said=request.said,
    )
    details: dict[str, Any] = {"generator": "extractive", **found.details}
    if not found.quotes:
        details["reason"] = "no sentence of the passages is relevant enough on its own"
        details["cited"] = []
        return (yield from _not_found(details, warnings))
    unaddressed = _unaddressed(request, [read_as(q) for q in found.quotes])
    if unaddressed:
        # Quoting Ghent's holidays for "the weather in Ghent tomorrow" would mislead.
        details["unaddressed_words"] = unaddressed
        details["reason"] = (
            "the question turns on words the collection never uses, and every quoted "
            "sentence is nearer the question without them"
        )
        details["cited"] = []
        return (yield from _not_found(details, warnings, unaddressed_answer(list(unaddressed))))
    coverage = _coverage(request, found.quotes)
    if coverage is not None:
        details["question_coverage"] = coverage.share
        floor = request.options.min_question_coverage
        if floor is not None and coverage.share < floor and coverage.unknown:
            # Quoting an abstract on breast carcinoma for a question on vasculitis would mislead.
            details["uncovered_words"] = coverage.missing
            details["unknown_words"] = coverage.unknown
            details["reason"] = (
                "the passages quoted from hold too little of the question's words "
                f"({coverage.share:.2f}, weighed by rarity; at least {floor:.2f} needed)"
            )
            details["cited"] = []
            return (yield from _not_found(details, warnings, uncovered_answer(coverage.unknown)))
    text = found.text()
    yield from _pieces(text)
    cited = markers_in(text)
    details["cited"] = cited
    return GenerationResult(
        text=text,
        mode="extractive",
        details=details,
        warnings=warnings,
        cited=cited,
        spans=found.spans(),
    )


def _unaddressed(request: GenerationRequest, quoted: list[str]) -> dict[str, float]:
    """The question's words that the collection lacks and the quoted sentences do not
    speak of, each with how far it draws the question from them (unaddressed.py)."""
    away = request.options.decline_unaddressed
    if request.absent_words is None or request.encode is None or away is None:
        return {}
    tried = words_to_try(request.question, [p.text for p in request.context.passages])
    absent = request.absent_words(tried) if tried else []
    return unaddressed_words(request.question, quoted, absent, encode=request.encode, away=away)


def _coverage(request: GenerationRequest, quotes: list[Quote]) -> Coverage | None:
    """How much of the question the passages quoted from hold (coverage.py); None
    when the collection's word frequencies are not at hand."""
    if request.frequencies is None:
        return None
    markers = {quote.marker for quote in quotes}
    texts = [
        f"{p.candidate.source_name}\n{p.text}"
        for p in request.context.passages
        if p.marker in markers
    ]
    return question_coverage(request.question, texts, frequencies=request.frequencies)


def _pieces(text: str) -> Iterable[str]:
    # Stream extractive answers marker by marker so the UI behaves the same.
    start = 0
    for match in MARKER_RE.finditer(text):
        yield text[start : match.end()]
        start = match.end()
    if start < len(text):
        yield text[start:]


GENERATORS: Registry[AnswerGenerator] = Registry("generator", unknown=UnknownGenerator)
GENERATORS.add("auto", AnswerGenerator(_write_auto, uses_chat=True))
GENERATORS.add("llm", AnswerGenerator(_write_llm, uses_chat=True, requires_chat=True))
GENERATORS.add("extractive", AnswerGenerator(_write_extractive, uses_chat=False))
