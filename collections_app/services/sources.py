"""Sources from the browser and the API: uploads, URLs, re-ingestion, removal.

Files that cannot be ingested are refused up front with a reason (the rest of
the upload goes ahead), and one upload or URL list becomes exactly one
background job."""

from __future__ import annotations

import hashlib
import io
import mimetypes
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO
from urllib.parse import unquote, urlsplit

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.core.validators import URLValidator
from django.db import transaction

from collections_app.ingestion.detect import MIME_BY_KIND, detect_kind
from collections_app.ingestion.fetch import read_path
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders.base import format_bytes
from collections_app.ingestion.server_paths import server_path_refusal
from collections_app.ingestion.types import IngestionError, RawSource
from collections_app.models import Collection, IngestionJob, Source
from collections_app.services.collection import collection_index_bump
from collections_app.services.jobs import ingestion_job_enqueue, ingestion_job_for_request
from collections_app.services.quotas import quota_submission_check


@dataclass
class RefusedFile:
    """A file or address that was not accepted, with the reason shown to the user."""

    name: str
    reason: str
    # Why, for callers that answer differently ("path": a server path from a
    # user who may not add those; "address": anything else wrong with an address).
    code: str = ""


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


class OriginalUnavailable(Exception):
    """A source's original file cannot be handed out: not kept, changed or gone."""


@dataclass
class OriginalFile:
    """A source's original file, ready to be sent: open content, a safe name, a media type."""

    content: IO[bytes]
    filename: str
    content_type: str


EXTENSION_BY_KIND = {
    "text": ".txt",
    "markdown": ".md",
    "csv": ".csv",
    "html": ".html",
    "pdf": ".pdf",
    "docx": ".docx",
}
# Control characters, path separators and characters Windows refuses in names.
_UNSAFE_NAME = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')
_MAX_NAME_CHARS = 150


def source_download_name(source: Source) -> str:
    """The file name a download of ``source`` gets: its own name, made safe for any disk.

    An upload keeps the name it was uploaded under, a path its file name, a URL
    the last part of its path; without one, the title or ``source-<id>``, with
    the extension of the detected format.
    """
    location = source.location
    if source.origin == Source.Origin.UPLOAD:
        name = location.removeprefix("upload:")
    elif source.origin == Source.Origin.URL:
        name = unquote(PurePosixPath(urlsplit(location).path).name)
    else:
        name = PurePosixPath(location.replace("\\", "/")).name
    name = _UNSAFE_NAME.sub("_", name).strip(" ._")
    if not name:
        name = _UNSAFE_NAME.sub("_", source.title).strip(" ._") or f"source-{source.pk}"
    stem, suffix = name, PurePosixPath(name).suffix
    if suffix:
        stem = name[: -len(suffix)]
    elif source.kind in EXTENSION_BY_KIND:
        suffix = EXTENSION_BY_KIND[source.kind]
    return stem[: _MAX_NAME_CHARS - len(suffix)] + suffix


def _processed_hash(source: Source) -> str:
    """The hash of the version the collection holds (or holds back for review)."""
    if source.status == Source.Status.QUARANTINED:
        return (source.metadata or {}).get("pending_hash") or source.content_hash
    return source.content_hash


def source_original_open(*, source: Source) -> OriginalFile:
    """Open the original file of ``source`` for a download.

    Uploads (and any source with a stored copy) come from the stored copy; a
    server path from the disk, only while it still holds the ingested version.
    Raises :class:`OriginalUnavailable` with the reason otherwise (a web page
    whose copy was not kept, a vanished or changed file).
    """
    filename = source_download_name(source)
    content_type = (
        MIME_BY_KIND.get(source.kind)
        or mimetypes.guess_type(filename)[0]
        or "application/octet-stream"
    )
    if source.file:
        try:
            content: IO[bytes] = source.file.open("rb")
        except (FileNotFoundError, OSError):
            raise OriginalUnavailable("its stored copy is missing on the server") from None
        return OriginalFile(content=content, filename=filename, content_type=content_type)
    if source.origin == Source.Origin.URL:
        raise OriginalUnavailable(
            "only the address of a web page is kept, not a copy; open the page itself"
        )
    if source.origin == Source.Origin.UPLOAD:
        raise OriginalUnavailable("its stored copy is missing on the server")
    try:
        raw = read_path(Path(source.location), limits=IngestionLimits.from_settings())
    except IngestionError as exc:
        raise OriginalUnavailable(f"the file cannot be read on the server ({exc})") from exc
    processed = _processed_hash(source)
    if not processed or hashlib.sha256(raw.data).hexdigest() != processed:
        # What the page shows and answers cite is the ingested version.
        raise OriginalUnavailable(
            "the file on the server changed since it was ingested; re-ingest it first"
        )
    return OriginalFile(content=io.BytesIO(raw.data), filename=filename, content_type=content_type)


