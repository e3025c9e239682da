"""Write-side operations behind the browser pages: uploads, URLs, members, reviews.

They wrap the collection services with what a form submission needs: files that
cannot be ingested are refused up front with a reason (the rest of the upload
goes ahead), one upload or URL list becomes exactly one background job, and a
form submitted twice with the same one-time token starts no second job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from django.utils import timezone

from collections_app.ingestion.detect import detect_kind
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders.base import format_bytes
from collections_app.ingestion.report import IngestionReport
from collections_app.ingestion.types import IngestionError, RawSource
from collections_app.models import (
    Collection,
    CollectionMembership,
    IngestionJob,
    QuarantineItem,
    Source,
)
from collections_app.services import (
    ReviewError,
    ingestion_job_enqueue,
    membership_set,
    quarantine_approve,
    quarantine_reject,
    source_upload_create,
)

# Same window as ingestion_job_create: a token reused later starts a new job.
REQUEST_KEY_WINDOW = timedelta(minutes=10)


class LastAdmin(Exception):
    """The change would leave the collection without an admin."""


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


@dataclass
class ReviewOutcome:
    """The result of one quarantine decision."""

    item: QuarantineItem
    error: str = ""
    report: IngestionReport | None = None


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
    user: AbstractBaseUser,
    chunking: str | None = None,
    request_key: str = "",
) -> Intake:
    """Store the acceptable files of one upload as sources and start one job for them.

    Refused files are reported with their reason; the others are ingested. A
    repeated ``request_key`` returns the first submission's job and stores nothing.
    """
    limits = IngestionLimits.from_settings()
    with transaction.atomic():
        earlier = _earlier_job(collection, request_key)
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
    user: AbstractBaseUser,
    chunking: str | None = None,
    request_key: str = "",
) -> Intake:
    """Start one job that fetches and ingests ``urls`` (http/https only, checked by the form)."""
    with transaction.atomic():
        earlier = _earlier_job(collection, request_key)
        if earlier is not None:
            return Intake(job=earlier, created=False)
        job, created = ingestion_job_enqueue(
            collection=collection,
            user=user,
            locations=list(urls),
            chunking=chunking or None,
            request_key=request_key,
        )
    return Intake(job=job, created=created, accepted=list(urls))


def source_reingest(*, source: Source, user: AbstractBaseUser, request_key: str = "") -> Intake:
    """Start a job that reads ``source`` again (an unchanged source costs no embeddings)."""
    with transaction.atomic():
        earlier = _earlier_job(source.collection, request_key)
        if earlier is not None:
            return Intake(job=earlier, created=False)
        job, created = ingestion_job_enqueue(
            collection=source.collection,
            user=user,
            source_ids=[source.pk],
            request_key=request_key,
        )
    return Intake(job=job, created=created, accepted=[source.display_name])


def _earlier_job(collection: Collection, request_key: str) -> IngestionJob | None:
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


def collection_update(
    *, collection: Collection, name: str, description: str, chunking_strategy: str
) -> Collection:
    """Rename or re-describe a collection, or change how new documents are chunked.

    The chunking strategy applies to the next ingestion; the manifest notices the
    new chunker settings and re-chunks each source then.
    """
    from collections_app.ingestion.chunking import chunker_factory

    chunker_factory(chunking_strategy)
    collection.name = name
    collection.description = description
    collection.chunking_strategy = chunking_strategy
    collection.save(update_fields=["name", "description", "chunking_strategy", "updated_at"])
    return collection


def membership_change(*, collection: Collection, user: AbstractBaseUser, role: str | None) -> None:
    """Set ``user``'s role on the collection (None removes it); the last admin stays admin."""
    current = CollectionMembership.objects.filter(collection=collection, user=user).first()
    is_admin = current is not None and current.role == CollectionMembership.Role.ADMIN
    if is_admin and role != CollectionMembership.Role.ADMIN:
        admins = CollectionMembership.objects.filter(
            collection=collection, role=CollectionMembership.Role.ADMIN
        ).count()
        if admins <= 1:
            raise LastAdmin(
                f"{user} is the only admin of {collection}; make someone else admin first"
            )
    membership_set(collection=collection, user=user, role=role)


def quarantine_decide(
    *,
    items: Iterable[QuarantineItem],
    reviewer: AbstractBaseUser,
    decision: str,
    reason: str = "",
) -> list[ReviewOutcome]:
    """Approve (index) or reject (with ``reason``) each item; one failure never stops the rest."""
    if decision not in {"approve", "reject"}:
        raise ReviewError(f"unknown decision {decision!r}; known: approve, reject")
    outcomes = []
    for item in items:
        outcome = ReviewOutcome(item=item)
        try:
            if decision == "approve":
                outcome.report = quarantine_approve(item=item, reviewer=reviewer)
                failed = [s for s in outcome.report.sources if s.status == "failed"]
                if failed:
                    outcome.error = f"approved, but indexing failed: {failed[0].reason}"
            else:
                quarantine_reject(item=item, reviewer=reviewer, reason=reason)
        except (ReviewError, IngestionError) as exc:
            outcome.error = str(exc)
        outcomes.append(outcome)
    return outcomes
