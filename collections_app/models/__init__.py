"""The corpus: collections, their sources, chunks, manifest, quarantine and jobs.

One module per concept; every model (and ``source_upload_path``, which migrations
name) is importable from ``collections_app.models`` as before. The modules are
imported in the order the models were declared in, so Django registers them in
that same order.
"""

from __future__ import annotations

from collections_app.models.collection import Collection, CollectionMembership
from collections_app.models.documents import Chunk, ManifestEntry, Source, source_upload_path
from collections_app.models.jobs import IngestionJob, IngestionPart
from collections_app.models.provenance import Provenance, QuarantineItem
from collections_app.models.term_stats import TermStat

__all__ = [
    "Chunk",
    "Collection",
    "CollectionMembership",
    "IngestionJob",
    "IngestionPart",
    "ManifestEntry",
    "Provenance",
    "QuarantineItem",
    "Source",
    "TermStat",
    "source_upload_path",
]
