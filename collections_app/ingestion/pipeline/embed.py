"""Embedding one flush of a run: its passages in steps of like length, reporting
progress and heeding a stop between steps, and their units' vectors when
ingestion embeds those too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from collections_app.embedding.unit_vectors import ChunkUnits, unit_vectors_compute
from collections_app.ingestion.pipeline.work import PendingSource

if TYPE_CHECKING:
    from collections_app.ingestion.pipeline.run import IngestionRun

# Chunks embedded between two progress reports while a large source is embedded.
EMBED_PROGRESS_CHUNKS = 128


def passages_embed(run: IngestionRun, texts: list[str], pending: list[PendingSource]) -> Any:
    """Embed ``texts`` in steps, reporting progress (and heeding a stop) between them.

    The steps take the passages longest first (characters stand in for
    tokens), so each step holds passages of like length and the embedder,
    which sorts by tokens within a call, pads little; vectors come back in
    the order of ``texts``.
    """
    import numpy as np

    if len(texts) <= EMBED_PROGRESS_CHUNKS:
        with run.stage("embed"):
            return run.embedder.encode(texts)
    names = ", ".join(p.source.display_name for p in pending[:3])
    if len(pending) > 3:
        names += f" and {len(pending) - 3} more"
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    parts = []
    for start in range(0, len(texts), EMBED_PROGRESS_CHUNKS):
        run.check_stop()
        step = order[start : start + EMBED_PROGRESS_CHUNKS]
        with run.stage("embed"):
            parts.append(run.embedder.encode([texts[i] for i in step]))
        run.embedded_in_flush = min(len(texts), start + EMBED_PROGRESS_CHUNKS)
        run.notify(f"embedding {names}: {run.embedded_in_flush} of {len(texts)} passages")
    vectors = np.empty_like(parts[0], shape=(len(texts), parts[0].shape[1]))
    vectors[order] = np.concatenate(parts)
    return vectors


def units_embed(run: IngestionRun, pending: list[PendingSource]) -> list[bytes | None]:
    """Per chunk of ``pending`` (in order), its units' vectors for extractive answers.

    With ``RAG["ingestion"]["unit_vectors"]`` = ``ingestion``, embedded now,
    with the passages, so that no answer embeds them while a question waits
    (``collections_app.embedding.unit_vectors``); in steps of
    ``EMBED_PROGRESS_CHUNKS`` chunks, heeding a stop between them. By
    default (``first-use``) none: the first answer that reads a passage
    embeds and stores them.
    """
    if not run.units_at_ingestion:
        return [None] * sum(len(p.drafts) for p in pending)
    chunks = [
        ChunkUnits(text=d.text, title=p.source.title, location=p.source.location)
        for p in pending
        for d in p.drafts
    ]
    blobs: list[bytes | None] = []
    for start in range(0, len(chunks), EMBED_PROGRESS_CHUNKS):
        if start:
            run.check_stop()
        with run.stage("embed"):
            blobs += unit_vectors_compute(
                run.embedder, chunks[start : start + EMBED_PROGRESS_CHUNKS]
            )
    return blobs
