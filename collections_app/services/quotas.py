"""Per-user ingestion budgets: bytes and chunks per day, and jobs at once.

Counted over the last 24 hours from the user's ingestion jobs: the bytes they
read (uploads count from the moment they are sent, through ``bytes_reserved``)
and the chunks they wrote. A submission past a budget is refused before
anything is stored (:class:`QuotaExceeded`, a 429 in the API, a message on the
pages); a running job that reaches one fails its remaining sources with the
reason and keeps what it finished. Superusers and the CLI (no user) are exempt;
a budget of 0 is unlimited (``settings.RAG["quotas"]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Sum
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from collections_app.ingestion.loaders.base import format_bytes
from collections_app.ingestion.pipeline import QuotaCheck
from collections_app.models import IngestionJob

WINDOW = timedelta(hours=24)
# The advisory lock's first key: "quota" (the second is the user id).
QUOTA_LOCK_CLASS = 0x71756F74


class QuotaExceeded(Exception):
    """A user's budget does not allow this; the message says which, how much, and what to do."""


@dataclass(frozen=True)
class Quotas:
    """The budgets in force (0 = unlimited)."""

    bytes_per_day: int
    chunks_per_day: int
    concurrent_jobs: int

    @classmethod
    def from_settings(cls) -> Quotas:
        config: dict[str, Any] = settings.RAG.get("quotas", {})
        return cls(
            bytes_per_day=int(config.get("bytes_per_day") or 0),
            chunks_per_day=int(config.get("chunks_per_day") or 0),
            concurrent_jobs=int(config.get("concurrent_jobs") or 0),
        )


@dataclass(frozen=True)
class Usage:
    """What a user's jobs used in the last 24 hours, and how many are unfinished."""

    bytes: int
    chunks: int
    unfinished_jobs: int


def quota_exempt(user: Any) -> bool:
    """Superusers and runs without a user (the CLI, the demo) have no budget."""
    return user is None or not getattr(user, "is_authenticated", False) or user.is_superuser


def user_usage(*, user_id: int, exclude_job_id: int | None = None) -> Usage:
    """The user's usage over the last 24 hours (without one job, when it counts itself)."""
    jobs = IngestionJob.objects.filter(created_by_id=user_id)
    if exclude_job_id is not None:
        jobs = jobs.exclude(pk=exclude_job_id)
    recent = jobs.filter(created_at__gte=timezone.now() - WINDOW).aggregate(
        bytes=Coalesce(Sum(Greatest("bytes_ingested", "bytes_reserved")), 0),
        chunks=Coalesce(Sum("chunks_written"), 0),
    )
    unfinished = jobs.filter(
        status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING]
    ).count()
    return Usage(
        bytes=int(recent["bytes"]), chunks=int(recent["chunks"]), unfinished_jobs=unfinished
    )


def quota_submission_check(*, user: Any, upload_bytes: int = 0) -> None:
    """Refuse a new job (and ``upload_bytes`` of uploads) past the user's budgets.

    Call inside the transaction that records the job: a lock per user makes two
    submissions at once take turns, so they cannot both slip under a budget.
    """
    if quota_exempt(user):
        return
    quotas = Quotas.from_settings()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [QUOTA_LOCK_CLASS, int(user.pk)])
    usage = user_usage(user_id=int(user.pk))
    if quotas.concurrent_jobs and usage.unfinished_jobs >= quotas.concurrent_jobs:
        jobs = "job" if usage.unfinished_jobs == 1 else "jobs"
        raise QuotaExceeded(
            f"you already have {usage.unfinished_jobs} ingestion {jobs} queued or running, the "
            f"most allowed at once is {quotas.concurrent_jobs}; wait for one to finish, then "
            "try again"
        )
    if quotas.chunks_per_day and usage.chunks >= quotas.chunks_per_day:
        raise QuotaExceeded(_chunks_message(quotas, usage.chunks))
    if quotas.bytes_per_day and usage.bytes + upload_bytes > quotas.bytes_per_day:
        raise QuotaExceeded(_bytes_message(quotas, usage.bytes, upload_bytes))


def quota_run_check(*, user: Any, job_id: int | None) -> QuotaCheck | None:
    """A check for the pipeline: (bytes, chunks) of this run → why a budget refuses, or ""."""
    if quota_exempt(user):
        return None
    quotas = Quotas.from_settings()
    if not quotas.bytes_per_day and not quotas.chunks_per_day:
        return None
    user_id = int(user.pk)

    def check(run_bytes: int, run_chunks: int) -> str:
        usage = user_usage(user_id=user_id, exclude_job_id=job_id)
        if quotas.chunks_per_day and usage.chunks + run_chunks > quotas.chunks_per_day:
            return (
                f"not ingested: it would pass your daily budget of {quotas.chunks_per_day:,} "
                f"passages ({usage.chunks + run_chunks:,} with this one in the last 24 hours); "
                "try again later or ask an administrator to raise RAG_QUOTA_CHUNKS_PER_DAY"
            )
        if quotas.bytes_per_day and usage.bytes + run_bytes > quotas.bytes_per_day:
            return (
                "not ingested: it would pass your daily budget of "
                f"{format_bytes(quotas.bytes_per_day)} of documents "
                f"({format_bytes(usage.bytes + run_bytes)} with this one in the last 24 hours); "
                "try again later or ask an administrator to raise RAG_QUOTA_BYTES_PER_DAY"
            )
        return ""

    return check


def _chunks_message(quotas: Quotas, used: int) -> str:
    return (
        f"your daily budget of {quotas.chunks_per_day:,} passages is used up ({used:,} in the "
        "last 24 hours); try again later or ask an administrator to raise "
        "RAG_QUOTA_CHUNKS_PER_DAY"
    )


def _bytes_message(quotas: Quotas, used: int, more: int) -> str:
    adding = f" and this adds {format_bytes(more)}" if more else ""
    return (
        f"your daily budget of {format_bytes(quotas.bytes_per_day)} of documents would be "
        f"exceeded ({format_bytes(used)} in the last 24 hours{adding}); try again later or "
        "ask an administrator to raise RAG_QUOTA_BYTES_PER_DAY"
    )
