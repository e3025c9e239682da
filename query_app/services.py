"""Answering services: validate a question, run the pipeline, store the run.

``query_answer`` is what the REST API, the CLI and evaluation call;
``query_answer_stream`` is the same for the browser, yielding events as the
stages finish and the answer streams. Both check the caller's read
permission, validate the input before any work (specific exceptions from
``query_app.exceptions`` with messages fit for users) and store a ``QueryRun``.
"""

from __future__ import annotations

import dataclasses
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
    ConfigurationError,
    ConversationMismatch,
    EmptyQuestion,
    QueryError,
    QuestionTooLong,
    WebFallbackNotAllowed,
)
from query_app.model_settings import options_with_saved_models
from query_app.models import Conversation, QueryRun
from query_app.pipeline.assembly import AssembledContext, Passage
from query_app.pipeline.groundedness import GroundednessResult as GroundednessVerdict
from query_app.pipeline.groundedness import check_groundedness
from query_app.pipeline.lexical import markers_in
from query_app.pipeline.options import QueryLimits, QueryOptions
from query_app.pipeline.profiles import (
    options_admin_only,
    options_resolve,
    profile_names,
    profile_stages,
)
from query_app.pipeline.prompts import passage_block
from query_app.pipeline.runner import pipeline_check, pipeline_run, pipeline_stages
from query_app.pipeline.stages import MissingPart, StageCheck
from query_app.pipeline.stages.condense import HISTORY_TURNS as CONDENSE_HISTORY_TURNS
from query_app.pipeline.types import (
    AnswerEvent,
    Candidate,
    ConversationTurn,
    PipelineEvent,
    RagAnswer,
    RagQuery,
)
from query_app.run_writer import run_store
from query_app.selectors import conversation_get_for_user, conversation_turns_before

logger = logging.getLogger(__name__)

__all__ = [
    "ConfigurationError",
    "GroundednessVerdict",
    "JudgedPassage",
    "MissingPart",
    "ProfileNeeds",
    "QueryEvent",
    "QueryLimits",
    "QueryOptions",
    "QueryRequest",
    "RunEvent",
    "answer_markers",
    "groundedness_judge",
    "options_admin_only",
    "profile_names",
    "profile_needs",
    "profile_resolve",
    "query_answer",
    "query_answer_stream",
    "query_prepare",
    "query_retrieve",
    "query_run_rerun",
]

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


@dataclass(frozen=True)
class QueryRequest:
    """One question as a caller asks it: where, what, with which profile and options."""

    collection: Collection | str  # a Collection or its slug
    question: str
    profile: str | None = None  # None: the default profile
    overrides: Mapping[str, Any] | None = None  # option overrides, nested or dotted keys
    top_n: int | None = None  # shorthand for rerank.top_n
    retrieval_only: bool = False  # stages 1-5 only: no generation, no model call
    allow_fallback: bool = True  # extractive answer when the chat model fails
    stream: bool = False  # generate token by token (the browser)
    # Continue this conversation (its id; the caller's own): the question is read
    # in the light of its earlier turns and stored as its next turn. None: a
    # signed-in caller's stored run starts a new conversation.
    conversation: int | None = None
    # With ``conversation``: only the turns before this run count (re-running a turn).
    before_turn: int | None = None
    # Search the web once the corrective budget is spent without correct evidence
    # (profiles with the web node, on a collection that allows it); off by default.
    web_fallback: bool = False

    def all_overrides(self) -> dict[str, Any]:
        """``overrides`` with the shorthands (``top_n``, ``web_fallback``) as options."""
        return (
            dict(self.overrides or {})
            | ({"rerank.top_n": self.top_n} if self.top_n is not None else {})
            | ({"web.enabled": True} if self.web_fallback else {})
        )

    def as_retrieval(self) -> QueryRequest:
        return dataclasses.replace(self, retrieval_only=True)


def query_prepare(*, user: User, request: QueryRequest, chat: ChatClient | None = None) -> RagQuery:
    """Check permission and input and resolve the options; raise before any work is done."""
    return _query_prepare(user=user, request=request, chat=chat)[0]


def _conversation_history(
    user: User, request: QueryRequest, collection: Collection
) -> tuple[Conversation | None, tuple[ConversationTurn, ...]]:
    """The conversation a follow-up continues (the caller's own) and its last turns."""
    if request.conversation is None:
        return None, ()
    conversation = conversation_get_for_user(user, conversation_id=request.conversation)
    if conversation.collection_id != collection.pk:
        raise ConversationMismatch(
            f"conversation {conversation.pk} is about the collection "
            f"{conversation.collection.slug!r}; ask its follow-ups there"
        )
    turns = conversation_turns_before(
        conversation, before_run_id=request.before_turn, limit=CONDENSE_HISTORY_TURNS
    )
    history = tuple(
        ConversationTurn(
            question=t.question, answer=t.answer, mode=t.mode, standalone=t.standalone_question
        )
        for t in turns
    )
    return conversation, history


