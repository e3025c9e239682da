"""Writing a source's chunks, and rebuilding a stored document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from collections_app.ingestion.chunking import chunk_id
from collections_app.ingestion.types import ChunkDraft, LoadedDocument, PageSpan
from collections_app.models import Chunk, Collection, Source

# A run that writes at least this many chunks refreshes the table's planner
# statistics. Autovacuum waits for 10% of a large table to change, so without
# this a new 100k-chunk collection beside a million others looked empty to the
# planner, which then chose plans that walk the whole collection.
ANALYZE_AFTER_CHUNKS = 1000

UPDATED_FIELDS = [
    "text",
    "header",
    "char_start",
    "char_end",
    "page",
    "section_path",
    "token_count",
    "metadata",
    "embedding",
    "unit_vectors",
    "source_hash",
    "ordinal",
]


def chunks_replace(
    *,
    collection: Collection,
    source: Source,
    content_hash: str,
    drafts: Sequence[ChunkDraft],
    vectors: Any,
    unit_vectors: Sequence[bytes | None] | None = None,
) -> int:
    """Write a source's new chunks, then drop its old ones, in one transaction.

    Readers see either the old version or the new one, never neither. Returns
    the number of chunks written. ``unit_vectors``: per draft, its units' vectors
    (``collections_app.embedding.unit_vectors``), or none.
    """
    blobs = list(unit_vectors) if unit_vectors is not None else [None] * len(drafts)
    chunks = [
        Chunk(
            # Ids are per collection: two collections may hold the same file.
            id=chunk_id(
                location=f"{collection.pk}:{source.location}",
                content_hash=content_hash,
                ordinal=d.ordinal,
            ),
            collection=collection,
            source=source,
            source_hash=content_hash,
            ordinal=d.ordinal,
            text=d.text,
            char_start=d.char_start,
            char_end=d.char_end,
            page=d.page,
            section_path=d.section_path,
            token_count=d.token_count,
            metadata=d.metadata,
            header=d.header,
            embedding=vec,
            unit_vectors=blob,
        )
        for d, vec, blob in zip(drafts, vectors, blobs, strict=True)
    ]
    with transaction.atomic():
        Chunk.objects.bulk_create(
            chunks,
            batch_size=500,
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=UPDATED_FIELDS,
        )
        Chunk.objects.filter(source=source).exclude(id__in=[c.id for c in chunks]).delete()
        source.status = Source.Status.READY
        source.content_hash = content_hash
        source.chunk_count = len(chunks)
        source.ingested_at = timezone.now()
        source.metadata.pop("pending_hash", None)
        source.save()
    return len(chunks)


def chunks_drop_other_dimensions(*, collection: Collection, dimensions: int) -> int:
    """Remove chunks whose vectors are not ``dimensions`` long; return how many sources lost them.

    After a reindex to another model size, chunks that could not be
    re-embedded no longer fit the collection's index; their sources are marked
    failed so they can be ingested again.
    """
    stale = Chunk.objects.filter(collection=collection).extra(
        where=["vector_dims(embedding) <> %s"], params=[int(dimensions)]
    )
    source_ids = set(stale.values_list("source_id", flat=True))
    if source_ids:
        stale.delete()
        Source.objects.filter(pk__in=source_ids).update(status=Source.Status.FAILED, chunk_count=0)
    return len(source_ids)


def document_from_source(source: Source) -> LoadedDocument:
    """Rebuild the LoadedDocument stored on a source (for quarantine approval)."""
    pages = [PageSpan(n, s, e, bool(t)) for n, s, e, t in source.metadata.get("pages", [])]
    meta = {
        k: v for k, v in source.metadata.items() if k not in {"pages", "warnings", "pending_hash"}
    }
    return LoadedDocument(
        text=source.text,
        kind=source.kind,
        mime=source.mime,
        title=source.title,
        metadata=meta,
        pages=pages,
    )


def chunk_statistics_refresh() -> None:
    """ANALYZE the chunk table: a sample of rows, so it costs about a second at a million."""
    with connection.cursor() as cur:
        cur.execute("ANALYZE collections_app_chunk")
