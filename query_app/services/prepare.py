"""Before any work: the question as callers ask it (``QueryRequest``), checked for
permission and input, its options resolved and its conversation read into a
``RagQuery`` (``query_prepare``); a problem raises here, never half-way through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser

from collections_app.models import Collection
from collections_app.selectors import CollectionNotFound, collection_and_role_for_user
from query_app.chat import ChatClient
from query_app.exceptions import (
    ConversationMismatch,
    EmptyQuestion,
    QuestionTooLong,
    WebFallbackNotAllowed,
)
from query_app.model_settings import options_with_saved_models
from query_app.models import Conversation
from query_app.pipeline.options import QueryLimits
from query_app.pipeline.profiles import options_resolve, profile_names, profile_stages
from query_app.pipeline.runner import pipeline_check
from query_app.pipeline.stages.condense import HISTORY_TURNS as CONDENSE_HISTORY_TURNS
from query_app.pipeline.types import ConversationTurn, RagQuery
from query_app.selectors import conversation_get_for_user, conversation_turns_before

User = AuthUser | AnonymousUser


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


def _collection_for(
    user: User, collection: Collection | str, *, role: str | None = None
) -> tuple[Collection, str]:
    """The collection, read fresh (its index version included), and the user's role on it.

    ``role``: the caller's role on the Collection ``collection``, read with it
    moments ago in this request (the API's permission check): not read again.
    """
    if role is not None and isinstance(collection, Collection):
        return collection, role
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
    # The caller's role on ``collection`` (a Collection), read with it in this
    # request, e.g. by the API's permission check: neither is read again. None:
    # both are read (fresh) when the question is prepared.
    collection_role: str | None = None

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
    """``query_prepare``'s query, and the conversation the answer's run joins (if any)."""
    target, role = _collection_for(user, request.collection, role=request.collection_role)
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
