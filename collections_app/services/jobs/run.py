"""Run one job (or any list of locations) through the pipeline, its progress on the job row."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import DatabaseError, connection
from django.db.models import F
from django.utils import timezone

from collections_app.ingestion.fetch import expand_locations, is_web_url, normalise_url
from collections_app.ingestion.pipeline import (
    DATABASE_LOST,
    IngestionRun,
    PathPolicy,
    ProgressCallback,
    QuotaCheck,
    RunInterrupted,
    WorkItem,
)
from collections_app.ingestion.report import IngestionReport, SourceOutcome, SourceStatus
from collections_app.ingestion.server_paths import server_file_refusal, server_path_refusal
from collections_app.ingestion.types import IngestionError
from collections_app.models import Collection, IngestionJob, Source
from collections_app.services.jobs.heartbeat import JobHeartbeat, JobTiming
from collections_app.services.jobs.queue import ingestion_jobs_wake
from collections_app.services.quotas import quota_run_check

logger = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")

# The full report (one entry per source) is written at most this often while
# a job runs; the counts on every change.
REPORT_EVERY_S = 1.0


def work_items_for(
    *,
    locations: Sequence[str] = (),
    sources: Iterable[Source] = (),
    path_policy: PathPolicy | None = None,
) -> tuple[list[WorkItem], list[str], list[SourceOutcome]]:
    """Expand locations (paths, globs, directories, URLs) and existing sources into work.

    Returns the items, the glob/directory patterns that were re-listed (their
    vanished sources get removed), and failures found while listing. With a
    ``path_policy``, a path or pattern it refuses is a failure and is not listed.
    """
    items: list[WorkItem] = []
    relisted: list[str] = []
    problems: list[SourceOutcome] = []
    for raw in locations:
        if is_web_url(raw):
            items.append(WorkItem(location=normalise_url(raw.strip()), origin=Source.Origin.URL))
            continue
        if "://" in raw:
            problems.append(
                SourceOutcome(
                    location=raw, status="failed", reason="only http and https URLs are supported"
                )
            )
            continue
        path = Path(raw).expanduser()
        pattern = str(path.absolute())
        refusal = path_policy(raw) if path_policy is not None else ""
        if refusal:
            problems.append(SourceOutcome(location=pattern, status="failed", reason=refusal))
            continue
        is_pattern = bool(GLOB_CHARS & set(raw)) or path.is_dir()
        if not is_pattern and not path.exists():
            problems.append(
                SourceOutcome(location=pattern, status="failed", reason="file not found")
            )
            continue
        entries = expand_locations([str(path.absolute())])
        if is_pattern:
            relisted.append(pattern)
            if not entries:
                problems.append(
                    SourceOutcome(
                        location=pattern, status="failed", reason="no files match this pattern"
                    )
                )
        items.extend(
            WorkItem(
                location=loc,
                origin=Source.Origin.PATH,
                origin_pattern=pattern if is_pattern else "",
            )
            for loc, _ in entries
        )
    for source in sources:
        items.append(
            WorkItem(
                location=source.location,
                origin=source.origin,
                origin_pattern=source.origin_pattern,
                source=source if source.origin == Source.Origin.UPLOAD else None,
            )
        )
    return items, relisted, problems


def collection_ingest(
    *,
    collection: Collection,
    locations: Sequence[str] = (),
    sources: Iterable[Source] = (),
    chunking: str | None = None,
    reindex: bool = False,
    user: User | None = None,
    job: IngestionJob | None = None,
    quota: QuotaCheck | None = None,
    restrict_paths: bool = False,
    worker: str = "",
    run_options: dict[str, Any] | None = None,
) -> IngestionReport:
    """Ingest locations and/or existing sources into the collection, synchronously.

    Run-level problems (unknown chunking strategy, embedding profile drift) raise
    before anything is written; per-source problems are in the report. With
    ``restrict_paths`` (work asked for through the web or the API), server
    paths are read only inside the allowed roots (``server_paths``).
    ``worker``: the job's worker (progress is written while the job is still its).
    ``run_options`` go to the :class:`IngestionRun` (should_stop, carried).
    """
    sources = list(sources)
    if reindex:
        # A reindex rebuilds everything the collection holds, whatever was named.
        named = {s.pk for s in sources}
        sources += [
            s
            for s in collection.sources.exclude(status=Source.Status.REJECTED)
            if s.pk not in named
        ]
        locations = [loc for loc in locations if loc not in {s.location for s in sources}]
    items, relisted, problems = work_items_for(
        locations=locations,
        sources=sources,
        path_policy=server_path_refusal if restrict_paths else None,
    )
    options = dict(run_options or {})
    if job is not None:
        options["progress"] = job_progress(job, total=len(items) + len(problems), worker=worker)
    run = IngestionRun(
        collection=collection,
        chunking=chunking,
        reindex=reindex,
        user=user,
        job=job,
        quota=quota,
        path_policy=server_file_refusal if restrict_paths else None,
        **options,
    )
    run.report.sources.extend(problems)
    return run.run(dedupe(items), relisted_patterns=relisted)


def dedupe(items: list[WorkItem]) -> list[WorkItem]:
    seen: set[str] = set()
    unique = []
    for item in items:
        if item.location not in seen:
            seen.add(item.location)
            unique.append(item)
    return unique


def job_progress(job: IngestionJob, *, total: int, worker: str) -> ProgressCallback:
    """Write a run's progress onto its job row (the counts always, the report now and then).

    Every write is also a heartbeat. With ``worker``, only while the job is still
    this worker's: a job taken over by another worker is left alone.
    """
    IngestionJob.objects.filter(pk=job.pk).update(sources_total=total)
    rows = IngestionJob.objects.filter(pk=job.pk)
    if worker:
        rows = rows.filter(worker=worker, status=IngestionJob.Status.RUNNING)
    last_report = [0.0]

    def update(run: IngestionRun, message: str) -> None:
        report = run.report
        fields: dict[str, Any] = {
            "sources_total": max(total, report.sources_seen),
            "sources_done": report.sources_finished,
            "sources_failed": report.sources_failed,
            "chunks_written": report.chunks_written,
            # Counted as the model works through a batch, before its chunks are stored.
            "embeddings_computed": report.embeddings_computed + run.embedded_in_flush,
            "bytes_ingested": run.bytes_loaded,
            "current": message[:500],
            "heartbeat_at": timezone.now(),
        }
        now = time.monotonic()
        if now - last_report[0] >= REPORT_EVERY_S:
            fields["report"] = report.as_dict()
            last_report[0] = now
        rows.update(**fields)

    return update


def job_run(
    job: IngestionJob, *, worker: str, into: IngestionJob | None = None
) -> IngestionReport | None:
    timing = JobTiming.from_settings()
    heartbeat = JobHeartbeat(job_id=job.pk, worker=worker, interval_s=timing.heartbeat_s).start()
    request = job.request or {}
    carried = carried_outcomes(job) if job.attempts > 1 else {}
    try:
        report = collection_ingest(
            collection=job.collection,
            locations=request.get("locations", []),
            sources=Source.objects.filter(
                collection=job.collection, pk__in=request.get("source_ids", [])
            ),
            chunking=request.get("chunking"),
            reindex=bool(request.get("reindex")),
            user=job.created_by,
            job=job,
            quota=quota_run_check(user=job.created_by, job_id=job.pk),
            restrict_paths=not request.get("operator"),
            worker=worker,
            run_options={"should_stop": heartbeat.should_stop, "carried": carried},
        )
    except RunInterrupted:
        if heartbeat.lost:
            logger.warning("ingestion job %s was taken over by another worker", job.pk)
        else:
            # Shutting down: back to the queue, without counting this attempt.
            job_requeue(job, worker=worker, note="resumes when a worker starts", attempt=False)
        return None
    except DATABASE_LOST:
        logger.exception("ingestion job %s lost the database", job.pk)
        _job_release_after_database_loss(job, worker=worker)
        raise
    except IngestionError as exc:
        job_finish(job, worker=worker, status=IngestionJob.Status.FAILED, error=str(exc), into=into)
        raise
    except Exception as exc:
        logger.exception("ingestion job %s failed", job.pk)
        job_finish(
            job,
            worker=worker,
            status=IngestionJob.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            into=into,
        )
        raise
    finally:
        heartbeat.stop()
    if carried:
        again = sum(1 for s in report.sources if s.location in carried)
        report.warnings.insert(
            0,
            f"resumed after an interruption (attempt {job.attempts}): {again} source(s) "
            "finished before were kept, not done again",
        )
    status = IngestionJob.Status.PARTIAL if report.sources_failed else IngestionJob.Status.SUCCEEDED
    job_finish(job, worker=worker, status=status, report=report, into=into)
    return report


def carried_outcomes(
    job: IngestionJob,
    *,
    report: dict[str, Any] | None = None,
    locations: Iterable[str] | None = None,
) -> dict[str, SourceOutcome]:
    """What earlier attempts of ``job`` (or of one part of it: its ``report`` and
    ``locations``) finished, by location.

    Read from the database (the sources this job read and stored or held), not
    only from the last report written, which may lag behind the work.
    """
    names = {f.name for f in dataclasses.fields(SourceOutcome)}
    reported: dict[str, dict[str, Any]] = {
        entry["location"]: entry
        for entry in (job.report if report is None else report or {}).get("sources", [])
        if isinstance(entry, dict) and isinstance(entry.get("location"), str)
    }
    finished: dict[str, SourceStatus] = {
        Source.Status.READY.value: "ingested",
        Source.Status.QUARANTINED.value: "quarantined",
    }
    carried: dict[str, SourceOutcome] = {}
    sources = Source.objects.filter(provenance__job=job, status__in=list(finished))
    if locations is not None:
        sources = sources.filter(location__in=list(locations))
    sources = sources.distinct()
    for source in sources:
        outcome = SourceOutcome(
            location=source.location,
            status=finished[str(source.status)],
            kind=source.kind,
            source_id=source.pk,
            chunks_written=source.chunk_count,
            embeddings_computed=source.chunk_count,
        )
        entry = reported.get(source.location)
        if entry is not None and entry.get("status") == outcome.status:
            for key, value in entry.items():
                if key in names and key != "location":
                    setattr(outcome, key, value)
        carried[source.location] = outcome
    return carried


def _job_release_after_database_loss(job: IngestionJob, *, worker: str) -> None:
    """Queue the job again if the database answers once more; else the periodic check will."""
    connection.close()
    try:
        job_requeue(job, worker=worker, note="the database connection was lost")
        ingestion_jobs_wake()
    except DatabaseError:
        logger.warning(
            "ingestion job %s stays running until the database is back and a worker's "
            "periodic check resumes it",
            job.pk,
        )


def job_requeue(job: IngestionJob, *, worker: str, note: str, attempt: bool = True) -> bool:
    """Put a job this worker was running back in the queue, to resume where it stopped."""
    fields: dict[str, Any] = {
        "status": IngestionJob.Status.QUEUED,
        "worker": "",
        "heartbeat_at": None,
        "current": f"waiting to resume: {note}"[:500],
    }
    if not attempt:
        fields["attempts"] = F("attempts") - 1
    return bool(
        IngestionJob.objects.filter(
            pk=job.pk, worker=worker, status=IngestionJob.Status.RUNNING
        ).update(**fields)
    )


def job_finish(
    job: IngestionJob,
    *,
    status: str,
    worker: str = "",
    error: str = "",
    report: IngestionReport | None = None,
    into: IngestionJob | None = None,
) -> None:
    fields: dict[str, Any] = {
        "status": status,
        "error": error,
        "finished_at": timezone.now(),
        "current": "",
        "bytes_reserved": 0,
    }
    if report is not None:
        data = report.as_dict()
        fields.update(
            report=data,
            sources_total=len(report.sources),
            sources_done=len(report.sources),
            sources_failed=report.sources_failed,
            chunks_written=report.chunks_written,
            embeddings_computed=report.embeddings_computed,
        )
    rows = IngestionJob.objects.filter(pk=job.pk)
    if worker:
        rows = rows.filter(worker=worker)
    rows.update(**fields)
    for target in (job, into):
        if target is not None:
            for key, value in fields.items():
                setattr(target, key, value)
