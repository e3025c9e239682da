"""Answering services: validate a question, run the pipeline, store the run.

``query_answer`` is what the REST API, the CLI and evaluation call;
``query_answer_stream`` is the same for the browser, yielding events as the
stages finish and the answer streams. Both check the caller's read
permission, validate the input before any work (specific exceptions from
``query_app.exceptions`` with messages fit for users) and store a ``QueryRun``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser

from collections_app.models import Collection
from collections_app.selectors import CollectionNotFound, collection_and_role_for_user
from query_app.chat import ChatClient, OpenAICompatibleChatClient, chat_client_from_settings
from query_app.exceptions import (
    ChatNotConfigured,
    EmptyQuestion,
    QueryError,
    QuestionTooLong,
)
from query_app.models import QueryRun
from query_app.pipeline.generation import LLM_NOT_CONFIGURED
from query_app.pipeline.options import QueryLimits
from query_app.pipeline.profiles import options_resolve
from query_app.pipeline.rerankers import load_cross_encoder
from query_app.pipeline.retrieval import RETRIEVAL_MODES, collection_embedder
from query_app.pipeline.runner import pipeline_run
from query_app.pipeline.types import AnswerEvent, PipelineEvent, RagAnswer, RagQuery

logger = logging.getLogger(__name__)

User = AuthUser | AnonymousUser


@dataclass
class RunEvent:
    """The stored run (last event of a streamed answer)."""

    run: QueryRun
    type: str = "run"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "run": self.run.as_payload()}


QueryEvent = PipelineEvent | RunEvent


def question_validate(question: str, *, limits: QueryLimits) -> str:
    """The question stripped of surrounding blanks; EmptyQuestion / QuestionTooLong otherwise."""
    text = (question or "").strip()
    if not text:
        raise EmptyQuestion("the question is empty")
    if len(text) > limits.max_question_chars:
        raise QuestionTooLong(
            f"the question is {len(text)} characters long; the limit is {limits.max_question_chars}"
        )
    return text


def _collection_for(user: User, collection: Collection | str) -> tuple[Collection, str]:
    """The collection, read fresh (its index version included), and the user's role on it."""
    slug = collection if isinstance(collection, str) else collection.slug
    # Re-checked even for an instance: the permission may have changed.
    found, role = collection_and_role_for_user(user, slug=slug, role="read")
    if isinstance(collection, Collection) and found.pk != collection.pk:
        raise CollectionNotFound(f"no collection {slug!r}")
    return found, role


def query_prepare(
    *,
    user: User,
    collection: Collection | str,
    question: str,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    top_n: int | None = None,
    retrieval_only: bool = False,
    allow_fallback: bool = True,
    stream: bool = False,
    chat: ChatClient | None = None,
) -> RagQuery:
    """Check permission and input and resolve the options; raise before any work is done."""
    target, role = _collection_for(user, collection)
    limits = QueryLimits.from_settings()
    text = question_validate(question, limits=limits)
    name, options = options_resolve(
        profile=profile, overrides=overrides, top_n=top_n, limits=limits
    )
    # Fail on missing models now, not half-way through a streamed answer.
    if options.rerank.kind == "cross-encoder":
        load_cross_encoder(options.rerank.model, options.rerank.max_length)
    if "vector" in RETRIEVAL_MODES[options.retrieval.mode]:
        collection_embedder(target)
    if (
        not retrieval_only
        and not allow_fallback
        and options.generation.generator == "llm"
        and chat is None
    ):
        raise ChatNotConfigured(LLM_NOT_CONFIGURED)
    return RagQuery(
        question=text,
        collection=target,
        options=options,
        profile=name,
        retrieval_only=retrieval_only,
        allow_fallback=allow_fallback,
        scope=f"collection:{target.pk}:role:{role}",
        stream=stream,
    )


