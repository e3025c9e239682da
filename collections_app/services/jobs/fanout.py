"""One job, many workers: a large job is split into parts that any worker claims.

The worker that claims a job of more than ``part_sources`` sources lists them
once and records the parts (rows, like the jobs: the part table is the queue),
then wakes as many workers as there are parts, itself among them. Each part is
an ordinary pipeline run over its sources, so every source is still committed
with its chunks and its manifest entry.

Progress adds up on the job row: each write of a part's figures also sets the
job's counts to the sums over its parts, in one statement. The part that ends
last (its end is recorded under the job row's lock, so exactly one part sees
none left) finishes the job: the merged report, the sources a re-listed
pattern no longer matches, the final status. The final status is written only
over ``running``, so a job is finished once even if two try.

A part whose worker dies is queued again by the periodic check (``reconcile``)
and resumes like a job does, or after ``max_attempts`` is failed with the
reason: its sources are reported failed, the other parts' work stands.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import asdict
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.models import F, Sum
from django.utils import timezone

from collections_app.ingestion.pipeline import (
    DATABASE_LOST,
    IngestionRun,
    ProgressCallback,
    QuotaCheck,
    RunInterrupted,
    WorkItem,
)
from collections_app.ingestion.report import IngestionReport, SourceOutcome
from collections_app.ingestion.server_paths import server_file_refusal, server_path_refusal
from collections_app.ingestion.types import IngestionError
from collections_app.models import IngestionJob, IngestionPart, Source
from collections_app.services.jobs.heartbeat import JobHeartbeat, JobTiming
from collections_app.services.jobs.merge import split_job_finish
from collections_app.services.jobs.queue import ingestion_jobs_wake
from collections_app.services.jobs.run import (
    carried_outcomes,
    dedupe,
    job_finish,
    work_items_for,
)
from collections_app.services.quotas import quota_run_check

logger = logging.getLogger(__name__)

# At most this many messages wake workers for one job's parts; each woken
# worker drains parts until none is left, so more would only be claimed empty.
WAKE_AT_MOST = 64

UNFINISHED = [IngestionPart.Status.QUEUED, IngestionPart.Status.RUNNING]


def job_split(job: IngestionJob, *, worker: str, timing: JobTiming) -> bool:
    """Split the claimed ``job`` into parts when it is large enough; True when it was.

    A reindex (its run drops the vectors of the old model once every source is
    re-embedded) and a job run by a command are never split. Raises
    :class:`IngestionError` for a run-level problem, after recording it.
    """
    request = job.request or {}
    if timing.part_sources <= 0 or request.get("reindex") or request.get("foreground"):
        return False
    # Listing a large folder and loading the model take a while: the job stays alive.
    heartbeat = JobHeartbeat(job_id=job.pk, worker=worker, interval_s=timing.heartbeat_s).start()
    try:
        return _split(job, worker=worker, size=timing.part_sources)
    except Exception as exc:
        error = str(exc) if isinstance(exc, IngestionError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, DATABASE_LOST):
            job_finish(job, worker=worker, status=IngestionJob.Status.FAILED, error=error)
        raise
    finally:
        heartbeat.stop()


def _split(job: IngestionJob, *, worker: str, size: int) -> bool:
    request = job.request or {}
    items, relisted, problems = work_items_for(
        locations=request.get("locations", []),
        sources=Source.objects.filter(
            collection=job.collection, pk__in=request.get("source_ids", [])
        ),
        path_policy=None if request.get("operator") else server_path_refusal,
    )
    items = dedupe(items)
    if len(items) <= size:
        return False
    # Unknown chunking, a model that drifted: the whole job fails now, as unsplit.
    IngestionRun(collection=job.collection, chunking=request.get("chunking"), job=job)
    slices = [items[start : start + size] for start in range(0, len(items), size)]
    interim = {"sources": [asdict(p) for p in problems], "relisted_patterns": relisted}
    with transaction.atomic():
        mine = IngestionJob.objects.select_for_update().filter(
            pk=job.pk, worker=worker, status=IngestionJob.Status.RUNNING
        )
        if not mine.exists():
            return True  # taken away meanwhile: its new worker splits it
        IngestionPart.objects.bulk_create(
            IngestionPart(job=job, index=n, items=[_item_row(item) for item in part])
            for n, part in enumerate(slices)
        )
        mine.update(
            worker="",
            heartbeat_at=timezone.now(),
            parts_total=len(slices),
            sources_total=len(items) + len(problems),
            sources_done=len(problems),
            sources_failed=len(problems),
            report=interim,
            current=f"split into {len(slices)} parts of up to {size} sources",
        )
        ingestion_jobs_wake(messages=min(len(slices), WAKE_AT_MOST))
    return True


def _item_row(item: WorkItem) -> dict[str, Any]:
    return {
        "location": item.location,
        "origin": item.origin,
        "origin_pattern": item.origin_pattern,
        "source_id": item.source.pk if item.source is not None else None,
    }


# Fair between owners, like the jobs: the owner with the fewest parts running
# goes first, then the oldest job, then the part's place in it.
PART_CLAIM_SQL = """
WITH owners AS (
    SELECT coalesce(j.created_by_id, -j.collection_id) AS owner, count(*) AS running
    FROM collections_app_ingestionpart p
    JOIN collections_app_ingestionjob j ON j.id = p.job_id
    WHERE p.status = 'running'
    GROUP BY 1
)
SELECT p.id FROM collections_app_ingestionpart p
JOIN collections_app_ingestionjob j ON j.id = p.job_id
LEFT JOIN owners o ON o.owner = coalesce(j.created_by_id, -j.collection_id)
WHERE p.status = 'queued' AND j.status = 'running'
ORDER BY coalesce(o.running, 0), j.created_at, j.id, p.index
LIMIT 1
FOR UPDATE OF p SKIP LOCKED
"""


def ingestion_part_claim(*, worker: str) -> IngestionPart | None:
    """Mark the fairest queued part running for ``worker``; None when no part waits."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(PART_CLAIM_SQL)
        row = cur.fetchone()
        if row is None:
            return None
        now = timezone.now()
        IngestionPart.objects.filter(pk=row[0]).update(
            status=IngestionPart.Status.RUNNING,
            worker=worker,
            heartbeat_at=now,
            started_at=now,
            attempts=F("attempts") + 1,
        )
    return IngestionPart.objects.select_related("job", "job__collection", "job__created_by").get(
        pk=row[0]
    )


