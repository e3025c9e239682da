"""What a run works with: its work items, the sources waiting to be embedded, the
callbacks it is given, its stage timer and the collection's index version as it moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import InterfaceError, OperationalError, connection

from collections_app.ingestion.report import SourceOutcome
from collections_app.ingestion.types import ChunkDraft, LoadedDocument
from collections_app.models import Source

if TYPE_CHECKING:
    from collections_app.ingestion.pipeline.run import IngestionRun

# Database failures that stop the whole run (the server is gone or the
# connection broke): no source is at fault, and the run is resumed later.
DATABASE_LOST = (OperationalError, InterfaceError)

# Told what changed: the run (its report and running figures) and a message.
ProgressCallback = Callable[["IngestionRun", str], None]
# (bytes this run has read, chunks it has cut) -> why they pass a quota, or "".
QuotaCheck = Callable[[int, int], str]
# A server path -> why it may not be read, or "".
PathPolicy = Callable[[str], str]


class RunInterrupted(Exception):
    """The run was asked to stop between two sources; what it finished is kept."""


@dataclass
class WorkItem:
    """One source to (re)ingest: a location, or an existing Source row (uploads)."""

    location: str
    origin: str
    origin_pattern: str = ""
    source: Source | None = None


@dataclass
class PendingSource:
    """A source loaded and chunked, waiting for the next flush to embed and store it."""

    source: Source
    doc: LoadedDocument
    drafts: list[ChunkDraft]
    content_hash: str
    outcome: SourceOutcome


@dataclass
class IndexVersion:
    """The collection's index version (caches key on it) as this run changes the index."""

    collection_id: int
    # Whether this run changed the index at all.
    changed: bool = False
    # The version after this run's last change.
    latest: int = 0

    def bump(self) -> None:
        """Bump the version as part of the change being committed."""
        with connection.cursor() as cur:
            cur.execute(
                "UPDATE collections_app_collection SET index_version = index_version + 1 "
                "WHERE id = %s RETURNING index_version",
                [self.collection_id],
            )
            row = cur.fetchone()
        self.changed = True
        if row is not None:
            self.latest = max(self.latest, int(row[0]))


class StageTimer:
    """Adds the time spent inside ``with`` to ``totals[name]`` (the report's stage seconds)."""

    def __init__(self, totals: dict[str, float], name: str):
        self.totals, self.name = totals, name

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.totals[self.name] = (
            self.totals.get(self.name, 0.0) + time.perf_counter() - self.started
        )
