"""Read-side queries over collections, with per-collection permissions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.db.models import (
    Count,
    F,
    Func,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Lower, NullIf

from collections_app.models import (
    Chunk,
    Collection,
    CollectionMembership,
    IngestionJob,
    QuarantineItem,
    Source,
)
from collections_app.search_index.columns import jsonb_value
from ragsite.rows import model_columns

ROLE_RANK: dict[str, int] = {
    CollectionMembership.Role.READ: 1,
    CollectionMembership.Role.WRITE: 2,
    CollectionMembership.Role.ADMIN: 3,
}


class CollectionNotFound(Exception):
    """No such collection, or the user may not see it (both look the same)."""


def roles_at_least(role: str) -> list[str]:
    """The roles that include ``role`` ("write" → write, admin)."""
    return [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]


def role_allows(current: str | None, role: str) -> bool:
    """Whether holding ``current`` (None: no role) is enough for ``role``."""
    return current is not None and ROLE_RANK[current] >= ROLE_RANK[role]


def collections_for_user(
    user: User | AnonymousUser, *, role: str = "read", include_evaluation: bool = True
) -> QuerySet[Collection]:
    """Collections on which ``user`` has at least ``role`` (superusers: all).

    Lists and pickers pass ``include_evaluation=False``: the evaluation
    harness's corpora are not part of the workspace people work in.
    """
    if not user.is_authenticated:
        return Collection.objects.none()
    if user.is_superuser:
        found = Collection.objects.all()
    else:
        found = Collection.objects.filter(
            Q(memberships__user=user, memberships__role__in=roles_at_least(role))
        ).distinct()
    if not include_evaluation:
        found = found.exclude(purpose=Collection.Purpose.EVALUATION)
    return found


def collection_get_for_user(
    user: User | AnonymousUser, *, slug: str, role: str = "read"
) -> Collection:
    """The collection ``slug`` if ``user`` has ``role`` on it, else CollectionNotFound.

    A collection the user may not read is reported exactly like a missing one,
    so its existence does not leak.
    """
    return collection_and_role_for_user(user, slug=slug, role=role)[0]


def collection_and_role_for_user(
    user: User | AnonymousUser, *, slug: str, role: str = "read"
) -> tuple[Collection, str]:
    """The collection ``slug`` and the user's role on it, in one query; else CollectionNotFound.

    The role must be at least ``role``; superusers are admins of every collection.
    """
    if user.is_authenticated and user.is_superuser:
        found = Collection.objects.filter(slug=slug).first()
        if found is not None:
            return found, CollectionMembership.Role.ADMIN
    elif user.is_authenticated:
        # Every answer and page asks this first: one plain statement, spared
        # Django's query building (a third of a CPU-ms an answer under load).
        columns = model_columns(Collection, "c")
        with connection.cursor() as cur:
            cur.execute(
                _MEMBER_COLLECTION_SQL.format(columns=columns.select),
                [user.pk, slug, roles_at_least(role)],
            )
            row = cur.fetchone()
        if row is not None:
            return columns.instance(row), str(row[columns.count])
    raise CollectionNotFound(f"no collection {slug!r}")


_MEMBER_COLLECTION_SQL = (
    "SELECT {columns}, m.role"
    f" FROM {Collection._meta.db_table} c "
    f"JOIN {CollectionMembership._meta.db_table} m ON m.collection_id = c.id "
    "WHERE m.user_id = %s AND c.slug = %s AND m.role = ANY(%s) LIMIT 1"
)


def indexed_content_signals(source_ids: Sequence[int]) -> list[tuple[int, list[dict[str, Any]]]]:
    """(source id, signals) of the quarantine records of what these sources have indexed.

    A record of the content a source holds now (same hash) means it was indexed
    although the injection validator flagged it. One plain statement: every
    answer asks it (``query_app/pipeline/output_filter.py``).
    """
    if not source_ids:
        return []
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT q.source_id, q.signals FROM {QuarantineItem._meta.db_table} q "
            f"JOIN {Source._meta.db_table} s ON s.id = q.source_id "
            "WHERE q.source_id = ANY(%s) AND q.content_hash = s.content_hash",
            [list(source_ids)],
        )
        rows = cur.fetchall()
    return [(source_id, jsonb_value(signals) or []) for source_id, signals in rows]


def user_role(user: User | AnonymousUser, collection: Collection) -> str | None:
    """The user's role on the collection ("read" / "write" / "admin"), or None."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return CollectionMembership.Role.ADMIN
    membership = CollectionMembership.objects.filter(collection=collection, user=user).first()
    return membership.role if membership else None


def user_can(user: User | AnonymousUser, collection: Collection, role: str) -> bool:
    return role_allows(user_role(user, collection), role)


# Who may review the quarantine of a collection: approving indexes content the
# injection validator flagged, so it takes the strongest role.
REVIEW_ROLE = CollectionMembership.Role.ADMIN


