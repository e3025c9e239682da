"""Read-side queries over stored answers, with the collections' read permissions.

A run is visible to anyone who can currently read its collection: sharing a
run is sending its link to a colleague with access. Losing access to a
collection hides its runs, one's own included, since they quote its passages.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Prefetch, Q, QuerySet

from collections_app.models import Chunk, Collection, Source
from collections_app.selectors import collections_for_user
from query_app.models import Conversation, QueryRun
from query_app.run_writer import run_written


class QueryRunNotFound(Exception):
    """No such run, or the user may not read its collection (both look the same)."""


class ConversationNotFound(Exception):
    """No such conversation, or not the user's own (both look the same)."""


def query_runs_for_user(
    user: User | AnonymousUser,
    *,
    collection: Collection | None = None,
    mine_only: bool = True,
) -> QuerySet[QueryRun]:
    """Runs in collections ``user`` can read, newest first (by default only their own)."""
    runs = QueryRun.objects.filter(collection__in=collections_for_user(user, role="read"))
    if mine_only:
        runs = runs.filter(user=user) if user.is_authenticated else runs.none()
    if collection is not None:
        runs = runs.filter(collection=collection)
    return runs.select_related("collection", "user")


def query_run_get_for_user(user: User | AnonymousUser, *, run_id: int) -> QueryRun:
    """The run ``run_id`` if ``user`` can read its collection, else QueryRunNotFound."""
    if isinstance(run_id, int):
        # Answered by this process moments ago: its row may still be on its way.
        run_written(run_id)
    try:
        return query_runs_for_user(user, mine_only=False).get(pk=run_id)
    except (QueryRun.DoesNotExist, ValueError, TypeError):
        raise QueryRunNotFound(f"no query run {run_id!r}") from None


def query_run_source_exists(run: QueryRun, *, source_id: int | None) -> bool:
    """Whether the source a citation of ``run`` points at is still in the run's collection."""
    if source_id is None:
        return False
    return Source.objects.filter(collection=run.collection, pk=source_id).exists()


def query_run_passage_text(run: QueryRun, *, chunk_id: str) -> str | None:
    """The text of a chunk a citation of ``run`` points at, if it is still in the collection."""
    text = (
        Chunk.objects.filter(collection=run.collection, pk=chunk_id)
        .values_list("text", flat=True)
        .first()
    )
    return None if text is None else str(text)


# The columns a list of turns shows (the large JSON columns stay in the database).
_TURN_LIST_FIELDS = (
    "id",
    "conversation_id",
    "collection_id",
    "user_id",
    "question",
    "standalone_question",
    "answer",
    "mode",
    "profile",
    "retrieval_only",
    "error",
    "created_at",
)


def conversations_for_user(user: User | AnonymousUser) -> QuerySet[Conversation]:
    """The user's own conversations in collections they can still read, last active first.

    Conversations are private: unlike a run's permalink, nobody else may see or
    continue them.
    """
    if not user.is_authenticated or user.pk is None:
        # The command line's local operator is not a stored account: it owns nothing.
        return Conversation.objects.none()
    return Conversation.objects.filter(
        owner=user, collection__in=collections_for_user(user, role="read")
    ).select_related("collection")


def conversation_get_for_user(user: User | AnonymousUser, *, conversation_id: int) -> Conversation:
    """The user's own conversation ``conversation_id``, else ConversationNotFound."""
    try:
        return conversations_for_user(user).get(pk=conversation_id)
    except (Conversation.DoesNotExist, ValueError, TypeError):
        raise ConversationNotFound(f"no conversation {conversation_id!r}") from None


def conversations_search_for_user(
    user: User | AnonymousUser, *, text: str = "", collection_slug: str = ""
) -> QuerySet[Conversation]:
    """The user's conversations for the history page, each with its turns in order.

    ``text`` keeps the conversations where a question or an answer contains it
    (case-insensitive); ``collection_slug`` keeps one collection's. The turns
    are prefetched without their large JSON columns.
    """
    conversations = (
        conversations_for_user(user)
        .annotate(turn_count=Count("turns"))
        .order_by("-updated_at", "-id")
    )
    if text:
        matching = QueryRun.objects.filter(
            Q(question__icontains=text) | Q(answer__icontains=text)
        ).values("conversation_id")
        conversations = conversations.filter(pk__in=matching)
    if collection_slug:
        conversations = conversations.filter(collection__slug=collection_slug)
    turns = QueryRun.objects.only(*_TURN_LIST_FIELDS).order_by("created_at", "id")
    return conversations.prefetch_related(Prefetch("turns", queryset=turns))


def conversation_turns(conversation: Conversation) -> QuerySet[QueryRun]:
    """The conversation's turns, first asked first (every column: the page renders answers)."""
    return conversation.turns.select_related("collection", "user").order_by("created_at", "id")


def conversation_turns_before(
    conversation: Conversation, *, before_run_id: int | None = None, limit: int
) -> list[QueryRun]:
    """The last ``limit`` turns (before run ``before_run_id`` if given), oldest first."""
    turns = conversation.turns.only(*_TURN_LIST_FIELDS).order_by("-created_at", "-id")
    if before_run_id is not None:
        turns = turns.filter(id__lt=before_run_id)
    return list(turns[:limit])[::-1]