def ingestion_part_run(part: IngestionPart, *, worker: str) -> None:
    """Run one claimed part of a job; the job's last part to end finishes the job."""
    job = part.job
    request = job.request or {}
    timing = JobTiming.from_settings()
    heartbeat = JobHeartbeat(
        job_id=job.pk, worker=worker, interval_s=timing.heartbeat_s, part_id=part.pk
    ).start()
    locations = [item["location"] for item in part.items]
    carried = (
        carried_outcomes(job, report=part.report, locations=locations) if part.attempts > 1 else {}
    )
    try:
        run = IngestionRun(
            collection=job.collection,
            chunking=request.get("chunking"),
            user=job.created_by,
            job=job,
            quota=_part_quota(part),
            path_policy=None if request.get("operator") else server_file_refusal,
            progress=_part_progress(part, worker=worker),
            should_stop=heartbeat.should_stop,
            carried=carried,
        )
        report = run.run(_work_items(part))
    except RunInterrupted:
        if not heartbeat.lost:
            # Shutting down: back to the queue, without counting this attempt.
            part_requeue(part, worker=worker, attempt=False)
        return
    except DATABASE_LOST:
        logger.exception("part %s of ingestion job %s lost the database", part.index, job.pk)
        connection.close()
        # Else a worker's periodic check queues it again once the database is back.
        with contextlib.suppress(DatabaseError):
            part_requeue(part, worker=worker)
        raise
    except Exception as exc:
        logger.exception("part %s of ingestion job %s failed", part.index, job.pk)
        error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, IngestionError) else str(exc)
        # What this attempt stored before it failed stands, like what earlier ones did.
        stored = carried_outcomes(job, report=part.report, locations=locations)
        ingestion_part_end(
            part,
            worker=worker,
            status=IngestionPart.Status.FAILED,
            report=part_failed_report(part, reason=error, carried=stored),
            error=error,
        )
        return
    finally:
        heartbeat.stop()
    if carried:
        report.warnings.insert(
            0,
            f"part {part.index + 1} resumed after an interruption (attempt {part.attempts}): "
            f"{len(carried)} source(s) finished before were kept, not done again",
        )
    ingestion_part_end(part, worker=worker, status=IngestionPart.Status.DONE, report=report)