def query_answer(
    *,
    user: User,
    collection: Collection | str,
    question: str,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    top_n: int | None = None,
    retrieval_only: bool = False,
    allow_fallback: bool = True,
    store: bool = True,
) -> QueryRun:
    """Answer ``question`` from ``collection`` (a Collection or its slug) and store the run.

    Raises CollectionNotFound (no such collection, or not readable by
    ``user``), and QueryError subclasses: EmptyQuestion, QuestionTooLong,
    TopNOutOfRange, UnknownOption, InvalidOption, UnknownProfile,
    UnknownReranker (and the other Unknown<Component> errors),
    RerankerNotConfigured, EmbeddingProfileMismatch, GenerationFailed.
    With ``store=False`` the returned run is not saved.
    """
    events = query_answer_stream(
        user=user,
        collection=collection,
        question=question,
        profile=profile,
        overrides=overrides,
        top_n=top_n,
        retrieval_only=retrieval_only,
        allow_fallback=allow_fallback,
        store=store,
        stream=False,
    )
    for event in events:
        if isinstance(event, RunEvent):
            return event.run
    raise AssertionError("the pipeline ended without a run")


def query_retrieve(**kwargs: Any) -> QueryRun:
    """``query_answer`` with ``retrieval_only=True``: stages 1-5, no generation, no model call."""
    return query_answer(**{**kwargs, "retrieval_only": True})


def query_answer_stream(
    *,
    user: User,
    collection: Collection | str,
    question: str,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    top_n: int | None = None,
    retrieval_only: bool = False,
    allow_fallback: bool = True,
    store: bool = True,
    stream: bool = True,
) -> Iterator[QueryEvent]:
    """Validate now (raising like ``query_answer``), then return an iterator of events.

    Events: StepEvent after each stage, ContextEvent with the citations once
    passages are assembled, TokenEvent pieces of the answer (``reset`` means
    discard what was streamed), AnswerEvent, and finally RunEvent with the
    stored run. Each has ``as_dict()`` for Server-Sent Events.
    """
    chat = chat_client_from_settings()
    try:
        query = query_prepare(
            user=user,
            collection=collection,
            question=question,
            profile=profile,
            overrides=overrides,
            top_n=top_n,
            retrieval_only=retrieval_only,
            allow_fallback=allow_fallback,
            stream=stream,
            chat=chat,
        )
    except Exception:
        _close(chat)
        raise
    run = QueryRun(
        # Unsaved callers (the CLI's local operator) store runs without an owner.
        user=(
            user
            if not isinstance(user, AnonymousUser)
            and getattr(user, "is_authenticated", False)
            and user.pk
            else None
        ),
        collection=query.collection,
        question=query.question,
        profile=query.profile,
        options=query.options.as_dict(),
        overrides=dict(overrides or {}) | ({"rerank.top_n": top_n} if top_n is not None else {}),
        retrieval_only=retrieval_only,
        allow_fallback=allow_fallback,
        # The collection was read at the start of this request: its version is current.
        index_version=query.collection.index_version,
    )
    return _run_events(query, run, chat=chat, store=store)


def _run_events(
    query: RagQuery, run: QueryRun, *, chat: ChatClient | None, store: bool
) -> Iterator[QueryEvent]:
    started = time.perf_counter()
    answer: RagAnswer | None = None
    try:
        for event in pipeline_run(query, chat=chat):
            if isinstance(event, AnswerEvent):
                answer = event.answer
            yield event
    except QueryError as exc:
        run.mode = QueryRun.Mode.FAILED
        run.error = str(exc)
        run.total_ms = (time.perf_counter() - started) * 1000.0
        if store:
            run.save()
        logger.warning("query run failed: %s", exc)
        raise
    finally:
        _close(chat)
    assert answer is not None
    total_ms = (time.perf_counter() - started) * 1000.0
    run.answer = answer.text
    run.mode = answer.mode
    run.citations = [c.as_dict() for c in answer.citations]
    run.trace = [s.as_dict() for s in answer.trace]
    run.warnings = answer.warnings
    run.groundedness = answer.groundedness
    run.timings = {"total_ms": round(total_ms, 3), "stages": answer.timings["stages"]}
    run.total_ms = total_ms
    run.model_calls = answer.model_calls
    if store:
        run.save()
    yield RunEvent(run)


def _close(chat: ChatClient | None) -> None:
    if isinstance(chat, OpenAICompatibleChatClient):
        chat.close()


def query_run_rerun(
    *,
    user: User,
    run: QueryRun,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> QueryRun:
    """Ask a stored run's question again, with another profile or overrides."""
    return query_answer(
        user=user,
        collection=run.collection,
        question=run.question,
        profile=profile or run.profile,
        overrides=overrides if overrides is not None else run.overrides,
        retrieval_only=run.retrieval_only,
        allow_fallback=run.allow_fallback,
    )
