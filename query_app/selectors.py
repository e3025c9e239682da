"""Read-side queries over stored answers, with the collections' read permissions.

A run is visible to anyone who can currently read its collection: sharing a
run is sending its link to a colleague with access. Losing access to a
collection hides its runs, one's own included, since they quote its passages.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet

from collections_app.models import Collection, Source
from collections_app.selectors import collections_for_user
from query_app.models import QueryRun


class QueryRunNotFound(Exception):
    """No such run, or the user may not read its collection (both look the same)."""


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
    try:
        return query_runs_for_user(user, mine_only=False).get(pk=run_id)
    except (QueryRun.DoesNotExist, ValueError, TypeError):
        raise QueryRunNotFound(f"no query run {run_id!r}") from None


def query_runs_search_for_user(
    user: User | AnonymousUser, *, text: str = "", collection_slug: str = ""
) -> QuerySet[QueryRun]:
    """The user's own runs for a list page, newest first, without the large JSON columns.

    ``text`` matches the question or the answer (case-insensitive); ``collection_slug``
    keeps one collection's runs. Empty values filter nothing.
    """
    runs = query_runs_for_user(user).defer("trace", "options", "citations")
    if text:
        runs = runs.filter(Q(question__icontains=text) | Q(answer__icontains=text))
    if collection_slug:
        runs = runs.filter(collection__slug=collection_slug)
    return runs


def query_run_source_exists(run: QueryRun, *, source_id: int | None) -> bool:
    """Whether the source a citation of ``run`` points at is still in the run's collection."""
    if source_id is None:
        return False
    return Source.objects.filter(collection=run.collection, pk=source_id).exists()
