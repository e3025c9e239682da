"""The job table as the queue: record a job (once per submission), wake a worker, claim fairest first."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from collections_app.models import Collection, IngestionJob
from collections_app.services.quotas import quota_submission_check

logger = logging.getLogger(__name__)

# Same window as ingestion_job_create: a token reused later starts a new job.
REQUEST_KEY_WINDOW = timedelta(minutes=10)


def ingestion_job_for_request(*, collection: Collection, request_key: str) -> IngestionJob | None:
    """The job an identical earlier submission started, if any.

    An advisory lock on the token serialises two copies of the same submission
    arriving at once, so the second always sees the first one's job.
    """
    if not request_key:
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"ingest:{request_key}"])
    return IngestionJob.objects.filter(
        collection=collection,
        request_key=request_key,
        created_at__gte=timezone.now() - REQUEST_KEY_WINDOW,
    ).first()


def ingestion_job_create(
    *,
    collection: Collection,
    user: User | None = None,
    locations: Sequence[str] = (),
    source_ids: Sequence[int] = (),
    chunking: str | None = None,
    reindex: bool = False,
    request_key: str = "",
    upload_bytes: int = 0,
    operator: bool = False,
    foreground: bool = False,
) -> tuple[IngestionJob, bool]:
    """Record a job; a repeated ``request_key`` within 10 minutes returns the first job.

    Returns (job, created). Raises :class:`QuotaExceeded` when the user's budgets
    do not allow another job. ``operator``: asked by the local operator (the
    CLI), whose server paths are not limited to the allowed roots.
    ``foreground``: run by the command that made it, not by a worker.
    """
    with transaction.atomic():
        earlier = ingestion_job_for_request(collection=collection, request_key=request_key)
        if earlier is not None:
            return earlier, False
        quota_submission_check(user=user, upload_bytes=upload_bytes)
        request: dict[str, Any] = {
            "locations": list(locations),
            "source_ids": list(source_ids),
            "chunking": chunking,
            "reindex": reindex,
        }
        if operator:
            request["operator"] = True
        if foreground:
            request["foreground"] = True
        job = IngestionJob.objects.create(
            collection=collection,
            created_by=user if user is not None and user.is_authenticated else None,
            request=request,
            sources_total=len(locations) + len(source_ids),
            request_key=request_key,
            bytes_reserved=upload_bytes,
        )
    return job, True


def ingestion_job_enqueue(**kwargs: Any) -> tuple[IngestionJob, bool]:
    """Create a job and wake a Celery worker once the transaction commits."""
    from collections_app.tasks import ingestion_job_run_task

    job, created = ingestion_job_create(**kwargs)
    if created:
        ingestion_job_run_task.delay_on_commit(job.pk)
    return job, created


def ingestion_jobs_wake(*, messages: int = 1) -> None:
    """Wake ``messages`` workers to look for queued jobs and parts (after the current
    transaction commits)."""
    from collections_app.tasks import ingestion_job_run_task

    def publish() -> None:
        try:
            for _ in range(messages):
                ingestion_job_run_task.delay(0)
        except Exception:  # the broker is down: the next periodic check tries again
            logger.exception("could not wake a worker for queued ingestion jobs")

    transaction.on_commit(publish)


# Fairest first: the owner (user; the collection for jobs without one) with the
# fewest running jobs, then the owner served longest ago, then the oldest job.
CLAIM_SQL = """
WITH owners AS (
    SELECT coalesce(created_by_id, -collection_id) AS owner,
           count(*) FILTER (WHERE status = 'running') AS running,
           max(started_at) AS last_start
    FROM collections_app_ingestionjob
    WHERE status = 'running' OR started_at >= %s
    GROUP BY 1
)
SELECT j.id FROM collections_app_ingestionjob j
LEFT JOIN owners o ON o.owner = coalesce(j.created_by_id, -j.collection_id)
WHERE j.status = 'queued'
ORDER BY coalesce(o.running, 0), o.last_start ASC NULLS FIRST, j.created_at, j.id
LIMIT 1
FOR UPDATE OF j SKIP LOCKED
"""


def ingestion_job_claim(*, worker: str, job_id: int | None = None) -> IngestionJob | None:
    """Mark the fairest queued job (or queued job ``job_id``) running for ``worker``.

    Two workers claiming at once never get the same job (rows locked by one are
    skipped by the other). Returns None when there is nothing to claim.
    """
    with transaction.atomic(), connection.cursor() as cur:
        if job_id is None:
            cur.execute(CLAIM_SQL, [timezone.now() - timedelta(days=1)])
        else:
            cur.execute(
                "SELECT id FROM collections_app_ingestionjob WHERE id = %s AND status = 'queued' "
                "FOR UPDATE SKIP LOCKED",
                [job_id],
            )
        row = cur.fetchone()
        if row is None:
            return None
        now = timezone.now()
        IngestionJob.objects.filter(pk=row[0]).update(
            status=IngestionJob.Status.RUNNING,
            worker=worker,
            heartbeat_at=now,
            started_at=now,
            attempts=F("attempts") + 1,
            current="starting",
        )
    return IngestionJob.objects.select_related("collection", "created_by").get(pk=row[0])
