"""Write-side operations on collections: create, ingest, review, remove."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import slugify

from collections_app.ingestion.fetch import expand_locations
from collections_app.ingestion.pipeline import IngestionRun, WorkItem
from collections_app.ingestion.report import IngestionReport, SourceOutcome
from collections_app.ingestion.types import IngestionError
from collections_app.models import (
    Collection,
    CollectionMembership,
    IngestionJob,
    QuarantineItem,
    Source,
)
from collections_app.vector_index import vector_index_drop

logger = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")


class CollectionExists(Exception):
    """A collection with that slug already exists."""


class ReviewError(Exception):
    """A quarantine decision is incomplete (e.g. a rejection without a reason)."""


def collection_create(
    *,
    name: str,
    slug: str = "",
    description: str = "",
    user: AbstractBaseUser | None = None,
    chunking_strategy: str = "",
    chunking_options: dict[str, Any] | None = None,
    embedding_config: dict[str, Any] | None = None,
) -> Collection:
    """Create a collection; its creator becomes its admin."""
    from django.conf import settings

    from collections_app.ingestion.chunking import chunker_factory

    slug = slug or slugify(name)
    if not slug:
        raise ValueError("a collection needs a name made of letters or digits")
    strategy = chunking_strategy or settings.RAG["ingestion"]["default_chunking"]
    chunker_factory(strategy)
    if Collection.objects.filter(slug=slug).exists():
        raise CollectionExists(f"a collection with the slug {slug!r} already exists")
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name,
            slug=slug,
            description=description,
            created_by=user if user is not None and user.is_authenticated else None,
            chunking_strategy=strategy,
            chunking_options=chunking_options or {},
            embedding_config=embedding_config or {},
        )
        if user is not None and user.is_authenticated:
            CollectionMembership.objects.create(
                collection=collection, user=user, role=CollectionMembership.Role.ADMIN
            )
    return collection


def collection_delete(*, collection: Collection) -> None:
    """Delete a collection with its sources, chunks and vector index."""
    collection_id = collection.pk
    for source in collection.sources.exclude(file=""):
        source.file.delete(save=False)
    collection.delete()
    vector_index_drop(collection_id=collection_id)


def collection_index_bump(*, collection_id: int) -> int:
    """Bump the collection's index version (caches key on it); return the new value."""
    Collection.objects.filter(pk=collection_id).update(index_version=F("index_version") + 1)
    return Collection.objects.values_list("index_version", flat=True).get(pk=collection_id)


def membership_set(*, collection: Collection, user: AbstractBaseUser, role: str | None) -> None:
    """Give ``user`` a role on the collection, or remove it (role None)."""
    if role is None:
        CollectionMembership.objects.filter(collection=collection, user=user).delete()
        return
    if role not in CollectionMembership.Role.values:
        raise ValueError(
            f"unknown role {role!r}; known: {', '.join(CollectionMembership.Role.values)}"
        )
    CollectionMembership.objects.update_or_create(
        collection=collection, user=user, defaults={"role": role}
    )


def source_upload_create(
    *, collection: Collection, upload: UploadedFile, user: AbstractBaseUser | None = None
) -> Source:
    """Store an uploaded file as a source (ingested later by a job)."""
    name = Path(upload.name or "upload").name
    location = f"upload:{name}"
    source, _ = Source.objects.get_or_create(
        collection=collection, location=location, defaults={"origin": Source.Origin.UPLOAD}
    )
    if source.file:
        source.file.delete(save=False)
    source.file.save(name, upload, save=False)
    source.size_bytes = upload.size or 0
    source.status = Source.Status.PENDING
    source.error = ""
    source.save()
    return source


def source_remove(*, source: Source) -> None:
    """Remove a source, its chunks and its manifest entry."""
    from collections_app.ingestion.manifest import manifest_load, manifest_save

    collection = source.collection
    manifest = manifest_load(collection=collection)
    manifest.forget(source.location)
    if source.file:
        source.file.delete(save=False)
    source.delete()
    manifest_save(collection=collection, manifest=manifest)
    collection_index_bump(collection_id=collection.pk)
    from collections_app.keyword_stats import collection_term_stats_refresh

    collection_term_stats_refresh(collection=collection)


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
        if raw.startswith(("http://", "https://")):
            items.append(WorkItem(location=raw, origin=Source.Origin.URL))
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
    user: AbstractBaseUser | None = None,
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


def _job_progress(job: IngestionJob, *, total: int):  # type: ignore[no-untyped-def]
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


def ingestion_job_create(
    *,
    collection: Collection,
    user: AbstractBaseUser | None = None,
    locations: Sequence[str] = (),
    source_ids: Sequence[int] = (),
    chunking: str | None = None,
    reindex: bool = False,
    request_key: str = "",
) -> tuple[IngestionJob, bool]:
    """Record a job; a repeated ``request_key`` within 10 minutes returns the first job.

    Returns (job, created).
    """
    if request_key:
        recent = IngestionJob.objects.filter(
            collection=collection,
            request_key=request_key,
            created_at__gte=timezone.now() - timedelta(minutes=10),
        ).first()
        if recent is not None:
            return recent, False
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


def quarantine_approve(*, item: QuarantineItem, reviewer: AbstractBaseUser) -> IngestionReport:
    """Approve quarantined content and index exactly what the reviewer saw."""
    _review(item, reviewer=reviewer, status=QuarantineItem.ReviewStatus.APPROVED, reason="")
    source = item.source
    run = IngestionRun(collection=item.collection, user=reviewer, skip_validation=True)
    report = run.run_stored([source])
    from collections_app.ingestion.manifest import manifest_load, manifest_save

    if report.sources and report.sources[0].status == "ingested":
        manifest = manifest_load(collection=item.collection)
        manifest.record(
            source.location,
            content_hash=item.content_hash,
            chunker=run.fingerprint,
            embedding=run.profile,
        )
        manifest_save(collection=item.collection, manifest=manifest)
    return report


def quarantine_reject(*, item: QuarantineItem, reviewer: AbstractBaseUser, reason: str) -> None:
    """Reject quarantined content (a reason is required); it stays out of the index."""
    if not reason.strip():
        raise ReviewError("a rejection needs a reason")
    _review(
        item, reviewer=reviewer, status=QuarantineItem.ReviewStatus.REJECTED, reason=reason.strip()
    )
    from collections_app.models import Chunk

    deleted, _ = Chunk.objects.filter(source=item.source).delete()
    Source.objects.filter(pk=item.source_id).update(status=Source.Status.REJECTED, chunk_count=0)
    if deleted:
        Collection.objects.filter(pk=item.collection_id).update(
            index_version=item.collection.index_version + 1
        )


def _review(item: QuarantineItem, *, reviewer: AbstractBaseUser, status: str, reason: str) -> None:
    if item.review_status != QuarantineItem.ReviewStatus.PENDING:
        raise ReviewError(f"this item was already {item.review_status} by {item.reviewer}")
    item.review_status = status
    item.reviewer = reviewer
    item.reviewed_at = timezone.now()
    item.reason = reason
    item.save()