def collection_overviews(
    user: User | AnonymousUser, *, include_evaluation: bool = False
) -> QuerySet[Collection]:
    """The user's collections with source/chunk counts, last ingestion and latest job status.

    Evaluation collections only with ``include_evaluation``.
    """
    sources = Source.objects.filter(collection=OuterRef("pk")).values("collection")
    latest_job = IngestionJob.objects.filter(collection=OuterRef("pk")).order_by("-created_at")
    pending = QuarantineItem.objects.filter(
        collection=OuterRef("pk"), review_status=QuarantineItem.ReviewStatus.PENDING
    ).values("collection")
    return collections_for_user(user, include_evaluation=include_evaluation).annotate(
        source_count=Coalesce(
            Subquery(sources.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0
        ),
        chunk_count=Coalesce(
            Subquery(
                sources.annotate(n=Sum("chunk_count")).values("n"), output_field=IntegerField()
            ),
            0,
        ),
        failed_count=Coalesce(
            Subquery(
                sources.filter(status=Source.Status.FAILED).annotate(n=Count("pk")).values("n"),
                output_field=IntegerField(),
            ),
            0,
        ),
        quarantined_count=Coalesce(
            Subquery(pending.annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0
        ),
        last_ingested=Subquery(sources.annotate(t=Max("ingested_at")).values("t")),
        job_status=Subquery(latest_job.values("status")[:1]),
    )


# Orders of the sources table, by the column a person clicks; "-" = descending.
# Ties fall back to the name so pages never shuffle.
_SOURCE_SORT_KEYS: dict[str, Any] = {
    # As Source.display_name reads: the title, else the last part of the location.
    "name": Lower(
        Coalesce(
            NullIf("title", Value("")),
            NullIf(
                Func(
                    F("location"), Value(r"^(?:upload:|.*/)"), Value(""), function="regexp_replace"
                ),
                Value(""),
            ),
            "location",
        )
    ),
    "status": F("status"),
    "size": F("size_bytes"),
    "passages": F("chunk_count"),
    "ingested": F("ingested_at"),
}
SOURCE_ORDERS = frozenset([*_SOURCE_SORT_KEYS, *(f"-{key}" for key in _SOURCE_SORT_KEYS)])
DEFAULT_SOURCE_ORDER = "name"


def collection_sources(
    collection: Collection, *, search: str = "", order: str = DEFAULT_SOURCE_ORDER
) -> QuerySet[Source]:
    """The collection's sources for the sources table (without their text).

    ``search`` matches title or location, case-insensitively; ``order`` is one
    of :data:`SOURCE_ORDERS` (sources never ingested sort last by date).
    """
    sources = collection.sources.defer("text", "metadata")
    if search:
        sources = sources.filter(Q(title__icontains=search) | Q(location__icontains=search))
    descending = order.startswith("-")
    key = _SOURCE_SORT_KEYS.get(order.lstrip("-"), _SOURCE_SORT_KEYS[DEFAULT_SOURCE_ORDER])
    first = key.desc(nulls_last=True) if descending else key.asc(nulls_last=True)
    return sources.order_by(first, _SOURCE_SORT_KEYS["name"].asc(), "pk")


def collection_source_count(collection: Collection) -> int:
    """How many sources the collection holds."""
    return collection.sources.count()


def collection_last_ingested(collection: Collection) -> datetime | None:
    """When a source of the collection was last ingested, whatever started it."""
    latest: datetime | None = collection.sources.aggregate(latest=Max("ingested_at"))["latest"]
    return latest


def collection_jobs(collection: Collection, *, limit: int = 5) -> list[IngestionJob]:
    """The collection's most recent ingestion jobs, newest first."""
    return list(collection.jobs.select_related("created_by")[:limit])


@dataclass
class JobRow:
    """One source of a job as the progress panel shows it."""

    name: str
    status: str
    reason: str = ""
    chunks: int = 0
    source_id: int | None = None
    signals: tuple[str, ...] = ()


def job_rows(job: IngestionJob) -> list[JobRow]:
    """Per-source statuses of a job: from its report once it has one, else what was asked."""
    reported = (job.report or {}).get("sources") or []
    if reported:
        return [
            JobRow(
                name=_short(s.get("location", "")),
                status=s.get("status", ""),
                reason=s.get("reason", ""),
                chunks=int(s.get("chunks_written") or 0),
                source_id=s.get("source_id"),
                signals=tuple(s.get("signals") or ()),
            )
            for s in reported
        ]
    request = job.request or {}
    names = dict(
        Source.objects.filter(
            collection_id=job.collection_id, pk__in=request.get("source_ids", [])
        ).values_list("pk", "location")
    )
    rows = [JobRow(name=_short(loc), status="queued", source_id=pk) for pk, loc in names.items()]
    rows += [JobRow(name=loc, status="queued") for loc in request.get("locations", [])]
    return rows


def _short(location: str) -> str:
    if location.startswith("upload:"):
        return location.removeprefix("upload:")
    return location


def reviewable_collections(
    user: User | AnonymousUser, *, include_evaluation: bool = False
) -> QuerySet[Collection]:
    """Collections whose quarantine the user reviews (evaluation ones if asked for)."""
    return collections_for_user(user, role=REVIEW_ROLE, include_evaluation=include_evaluation)


def quarantine_queue(
    user: User | AnonymousUser,
    *,
    status: str = QuarantineItem.ReviewStatus.PENDING,
    include_evaluation: bool = False,
) -> QuerySet[QuarantineItem]:
    """Quarantine items of the collections the user reviews, newest first.

    The evaluation harness's corpora hold planted instructions on purpose; their
    items stay out of the queue unless ``include_evaluation`` asks for them.
    """
    reviewable = reviewable_collections(user, include_evaluation=include_evaluation)
    items = QuarantineItem.objects.filter(collection__in=reviewable)
    if status:
        items = items.filter(review_status=status)
    return items.select_related("collection", "source", "provenance", "reviewer")


def quarantine_pending_count(user: User | AnonymousUser) -> int:
    """How many workspace items await this user's review (shown in the navigation)."""
    if not user.is_authenticated:
        return 0
    return quarantine_queue(user).count()


def chunk_document_sizes(*, chunk_ids: Sequence[str]) -> dict[str, int]:
    """How many passages the document of each chunk has (at least 1), by chunk id."""
    if not chunk_ids:
        return {}
    rows = Chunk.objects.filter(pk__in=list(chunk_ids)).order_by()
    return {
        cid: max(int(count or 0), 1) for cid, count in rows.values_list("id", "source__chunk_count")
    }
