"""One source's first steps in a run: reading its bytes (a URL, a server path, an
upload), recording where they came from and what was extracted on its Source row,
and the outcome of a source that is unchanged since it was last ingested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collections_app.ingestion.fetch import fetch_url, read_path
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.pipeline.work import PathPolicy, WorkItem
from collections_app.ingestion.report import SourceOutcome
from collections_app.ingestion.types import IngestionError, LoadedDocument, RawSource
from collections_app.models import Collection, IngestionJob, Provenance, Source


def source_read(
    item: WorkItem, *, limits: IngestionLimits, path_policy: PathPolicy | None
) -> RawSource:
    """The bytes of ``item``: fetched, read on the server (if ``path_policy`` allows), uploaded."""
    if item.origin == Source.Origin.URL:
        return fetch_url(item.location, limits=limits)
    if item.origin == Source.Origin.PATH and path_policy is not None:
        refusal = path_policy(item.location)
        if refusal:
            raise IngestionError(refusal)
        # Read what the check resolved (symlinks, ..), not the name again.
        return read_path(Path(item.location).resolve(), limits=limits)
    if item.origin == Source.Origin.UPLOAD:
        assert item.source is not None
        if not item.source.file:
            raise IngestionError("the uploaded file is missing")
        with item.source.file.open("rb") as fh:
            data = fh.read(limits.max_file_bytes + 1)
        # The name the person uploaded, not the storage's de-duplicated one
        # ("report_x7Kp2.pdf"): it is the title of last resort and a format hint.
        name = item.location.removeprefix("upload:") or Path(item.source.file.name).name
        raw = RawSource(location=item.location, origin="upload", data=data, filename=name)
        return raw
    return read_path(Path(item.location), limits=limits)


def provenance_record(
    *,
    collection: Collection,
    source: Source,
    job: IngestionJob | None,
    user: Any,
    raw: RawSource,
    content_hash: str,
) -> None:
    """Record where the bytes of ``source`` came from, who sent them and what they were."""
    Provenance.objects.create(
        collection=collection,
        source=source,
        job=job,
        location=source.location,
        origin=source.origin,
        final_url=raw.final_url,
        http_status=raw.http_status,
        content_hash=content_hash,
        size_bytes=len(raw.data),
        mime=raw.declared_mime,
        submitted_by=user if getattr(user, "is_authenticated", False) else None,
    )


def source_document_store(
    *, source: Source, raw: RawSource, doc: LoadedDocument, content_hash: str
) -> None:
    """Store the extracted document on ``source``, which is being ingested from now on."""
    source.kind = doc.kind
    source.mime = doc.mime
    source.title = doc.title[:500]
    source.size_bytes = len(raw.data)
    source.text_chars = len(doc.text)
    source.text = doc.text
    source.metadata = {
        **doc.metadata,
        "pages": [[p.number, p.char_start, p.char_end, p.has_text] for p in doc.pages],
        "warnings": doc.warnings,
        "pending_hash": content_hash,
    }
    source.status = Source.Status.INGESTING
    source.error = ""
    source.save()


def unchanged_outcome_fill(
    outcome: SourceOutcome, *, source: Source, carried: dict[str, SourceOutcome]
) -> None:
    """Fill ``outcome`` for an unchanged source.

    A source an earlier attempt of the job finished keeps that attempt's outcome
    (``carried``, by location); any other is ``unchanged``.
    """
    earlier = carried.get(outcome.location)
    if earlier is not None and earlier.status in {"ingested", "quarantined"}:
        # Finished by an earlier attempt of this job: its outcome stands.
        outcome.status = earlier.status
        outcome.reason = earlier.reason
        outcome.chunks_written = earlier.chunks_written
        outcome.embeddings_computed = earlier.embeddings_computed
        outcome.verdict = earlier.verdict
        outcome.signals = list(earlier.signals)
        outcome.warnings = list(earlier.warnings)
        outcome.kind = earlier.kind or source.kind
        return
    outcome.status = "unchanged"
    outcome.kind = source.kind
    if source.status == Source.Status.QUARANTINED:
        outcome.reason = "unchanged; still awaiting review in the quarantine"