def _work_items(part: IngestionPart) -> list[WorkItem]:
    ids = [item["source_id"] for item in part.items if item.get("source_id")]
    sources = {s.pk: s for s in Source.objects.filter(pk__in=ids)} if ids else {}
    items = []
    for row in part.items:
        source = sources.get(row.get("source_id") or 0)
        if row.get("source_id") and source is None:
            continue  # the upload was removed since the job was split
        items.append(
            WorkItem(
                location=row["location"],
                origin=row["origin"],
                origin_pattern=row.get("origin_pattern", ""),
                source=source,
            )
        )
    return items


def _part_quota(part: IngestionPart) -> QuotaCheck | None:
    """The job's quota check, counting what the job's other parts have read and cut."""
    check = quota_run_check(user=part.job.created_by, job_id=part.job_id)
    if check is None:
        return None
    others = IngestionPart.objects.filter(job_id=part.job_id).exclude(pk=part.pk)

    def with_other_parts(run_bytes: int, run_chunks: int) -> str:
        used = others.aggregate(bytes=Sum("bytes_ingested"), chunks=Sum("chunks_written"))
        return check(run_bytes + (used["bytes"] or 0), run_chunks + (used["chunks"] or 0))

    return with_other_parts


def _part_progress(part: IngestionPart, *, worker: str) -> ProgressCallback:
    """Write a part's figures on its row and the sums over all parts on the job's row."""
    rows = IngestionPart.objects.filter(
        pk=part.pk, worker=worker, status=IngestionPart.Status.RUNNING
    )

    def update(run: IngestionRun, message: str) -> None:
        report = run.report
        written = rows.update(
            **{
                **_part_figures(report),
                # Counted as the model works through a batch, before its chunks are stored.
                "embeddings_computed": report.embeddings_computed + run.embedded_in_flush,
            },
            bytes_ingested=run.bytes_loaded,
            heartbeat_at=timezone.now(),
        )
        if written:
            job_totals_update(job_id=part.job_id, current=f"part {part.index + 1}: {message}")

    return update


def _part_figures(report: IngestionReport) -> dict[str, int]:
    return {
        "sources_done": report.sources_finished,
        "sources_failed": report.sources_failed,
        "chunks_written": report.chunks_written,
        "embeddings_computed": report.embeddings_computed,
    }


# The job's counts: the sources its listing failed (counted when it was split:
# the total less the parts' sources) plus the sums over its parts.
JOB_TOTALS_SQL = """
UPDATE collections_app_ingestionjob AS j SET
    sources_done = j.sources_total - s.items + s.done,
    sources_failed = j.sources_total - s.items + s.failed,
    chunks_written = s.chunks,
    embeddings_computed = s.embeddings,
    bytes_ingested = s.bytes,
    parts_done = s.parts_done,
    parts_failed = s.parts_failed,
    heartbeat_at = %s,
    current = %s
FROM (
    SELECT coalesce(sum(jsonb_array_length(items)), 0) AS items,
           coalesce(sum(sources_done), 0) AS done,
           coalesce(sum(sources_failed), 0) AS failed,
           coalesce(sum(chunks_written), 0) AS chunks,
           coalesce(sum(embeddings_computed), 0) AS embeddings,
           coalesce(sum(bytes_ingested), 0) AS bytes,
           count(*) FILTER (WHERE status = 'done') AS parts_done,
           count(*) FILTER (WHERE status = 'failed') AS parts_failed
    FROM collections_app_ingestionpart WHERE job_id = %s
) AS s
WHERE j.id = %s AND j.status = 'running'
"""


