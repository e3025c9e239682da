"""The ingestion pipeline: load → validate → chunk → embed → upsert, per source.

Every source is fault-isolated: an error in one gives it a failed status with
the reason and the run goes on. Embedding is batched across sources so the
model sees full batches even when documents are small.

What a run finishes is kept as it goes: each source's chunks, its manifest
entry and the collection's index version are committed together, one source
at a time. A run that stops (a killed worker, a lost database) is resumed by
running it again: the sources it finished are unchanged and cost nothing. A
lost database stops the run instead of failing every remaining source, since
none of them is at fault.

The run itself is ``run.py``; ``sources.py`` reads a source and records it,
``embed.py`` embeds a flush, ``finish.py`` brings the collection up to date at
the end, and ``work.py`` holds the run's small types.
"""

from collections_app.ingestion.pipeline.embed import EMBED_PROGRESS_CHUNKS
from collections_app.ingestion.pipeline.run import IngestionRun
from collections_app.ingestion.pipeline.work import (
    DATABASE_LOST,
    PathPolicy,
    ProgressCallback,
    QuotaCheck,
    RunInterrupted,
    WorkItem,
)

__all__ = [
    "DATABASE_LOST",
    "EMBED_PROGRESS_CHUNKS",
    "IngestionRun",
    "PathPolicy",
    "ProgressCallback",
    "QuotaCheck",
    "RunInterrupted",
    "WorkItem",
]
