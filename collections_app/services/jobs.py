"""Ingestion jobs: expand what to read, record a job, run it with live progress.

A job row carries the progress the pages poll; a form submitted twice with the
same one-time token (``request_key``) starts no second job."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from collections_app.ingestion.fetch import expand_locations, is_web_url, normalise_url
from collections_app.ingestion.pipeline import IngestionRun, ProgressCallback, WorkItem
from collections_app.ingestion.report import IngestionReport, SourceOutcome
from collections_app.ingestion.types import IngestionError
from collections_app.models import Collection, IngestionJob, Source

logger = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")

# Same window as ingestion_job_create: a token reused later starts a new job.
REQUEST_KEY_WINDOW = timedelta(minutes=10)


def work_items_for(
    *, locations: Sequence[str] = (), sources: Iterable[Source] = ()
) -> tuple[list[WorkItem], list[str], list[SourceOutcome]]:
    """Expand locations (paths, globs, directories, URLs) and existing sources into work.

    Returns the items, the glob/directory patterns that were re-listed (their
    vanished sources get removed), and failures found while listing.
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
) -> IngestionReport:
    """Ingest locations and/or existing sources into the collection, synchronously.

    Run-level problems (unknown chunking strategy, embedding profile drift) raise
    before anything is written; per-source problems are in the report.
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
    items, relisted, problems = work_items_for(locations=locations, sources=sources)
    progress = _job_progress(job, total=len(items) + len(problems)) if job else None
    run = IngestionRun(
        collection=collection,
        chunking=chunking,
        reindex=reindex,
        user=user,
        job=job,
        progress=progress,
    )
    run.report.sources.extend(problems)
    return run.run(_dedupe(items), relisted_patterns=relisted)


def _dedupe(items: list[WorkItem]) -> list[WorkItem]:
    seen: set[str] = set()
    unique = []
    for item in items:
        if item.location not in seen:
            seen.add(item.location)
            unique.append(item)
    return unique


def _job_progress(job: IngestionJob, *, total: int) -> ProgressCallback:
    IngestionJob.objects.filter(pk=job.pk).update(sources_total=total)

    def update(report: IngestionReport, message: str) -> None:
        IngestionJob.objects.filter(pk=job.pk).update(
            sources_total=max(total, report.sources_seen),
            sources_done=report.sources_finished,
            sources_failed=report.sources_failed,
            chunks_written=report.chunks_written,
            embeddings_computed=report.embeddings_computed,
            current=message[:500],
            report=report.as_dict(),
        )

    return update


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
) -> tuple[IngestionJob, bool]:
    """Record a job; a repeated ``request_key`` within 10 minutes returns the first job.

    Returns (job, created).
    """
    with transaction.atomic():
        earlier = ingestion_job_for_request(collection=collection, request_key=request_key)
        if earlier is not None:
            return earlier, False
        job = IngestionJob.objects.create(
            collection=collection,
            created_by=user if user is not None and user.is_authenticated else None,
            request={
                "locations": list(locations),
                "source_ids": list(source_ids),
                "chunking": chunking,
                "reindex": reindex,
            },
            sources_total=len(locations) + len(source_ids),
            request_key=request_key,
        )
    return job, True


def ingestion_job_enqueue(**kwargs: Any) -> tuple[IngestionJob, bool]:
    """Create a job and hand it to a Celery worker once the transaction commits."""
    from collections_app.tasks import ingestion_job_run_task

    job, created = ingestion_job_create(**kwargs)
    if created:
        ingestion_job_run_task.delay_on_commit(job.pk)
    return job, created


def ingestion_job_execute(*, job: IngestionJob) -> IngestionReport | None:
    """Run a recorded job to the end, keeping its row up to date. Idempotent."""
    if job.is_finished:
        return None
    IngestionJob.objects.filter(pk=job.pk).update(
        status=IngestionJob.Status.RUNNING, started_at=timezone.now()
    )
    request = job.request or {}
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
        )
    except IngestionError as exc:
        _job_finish(job, status=IngestionJob.Status.FAILED, error=str(exc))
        raise
    except Exception as exc:
        logger.exception("ingestion job %s failed", job.pk)
        _job_finish(job, status=IngestionJob.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    status = IngestionJob.Status.PARTIAL if report.sources_failed else IngestionJob.Status.SUCCEEDED
    _job_finish(job, status=status, report=report)
    return report


def _job_finish(
    job: IngestionJob, *, status: str, error: str = "", report: IngestionReport | None = None
) -> None:
    fields: dict[str, Any] = {
        "status": status,
        "error": error,
        "finished_at": timezone.now(),
        "current": "",
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
    IngestionJob.objects.filter(pk=job.pk).update(**fields)
    for key, value in fields.items():
        setattr(job, key, value)