def job_totals_update(*, job_id: int, current: str) -> None:
    """Set a split job's counts to the sums over its parts (one statement: atomic)."""
    with connection.cursor() as cur:
        cur.execute(JOB_TOTALS_SQL, [timezone.now(), current[:500], job_id, job_id])


def ingestion_part_end(
    part: IngestionPart,
    *,
    worker: str,
    status: str,
    report: IngestionReport,
    error: str = "",
) -> bool:
    """Record how ``part`` ended; the job's last part to end finishes the job.

    Nothing is recorded when the part is no longer ``worker``'s (it was taken
    over). Returns whether this part's end finished the job.
    """
    with transaction.atomic():
        # Parts end one at a time per job, so exactly one of them sees none left.
        list(IngestionJob.objects.select_for_update().filter(pk=part.job_id).values("pk"))
        ended = IngestionPart.objects.filter(
            pk=part.pk, worker=worker, status=IngestionPart.Status.RUNNING
        ).update(
            status=status,
            report=report.as_dict(),
            error=error[:2000],
            finished_at=timezone.now(),
            **_part_figures(report),
        )
        if not ended:
            return False
        job_totals_update(job_id=part.job_id, current=f"part {part.index + 1} {status}")
        last = not IngestionPart.objects.filter(job_id=part.job_id, status__in=UNFINISHED).exists()
        _interim_report_add(part, report)
        if last:
            IngestionJob.objects.filter(pk=part.job_id).update(current="finishing")
    if last:
        split_job_finish(job_id=part.job_id)
    return last


def _interim_report_add(part: IngestionPart, report: IngestionReport) -> None:
    """Add an ended part's sources to its job's report, which pages show while parts run."""
    job = IngestionJob.objects.only("report").get(pk=part.job_id)
    interim = dict(job.report or {})
    added = [{**asdict(s), "part": part.index} for s in report.sources]
    interim["sources"] = [*interim.get("sources", []), *added]
    IngestionJob.objects.filter(pk=part.job_id).update(report=interim)


def part_requeue(part: IngestionPart, *, worker: str, note: str = "", attempt: bool = True) -> bool:
    """Put a part ``worker`` was running back in the queue, to resume where it stopped."""
    fields: dict[str, Any] = {
        "status": IngestionPart.Status.QUEUED,
        "worker": "",
        "heartbeat_at": None,
        "error": note[:2000],
    }
    if not attempt:
        fields["attempts"] = F("attempts") - 1
    with transaction.atomic():
        list(IngestionJob.objects.select_for_update().filter(pk=part.job_id).values("pk"))
        requeued = IngestionPart.objects.filter(
            pk=part.pk, worker=worker, status=IngestionPart.Status.RUNNING
        ).update(**fields)
        if requeued:
            ingestion_jobs_wake()
    return bool(requeued)


def part_failed_report(
    part: IngestionPart, *, reason: str, carried: dict[str, SourceOutcome]
) -> IngestionReport:
    """A failed part's report: what earlier attempts finished stands, the rest failed."""
    report = IngestionReport(collection=part.job.collection.slug)
    for item in part.items:
        location = item["location"]
        report.sources.append(
            carried.get(location)
            or SourceOutcome(
                location=location, status="failed", reason=reason, source_id=item.get("source_id")
            )
        )
    return report
