"""The per-collection incremental manifest.

An entry per source location: {"content_hash", "chunker", "embedding"}. A source
whose entry matches what this run would produce is skipped at zero embedding
cost. The manifest is advisory: if it is missing or corrupt the run simply
ingests everything again (and says so in the report), never crashes.
"""

from __future__ import annotations

import logging
from typing import Any

from collections_app.models import Collection, CollectionManifest

logger = logging.getLogger(__name__)

ENTRY_KEYS = {"content_hash", "chunker", "embedding"}


class Manifest:
    """In-memory view of a collection's manifest, written back at the end of a run."""

    def __init__(self, entries: dict[str, dict[str, Any]], *, trusted: bool, problem: str = ""):
        self.entries = entries
        self.trusted = trusted
        self.problem = problem

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
            self.trusted
            and entry
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
        self.entries[location] = {
            "content_hash": content_hash,
            "chunker": chunker,
            "embedding": embedding,
        }

    def forget(self, location: str) -> None:
        self.entries.pop(location, None)


def manifest_load(*, collection: Collection) -> Manifest:
    """Read and check the manifest; an unusable one yields an untrusted, empty manifest."""
    row = CollectionManifest.objects.filter(collection=collection).first()
    if row is None:
        return Manifest({}, trusted=True)
    data = row.data
    problem = _check(data)
    if problem:
        logger.warning("manifest of %s is unusable (%s): full ingestion", collection.slug, problem)
        return Manifest({}, trusted=False, problem=problem)
    return Manifest(dict(data["entries"]), trusted=True)


def manifest_save(*, collection: Collection, manifest: Manifest) -> None:
    """Write the manifest back (replacing a corrupt one)."""
    CollectionManifest.objects.update_or_create(
        collection=collection, defaults={"data": {"version": 1, "entries": manifest.entries}}
    )


def _check(data: Any) -> str:
    if not isinstance(data, dict) or data.get("version") != 1:
        return "unknown format or version"
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return "entries missing"
    for location, entry in entries.items():
        if not isinstance(entry, dict) or not set(entry) >= ENTRY_KEYS:
            return f"malformed entry for {location!r}"
        if not isinstance(entry["content_hash"], str):
            return f"malformed content hash for {location!r}"
    return ""