def source_remove(*, source: Source) -> None:
    """Remove a source, its chunks and its manifest entry."""
    from collections_app.ingestion.manifest import manifest_load

    collection = source.collection
    manifest_load(collection=collection).forget(source.location)
    if source.file:
        source.file.delete(save=False)
    source.delete()
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
    Raises :class:`QuotaExceeded` (nothing stored) past the user's budgets.
    """
    limits = IngestionLimits.from_settings()
    with transaction.atomic():
        earlier = ingestion_job_for_request(collection=collection, request_key=request_key)
        if earlier is not None:
            return Intake(job=earlier, created=False)
        intake = Intake()
        acceptable: list[UploadedFile] = []
        for upload in files:
            reason = upload_refusal(upload=upload, limits=limits)
            if reason:
                intake.refused.append(RefusedFile(name=Path(upload.name or "").name, reason=reason))
                continue
            acceptable.append(upload)
        upload_bytes = sum(upload.size or 0 for upload in acceptable)
        if acceptable:
            # Before a byte is stored: a refused upload leaves nothing behind.
            quota_submission_check(user=user, upload_bytes=upload_bytes)
        sources: list[Source] = []
        for upload in acceptable:
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
                upload_bytes=upload_bytes,
            )
    return intake


MAX_LOCATION_CHARS = 4000
_LOOKS_LIKE_HOST = re.compile(r"^(?:www\.)?[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}(?:[:/?#]|$)", re.I)


def location_refusal(location: str, *, allow_paths: bool = False) -> RefusedFile | None:
    """Why ``location`` cannot be added (None if it can): web addresses, or paths for superusers.

    Only http(s) addresses are fetched; a server path, directory or glob is read
    from the server's disk, so only callers that allow it (superusers) may name one,
    and only inside the allowed roots (``server_paths``).
    """
    if len(location) > MAX_LOCATION_CHARS:
        return RefusedFile(
            location[:80] + "…", f"longer than {MAX_LOCATION_CHARS} characters", "address"
        )
    scheme = location.split("://", 1)[0].lower() if "://" in location else ""
    if scheme in {"http", "https"}:
        try:
            URLValidator(schemes=["http", "https"])(location)
        except ValidationError:
            return RefusedFile(location, f"{location}: not a valid web address", "address")
        return None
    if scheme:
        return RefusedFile(
            location,
            f"{location}: only http and https addresses are supported",
            "address",
        )
    if allow_paths:
        # Even then only inside the folders opened for it (RAG_INGEST_ROOTS).
        outside = server_path_refusal(location)
        return RefusedFile(location, outside, "path") if outside else None
    if _LOOKS_LIKE_HOST.match(location):
        return RefusedFile(
            location, f"{location}: not a web address; did you mean https://{location} ?", "path"
        )
    return RefusedFile(
        location,
        f"{location}: not an http(s) address; server paths, directories and globs can only "
        "be added by superusers (upload the file instead)",
        "path",
    )


def urls_accept(
    *,
    collection: Collection,
    urls: Sequence[str],
    user: User,
    chunking: str | None = None,
    request_key: str = "",
    allow_paths: bool = False,
) -> Intake:
    """Start one job that fetches and ingests the acceptable ``urls``; refuse the others.

    Each refused address is reported with its reason while the good ones go
    ahead (no job when none is good). ``allow_paths`` lets server paths, directories
    and globs inside the allowed roots through too (superusers). A repeated
    ``request_key`` returns the first submission's job.
    """
    intake = Intake()
    accepted: list[str] = []
    for location in dict.fromkeys(u.strip() for u in urls if u.strip()):
        refused = location_refusal(location, allow_paths=allow_paths)
        if refused is None:
            accepted.append(location)
        else:
            intake.refused.append(refused)
    if not accepted:
        return intake
    intake.job, intake.created = ingestion_job_enqueue(
        collection=collection,
        user=user,
        locations=accepted,
        chunking=chunking or None,
        request_key=request_key,
    )
    intake.accepted = accepted if intake.created else []
    return intake


def source_reingest(*, source: Source, user: User, request_key: str = "") -> Intake:
    """Start a job that reads ``source`` again (an unchanged source costs no embeddings).

    A repeated ``request_key`` returns the first submission's job.
    """
    job, created = ingestion_job_enqueue(
        collection=source.collection, user=user, source_ids=[source.pk], request_key=request_key
    )
    return Intake(job=job, created=created, accepted=[source.display_name] if created else [])