def _query_prepare(
    *, user: User, request: QueryRequest, chat: ChatClient | None
) -> tuple[RagQuery, Conversation | None]:
    target, role = _collection_for(user, request.collection)
    limits = QueryLimits.from_settings()
    text = question_validate(request.question, limits=limits)
    name, options = options_resolve(
        profile=request.profile,
        overrides={**(request.overrides or {}), "web.enabled": True}
        if request.web_fallback
        else request.overrides,
        top_n=request.top_n,
        limits=limits,
        # Some options name files on the server: only administrators set them.
        admin=bool(getattr(user, "is_superuser", False)),
    )
    options = options_with_saved_models(options)
    conversation, history = _conversation_history(user, request, target)
    stages = profile_stages(name)
    if history:
        # Only a follow-up runs condense: a single question keeps its trace.
        stages = ("condense", *stages)
    query = RagQuery(
        question=text,
        collection=target,
        options=options,
        profile=name,
        stages=stages,
        history=history,
        retrieval_only=request.retrieval_only,
        allow_fallback=request.allow_fallback,
        scope=f"collection:{target.pk}:role:{role}",
        stream=request.stream,
    )
    if options.web.enabled and "web" not in stages:
        raise WebFallbackNotAllowed(
            f"the web fallback runs in the profiles that search the web ("
            f"{', '.join(n for n in profile_names() if 'web' in profile_stages(n))}); "
            f"profile {name!r} does not"
        )
    # Fail on missing models (and a collection refusing the web fallback) now,
    # not half-way through a streamed answer.
    pipeline_check(query, chat=chat)
    return query, conversation


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


# --- What evaluation (and any other caller outside the pipeline) may use -------


def profile_resolve(
    *,
    profile: str | None,
    overrides: Mapping[str, Any] | None = None,
    limits: QueryLimits | None = None,
) -> tuple[str, QueryOptions]:
    """The profile's name and its options with ``overrides`` applied (raises QueryError).

    Models saved on the model settings page are included, as in ``query_prepare``.
    """
    name, options = options_resolve(profile=profile, overrides=overrides, limits=limits)
    return name, options_with_saved_models(options)


@dataclass
class ProfileNeeds:
    """What a profile's options need from this deployment, found without running anything."""

    # The first missing part (a model that is not configured), or None.
    problem: ConfigurationError | None
    # The parts that call the chat model, in words ("its 'llm' reranker").
    chat_uses: list[str]
    # Optional parts missing here that the profile runs without (each stage's
    # trace step then warns and says how to enable them).
    runs_without: list[MissingPart] = dataclasses.field(default_factory=list)


def profile_needs(
    *, profile: str, options: QueryOptions, chat_configured: bool = True
) -> ProfileNeeds:
    """Ask every stage of ``profile`` what ``options`` need: missing models, chat model use.

    ``chat_configured`` is what the stages assume about the chat model (by
    default that it is there: evaluation weighs ``chat_uses`` itself; the ask
    page passes the truth, so a part that needs it shows as run without).
    """
    check = StageCheck(options=options, chat_configured=chat_configured)
    problem: ConfigurationError | None = None
    uses: list[str] = []
    without: list[MissingPart] = []
    for stage in pipeline_stages(profile_stages(profile)):
        try:
            stage.check(check)
        except ConfigurationError as exc:
            problem = problem or exc
        else:
            without += stage.runs_without(check)
        use = stage.chat_use(options)
        if use:
            uses.append(use)
    return ProfileNeeds(problem=problem, chat_uses=uses, runs_without=without)


@dataclass(frozen=True)
class JudgedPassage:
    """A passage an answer cites, as the groundedness judge reads it."""

    marker: int
    text: str
    source: str = ""
    title: str = ""
    page: int | None = None


def groundedness_judge(
    *,
    answer: str,
    passages: list[JudgedPassage],
    checker: str,
    chat: ChatClient | None,
    min_support: float,
) -> GroundednessVerdict:
    """Judge ``answer`` against ``passages`` with the named checker, as the pipeline's stage does.

    The chat model reads each passage in the same delimited block the answer
    was written from.
    """
    context = AssembledContext(layout=[p.marker for p in passages])
    for p in passages:
        candidate = Candidate(
            chunk_id="",
            source_id=0,
            source_location=p.source,
            source_title=p.title,
            text=p.text,
            char_start=0,
            char_end=len(p.text),
            page=p.page,
        )
        block = passage_block(p.marker, candidate)
        context.passages.append(Passage(p.marker, candidate, p.text, block, 0))
    return check_groundedness(
        answer=answer, context=context, checker=checker, chat=chat, min_support=min_support
    )


def answer_markers(text: str) -> list[int]:
    """The ``[n]`` citation markers of an answer, in order of appearance."""
    return markers_in(text)
