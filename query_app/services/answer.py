"""Answering: run the pipeline for a prepared question, stream its events and store
the run (``query_answer``, ``query_answer_stream``, ``query_retrieve``, ``query_run_rerun``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser

from query_app.chat import ChatClient, OpenAICompatibleChatClient, chat_client_from_settings
from query_app.exceptions import QueryError
from query_app.models import Conversation, QueryRun
from query_app.pipeline.runner import pipeline_run
from query_app.pipeline.types import AnswerEvent, PipelineEvent, RagAnswer, RagQuery
from query_app.run_writer import run_store
from query_app.services.prepare import QueryRequest, User, _query_prepare

logger = logging.getLogger(__name__)


@dataclass
class RunEvent:
    """The stored run (last event of a streamed answer)."""

    run: QueryRun
    type: str = "run"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "run": self.run.as_payload()}


QueryEvent = PipelineEvent | RunEvent


def query_answer(
    *, user: User, request: QueryRequest, store: bool = True, store_later: bool = False
) -> QueryRun:
    """Answer ``request`` and store the run.

    Raises CollectionNotFound (no such collection, or not readable by
    ``user``), and QueryError subclasses: EmptyQuestion, QuestionTooLong,
    TopNOutOfRange, UnknownOption, InvalidOption, UnknownProfile,
    UnknownReranker (and the other Unknown<Component> errors),
    RerankerNotConfigured, EmbeddingProfileMismatch, GenerationFailed,
    ConversationMismatch; ConversationNotFound (``request.conversation`` is not
    the caller's own). With ``store=False`` the returned run is not saved; a
    stored run is a turn of ``request.conversation``, or starts a conversation
    when the caller is a signed-in user. With ``store_later`` the run has its id
    and time when returned, and its row is written moments later by this
    process's writer thread (``query_app/run_writer.py``; never dropped).
    """
    events = query_answer_stream(
        user=user,
        request=dataclasses.replace(request, stream=False),
        store=store,
        store_later=store_later,
    )
    for event in events:
        if isinstance(event, RunEvent):
            return event.run
    raise AssertionError("the pipeline ended without a run")


def query_retrieve(*, user: User, request: QueryRequest, store: bool = True) -> QueryRun:
    """``query_answer`` retrieval-only: stages 1-5, no generation, no model call."""
    return query_answer(user=user, request=request.as_retrieval(), store=store)


def query_answer_stream(
    *, user: User, request: QueryRequest, store: bool = True, store_later: bool = False
) -> Iterator[QueryEvent]:
    """Validate now (raising like ``query_answer``), then return an iterator of events.

    Events: StepEvent after each stage, ContextEvent with the citations once
    passages are assembled, TokenEvent pieces of the answer (``reset`` means
    discard what was streamed), AnswerEvent, and finally RunEvent with the
    stored run. Each has ``as_dict()`` for Server-Sent Events.
    """
    chat = chat_client_from_settings()
    try:
        query, conversation = _query_prepare(user=user, request=request, chat=chat)
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
        overrides=request.all_overrides(),
        retrieval_only=request.retrieval_only,
        allow_fallback=request.allow_fallback,
        # The collection was read at the start of this request: its version is current.
        index_version=query.collection.index_version,
    )
    return _run_events(
        query, run, chat=chat, store=store, later=store_later, conversation=conversation
    )


def _run_events(
    query: RagQuery,
    run: QueryRun,
    *,
    chat: ChatClient | None,
    store: bool,
    later: bool,
    conversation: Conversation | None,
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
            run_store(run, conversation=conversation, later=later)
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
    run.standalone_question = next(
        (str(s.details.get("standalone") or "") for s in answer.trace if s.stage == "condense"),
        "",
    )
    if store:
        run_store(run, conversation=conversation, later=later)
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
    """Ask a stored run's question again, with another profile or overrides.

    A follow-up re-run by its owner is read with the turns before it, as it was
    the first time, and joins its conversation. Anyone else re-runs the
    standalone question the follow-up was read as, in a conversation of their own.
    """
    own_turn = run.conversation_id is not None and run.user_id == getattr(user, "pk", None)
    request = QueryRequest(
        collection=run.collection,
        question=run.question if own_turn else (run.standalone_question or run.question),
        profile=profile or run.profile,
        overrides=overrides if overrides is not None else run.overrides,
        retrieval_only=run.retrieval_only,
        allow_fallback=run.allow_fallback,
        conversation=run.conversation_id if own_turn else None,
        before_turn=run.pk if own_turn else None,
    )
    return query_answer(user=user, request=request)
