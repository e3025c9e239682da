"""The per-collection incremental manifest: one entry per source location.

An entry records the content hash, chunker settings and embedding profile a
source was last ingested with; a source whose entry matches what this run would
produce is skipped at zero embedding cost.

Entries are rows (:class:`~collections_app.models.ManifestEntry`), written the
moment a source is stored or held and deleted the moment it is removed. So a
run that stops half-way (a killed worker, a database outage) keeps the entries
of every source it finished, and a re-run only does what is missing; and two
runs on one collection each write their own rows, never a stale copy of the
whole manifest over the other's.

The manifest is advisory: a malformed entry only means its source is ingested
again (and the report says so), never a crash.
"""

from __future__ import annotations

import logging
from typing import Any

from collections_app.models import Collection, ManifestEntry

logger = logging.getLogger(__name__)


class Manifest:
    """A collection's entries as read at the start of a run; ``record``/``forget`` write through."""

    def __init__(
        self,
        entries: dict[str, dict[str, Any]],
        *,
        collection_id: int | None = None,
        trusted: bool = True,
        problem: str = "",
        unusable: int = 0,
    ):
        self.entries = entries
        self.collection_id = collection_id
        # False when some entries could not be read: those sources are ingested again.
        self.trusted = trusted
        self.problem = problem
        self.unusable = unusable

    def is_unchanged(
        self,
        location: str,
        *,
        content_hash: str,
        chunker: dict[str, Any],
        embedding: dict[str, Any],
    ) -> bool:
        entry = self.entries.get(location)
        return bool(
            entry
            and entry.get("content_hash") == content_hash
            and entry.get("chunker") == chunker
            and entry.get("embedding") == embedding
        )

    def record(
        self,
        location: str,
        *,
        content_hash: str,
        chunker: dict[str, Any],
        embedding: dict[str, Any],
    ) -> None:
        """Remember what ``location`` was ingested from, in memory and in the database."""
        entry = {"content_hash": content_hash, "chunker": chunker, "embedding": embedding}
        self.entries[location] = entry
        if self.collection_id is not None:
            ManifestEntry.objects.update_or_create(
                collection_id=self.collection_id, location=location, defaults=entry
            )

    def forget(self, location: str) -> None:
        """Drop ``location``'s entry (its source was removed)."""
        self.entries.pop(location, None)
        if self.collection_id is not None:
            ManifestEntry.objects.filter(
                collection_id=self.collection_id, location=location
            ).delete()


def manifest_load(*, collection: Collection) -> Manifest:
    """Read the collection's entries; malformed ones are left out (their sources re-ingested)."""
    entries: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    rows = ManifestEntry.objects.filter(collection=collection).values_list(
        "location", "content_hash", "chunker", "embedding"
    )
    for location, content_hash, chunker, embedding in rows:
        problem = _check(content_hash, chunker, embedding)
        if problem:
            problems.append(f"{problem} for {location!r}")
            continue
        entries[location] = {
            "content_hash": content_hash,
            "chunker": chunker,
            "embedding": embedding,
        }
    if problems:
        logger.warning(
            "manifest of %s has %d unusable entries (%s): those sources are ingested again",
            collection.slug,
            len(problems),
            problems[0],
        )
    return Manifest(
        entries,
        collection_id=int(collection.pk),
        trusted=not problems,
        problem=problems[0] if problems else "",
        unusable=len(problems),
    )


def _check(content_hash: Any, chunker: Any, embedding: Any) -> str:
    if not isinstance(content_hash, str) or len(content_hash) != 64:
        return "malformed content hash"
    if not isinstance(chunker, dict) or not chunker:
        return "malformed chunker settings"
    if not isinstance(embedding, dict) or not embedding:
        return "malformed embedding profile"
    return ""
