"""Recovery: running jobs (and parts of jobs) whose worker died are resumed, or failed for good."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import DatabaseError, transaction
from django.utils import timezone

from collections_app.models import IngestionJob, IngestionPart, Source
from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure
from collections_app.services.jobs.fanout import (
    UNFINISHED,
    ingestion_part_end,
    part_failed_report,
    part_requeue,
)
from collections_app.services.jobs.heartbeat import JobTiming, worker_gone
from collections_app.services.jobs.merge import split_job_finish
from collections_app.services.jobs.queue import ingestion_jobs_wake
from collections_app.services.jobs.run import carried_outcomes, job_requeue

logger = logging.getLogger(__name__)


@dataclass
class ReconcileOutcome:
    """What one check of the running jobs did."""

    resumed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    # Parts of split jobs (their ids), and split jobs finished for a dead worker.
    resumed_parts: list[int] = field(default_factory=list)
    failed_parts: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    woke: bool = False


def ingestion_jobs_reconcile(*, job_id: int | None = None) -> ReconcileOutcome:
    """Find running jobs whose worker stopped; queue them to resume, or fail them for good.

    A worker stopped when its heartbeat is older than ``stale_s``, or when it
    ran on this machine and its process is gone. A job run by a command (not a
    worker) is failed, not resumed; a job tried ``max_attempts`` times is failed
    with the reason, its unfinished sources marked failed. When jobs wait and
    none is running, a worker is woken (its message may have been lost with the
    one that died). ``job_id`` limits the check to one job (a page reading it).

    The parts of a split job are checked the same way, each on its own; a
    split job whose parts all ended while its finishing worker died is finished.
    """
    timing = JobTiming.from_settings()
    now = timezone.now()
    outcome = ReconcileOutcome()
    with transaction.atomic():
        running = IngestionJob.objects.select_for_update(skip_locked=True).filter(
            status=IngestionJob.Status.RUNNING, parts_total=0
        )
        if job_id is not None:
            running = running.filter(pk=job_id)
        for job in running:
            why = worker_gone(job, now=now, timing=timing)
            if not why:
                continue
            if (job.request or {}).get("foreground"):
                _job_abandon(job, reason=f"the command running it stopped ({why})")
                outcome.failed.append(job.pk)
            elif job.attempts >= timing.max_attempts:
                _job_abandon(
                    job,
                    reason=(
                        f"it was interrupted {job.attempts} times ({why}); the sources it "
                        "finished are kept, start it again to finish the rest"
                    ),
                )
                outcome.failed.append(job.pk)
            else:
                job_requeue(job, worker=job.worker, note=why)
                outcome.resumed.append(job.pk)
                logger.warning("ingestion job %s: %s; it will resume", job.pk, why)
    _parts_reconcile(job_id=job_id, now=now, timing=timing, outcome=outcome)
    resumed = outcome.resumed or outcome.resumed_parts
    if job_id is None or resumed:
        waiting = IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).exists() or (
            IngestionPart.objects.filter(
                status=IngestionPart.Status.QUEUED, job__status=IngestionJob.Status.RUNNING
            ).exists()
        )
        busy = IngestionJob.objects.filter(
            status=IngestionJob.Status.RUNNING,
            heartbeat_at__gte=now - timedelta(seconds=timing.stale_s),
        ).exists()
        if waiting and (resumed or not busy):
            ingestion_jobs_wake()
            outcome.woke = True
    for pk in outcome.failed:
        _collection_index_settle(pk)
    return outcome


def ingestion_job_refresh(*, job: IngestionJob) -> IngestionJob:
    """``job`` as it stands, after checking that a running job's worker is still alive.

    Called when a page or the API reads a job: a job whose worker died is
    resumed (or failed) now instead of showing "running" forever.
    """
    if job.status != IngestionJob.Status.RUNNING:
        return job
    timing = JobTiming.from_settings()
    now = timezone.now()
    if job.parts_total:
        if not _split_job_stuck(job, now=now, timing=timing):
            return job
    elif not worker_gone(job, now=now, timing=timing):
        return job
    ingestion_jobs_reconcile(job_id=job.pk)
    job.refresh_from_db()
    return job


def _parts_reconcile(
    *, job_id: int | None, now: datetime, timing: JobTiming, outcome: ReconcileOutcome
) -> None:
    """Queue again (or fail, after ``max_attempts``) the parts whose worker stopped."""
    running = IngestionPart.objects.filter(
        status=IngestionPart.Status.RUNNING, job__status=IngestionJob.Status.RUNNING
    ).select_related("job", "job__collection")
    if job_id is not None:
        running = running.filter(job_id=job_id)
    for part in running:
        why = worker_gone(part, now=now, timing=timing)
        if not why:
            continue
        if part.attempts < timing.max_attempts:
            if part_requeue(part, worker=part.worker, note=why):
                outcome.resumed_parts.append(part.pk)
                logger.warning(
                    "part %s of ingestion job %s: %s; it will resume", part.index, part.job_id, why
                )
            continue
        reason = f"interrupted {part.attempts} times ({why})"
        locations = [item["location"] for item in part.items]
        carried = carried_outcomes(part.job, report=part.report, locations=locations)
        stuck = Source.objects.filter(
            collection_id=part.job.collection_id,
            location__in=locations,
            status__in=[Source.Status.INGESTING, Source.Status.PENDING],
        )
        # Chunks of an earlier good version stay searchable; the error is shown.
        stuck.filter(chunk_count__gt=0).update(status=Source.Status.READY, error=reason)
        stuck.update(status=Source.Status.FAILED, error=reason)
        report = part_failed_report(part, reason=reason, carried=carried)
        ingestion_part_end(
            part,
            worker=part.worker,
            status=IngestionPart.Status.FAILED,
            report=report,
            error=reason,
        )
        outcome.failed_parts.append(part.pk)
        logger.warning("part %s of ingestion job %s failed: %s", part.index, part.job_id, reason)
    # A split job whose last part ended but whose finishing worker died on the way.
    orphans = IngestionJob.objects.filter(
        status=IngestionJob.Status.RUNNING,
        parts_total__gt=0,
        heartbeat_at__lt=now - timedelta(seconds=timing.stale_s),
    ).exclude(parts__status__in=UNFINISHED)
    if job_id is not None:
        orphans = orphans.filter(pk=job_id)
    for pk in orphans.values_list("pk", flat=True):
        split_job_finish(job_id=pk)
        outcome.finished.append(pk)


def _split_job_stuck(job: IngestionJob, *, now: datetime, timing: JobTiming) -> bool:
    """Whether a split job has a part whose worker died, or ended parts and nobody finishing."""
    running = IngestionPart.objects.filter(job=job, status=IngestionPart.Status.RUNNING)
    if any(worker_gone(part, now=now, timing=timing) for part in running):
        return True
    unfinished = IngestionPart.objects.filter(job=job, status__in=UNFINISHED).exists()
    return not unfinished and bool(worker_gone(job, now=now, timing=timing))


def _job_abandon(job: IngestionJob, *, reason: str) -> None:
    """Fail a job whose worker is gone for good; its unfinished sources say why."""
    IngestionJob.objects.filter(pk=job.pk).update(
        status=IngestionJob.Status.FAILED,
        error=reason[:2000],
        finished_at=timezone.now(),
        current="",
        worker="",
        bytes_reserved=0,
    )
    stuck = Source.objects.filter(
        provenance__job=job, status__in=[Source.Status.INGESTING, Source.Status.PENDING]
    ).distinct()
    for source in stuck:
        Source.objects.filter(pk=source.pk).update(
            status=Source.Status.READY if source.chunk_count else Source.Status.FAILED,
            error=f"interrupted: {reason}"[:2000],
        )
    pending_uploads = Source.objects.filter(
        pk__in=(job.request or {}).get("source_ids", []), status=Source.Status.PENDING
    )
    pending_uploads.update(status=Source.Status.FAILED, error=f"not ingested: {reason}"[:2000])
    logger.warning("ingestion job %s failed: %s", job.pk, reason)


def _collection_index_settle(job_id: int) -> None:
    """After a job failed half-way, bring its collection's index and statistics up to date."""
    job = IngestionJob.objects.select_related("collection").filter(pk=job_id).first()
    if job is None or not job.chunks_written:
        return
    collection = job.collection
    try:
        if collection.embedding_dimensions:
            vector_index_ensure(
                collection_id=collection.pk, dimensions=int(collection.embedding_dimensions)
            )
        collection_term_stats_refresh(collection=collection)
    except DatabaseError:
        logger.exception("could not refresh the index of collection %s", collection.slug)
