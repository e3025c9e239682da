"""The end of a run: sources no longer listed are removed, then the collection
records the run's embedding profile and chunking strategy, its summary tree follows
the passages, and its vector index and term statistics catch up with what changed.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import QuerySet

from collections_app.ingestion import storage
from collections_app.ingestion.manifest import Manifest
from collections_app.ingestion.report import SourceOutcome
from collections_app.ingestion.storage import chunks_drop_other_dimensions
from collections_app.ingestion.summary_tree import summary_tree_update
from collections_app.models import Collection, Source
from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure

if TYPE_CHECKING:
    from collections_app.ingestion.pipeline.run import IngestionRun


def vanished_remove(run: IngestionRun, *, pattern: str, seen: set[str]) -> None:
    """Remove the sources ``pattern`` listed before but not in this run (``seen``)."""
    for source in sources_vanished(run.collection, pattern=pattern, seen=seen):
        run.report.sources.append(
            source_remove(source, pattern=pattern, manifest=run.manifest, bump=run.index.bump)
        )


def sources_vanished(collection: Collection, *, pattern: str, seen: set[str]) -> QuerySet[Source]:
    """The sources of ``collection`` that ``pattern`` listed before but not now (``seen``)."""
    return Source.objects.filter(collection=collection, origin_pattern=pattern).exclude(
        location__in=seen
    )


def source_remove(
    source: Source, *, pattern: str, manifest: Manifest, bump: Callable[[], object]
) -> SourceOutcome:
    """Remove ``source``, no longer listed by ``pattern``, with its chunks and manifest
    entry (``bump``: the collection's index version moves on); its outcome."""
    outcome = SourceOutcome(
        location=source.location,
        status="removed",
        reason=f"no longer matched by {pattern}",
        kind=source.kind,
        source_id=source.pk,
    )
    with transaction.atomic():
        manifest.forget(source.location)
        source.delete()
        bump()
    return outcome


def run_finish(run: IngestionRun) -> None:
    """Bring the collection up to date with what ``run`` changed; the report gets its version."""
    collection = run.collection
    update: dict[str, Any] = {}
    if collection.embedding_profile != run.profile and (
        run.index.changed or not collection.embedding_model
    ):
        update.update(
            embedding_provider=run.profile["provider"],
            embedding_model=run.profile["model"],
            embedding_dimensions=run.profile["dimensions"],
        )
    if run.chunking and run.chunking != collection.chunking_strategy:
        update["chunking_strategy"] = run.chunking
    if update:
        for key, value in update.items():
            setattr(collection, key, value)
        collection.save(update_fields=[*update, "updated_at"])
    _summary_tree(run)
    collection.refresh_from_db(fields=["index_version"])
    if run.index.changed or run.reindex:
        if run.reindex:
            # Only a reindex can change the model, hence the vector size.
            _drop_stale_dimensions(run)
        vector_index_ensure(collection_id=collection.pk, dimensions=int(run.profile["dimensions"]))
        # Skipped when a concurrent run's refresh already covered this run's changes.
        collection_term_stats_refresh(collection=collection, covering=run.index.latest)
        if run.report.chunks_written >= storage.ANALYZE_AFTER_CHUNKS:
            storage.chunk_statistics_refresh()
    run.report.index_version = collection.index_version


def _summary_tree(run: IngestionRun) -> None:
    """The run's last step: the summary tree follows the passages (built, rebuilt, removed)."""
    # Read again: the setting may have been switched while the run went on.
    run.collection.refresh_from_db(fields=["summary_tree"])
    timer: AbstractContextManager[Any] = (
        run.stage("summary_tree") if run.collection.summary_tree else nullcontext()
    )
    with timer:
        tree = summary_tree_update(
            collection=run.collection,
            embedder=run.embedder,
            progress=lambda message: run.notify(message),
            should_stop=run.check_stop,
        )
    if tree.changed:
        run.report.summary_tree = tree.as_dict()
        run.index.bump()


def _drop_stale_dimensions(run: IngestionRun) -> None:
    removed = chunks_drop_other_dimensions(
        collection=run.collection, dimensions=int(run.profile["dimensions"])
    )
    if removed:
        run.report.warnings.append(
            f"{removed} source(s) could not be re-embedded with the new model and "
            "were removed from the index until they are ingested again"
        )
