"""Sources from the browser and the API: uploads, URLs, re-ingestion, removal.

Files that cannot be ingested are refused up front with a reason (the rest of
the upload goes ahead), and one upload or URL list becomes exactly one
background job."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from collections_app.ingestion.detect import detect_kind
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders.base import format_bytes
from collections_app.ingestion.types import IngestionError, RawSource
from collections_app.models import Collection, IngestionJob, Source
from collections_app.services.collection import collection_index_bump
from collections_app.services.jobs import ingestion_job_enqueue, ingestion_job_for_request


@dataclass
class RefusedFile:
    """A file of an upload that was not accepted, with the reason shown to the user."""

    name: str
    reason: str


@dataclass
class Intake:
    """What became of one form submission."""

    job: IngestionJob | None = None
    # False when the submission repeats an earlier one (same one-time token).
    created: bool = False
    accepted: list[str] = field(default_factory=list)
    refused: list[RefusedFile] = field(default_factory=list)

    @property
    def repeated(self) -> bool:
        return self.job is not None and not self.created


def source_upload_create(
    *, collection: Collection, upload: UploadedFile, user: User | None = None
) -> Source:
    """Store an uploaded file as a source (ingested later by a job).

    A file with the same name and the same content as the source's indexed (or
    held) version changes nothing: the stored copy and the status stay, so the
    job finds the source unchanged in the manifest and computes no embeddings.
    """
    name = Path(upload.name or "upload").name
    location = f"upload:{name}"
    source, _ = Source.objects.get_or_create(
        collection=collection, location=location, defaults={"origin": Source.Origin.UPLOAD}
    )
    if _same_as_stored(source, upload):
        return source
    if source.file:
        source.file.delete(save=False)
    source.file.save(name, upload, save=False)
    source.size_bytes = upload.size or 0
    source.status = Source.Status.PENDING
    source.error = ""
    source.save()
    return source


def _same_as_stored(source: Source, upload: UploadedFile) -> bool:
    """Whether ``upload`` is byte for byte the version of ``source`` already processed."""
    if not source.file or source.status not in {
        Source.Status.READY,
        Source.Status.QUARANTINED,
    }:
        return False
    processed = source.content_hash
    if source.status == Source.Status.QUARANTINED:
        # Held content never reaches the chunks; its hash waits in the metadata.
        processed = (source.metadata or {}).get("pending_hash") or processed
    if not processed or (upload.size or 0) != source.size_bytes:
        return False
    digest = hashlib.sha256()
    upload.seek(0)
    for block in upload.chunks():
        digest.update(block)
    upload.seek(0)
    return digest.hexdigest() == processed


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
    from collections_app.search_index import collection_term_stats_refresh

    collection_term_stats_refresh(collection=collection)


def upload_refusal(*, upload: UploadedFile, limits: IngestionLimits) -> str:
    """Why ``upload`` cannot be ingested ("" if it can): too large, empty or not a document.

    The same content checks as the load stage, run before anything is stored, so
    the person uploading learns at once which file was refused and why.
    """
    name = Path(upload.name or "upload").name
    size = upload.size or 0
    if size > limits.max_file_bytes:
        return (
            f"{name} is {format_bytes(size)}; the largest accepted file is "
            f"{format_bytes(limits.max_file_bytes)}"
        )
    upload.seek(0)
    data = upload.read(limits.max_file_bytes + 1)
    upload.seek(0)
    raw = RawSource(location=f"upload:{name}", origin="upload", data=data, filename=name)
    try:
        detect_kind(raw)
    except IngestionError as exc:
        return f"{name}: {exc}"
    return ""


def uploads_accept(
    *,
    collection: Collection,
    files: Sequence[UploadedFile],
    user: User,
    chunking: str | None = None,
    request_key: str = "",
) -> Intake:
    """Store the acceptable files of one upload as sources and start one job for them.

    Refused files are reported with their reason; the others are ingested. A
    repeated ``request_key`` returns the first submission's job and stores nothing.
    """
    limits = IngestionLimits.from_settings()
    with transaction.atomic():
        earlier = ingestion_job_for_request(collection=collection, request_key=request_key)
        if earlier is not None:
            return Intake(job=earlier, created=False)
        intake = Intake()
        sources: list[Source] = []
        for upload in files:
            reason = upload_refusal(upload=upload, limits=limits)
            if reason:
                intake.refused.append(RefusedFile(name=Path(upload.name or "").name, reason=reason))
                continue
            source = source_upload_create(collection=collection, upload=upload, user=user)
            sources.append(source)
            intake.accepted.append(source.display_name)
        if sources:
            intake.job, intake.created = ingestion_job_enqueue(
                collection=collection,
                user=user,
                source_ids=[s.pk for s in sources],
                chunking=chunking or None,
                request_key=request_key,
            )
    return intake


def urls_accept(
    *,
    collection: Collection,
    urls: Sequence[str],
    user: User,
    chunking: str | None = None,
    request_key: str = "",
) -> Intake:
    """Start one job that fetches and ingests ``urls`` (http/https only, checked by the form).

    A repeated ``request_key`` returns the first submission's job.
    """
    job, created = ingestion_job_enqueue(
        collection=collection,
        user=user,
        locations=list(urls),
        chunking=chunking or None,
        request_key=request_key,
    )
    return Intake(job=job, created=created, accepted=list(urls) if created else [])


def source_reingest(*, source: Source, user: User, request_key: str = "") -> Intake:
    """Start a job that reads ``source`` again (an unchanged source costs no embeddings).

    A repeated ``request_key`` returns the first submission's job.
    """
    job, created = ingestion_job_enqueue(
        collection=source.collection, user=user, source_ids=[source.pk], request_key=request_key
    )
    return Intake(job=job, created=created, accepted=[source.display_name] if created else [])
