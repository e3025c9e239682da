"""Turning a collection's summary tree on or off."""

from __future__ import annotations

from django.contrib.auth.models import User

from collections_app.ingestion.summary_tree import summary_tree_remove
from collections_app.models import Collection, IngestionJob, Source
from collections_app.services.collection import collection_index_bump
from collections_app.services.jobs import ingestion_job_enqueue


def collection_summary_tree_set(
    *, collection: Collection, enabled: bool, user: User | None = None
) -> IngestionJob | None:
    """Switch the collection's summary tree; return the job that builds it, if one was queued.

    On: an ingestion job over no new locations is queued; its last step builds
    the tree from the stored passages (unchanged sources cost nothing else).
    Off: every summary node is removed at once and caches are invalidated.
    Setting the current value again does nothing.
    """
    if collection.summary_tree == enabled:
        return None
    collection.summary_tree = enabled
    collection.save(update_fields=["summary_tree", "updated_at"])
    if not enabled:
        if summary_tree_remove(collection=collection):
            collection_index_bump(collection_id=int(collection.pk))
        return None
    if not collection.sources.filter(status=Source.Status.READY, chunk_count__gt=0).exists():
        return None  # built by the first ingestion
    job, _created = ingestion_job_enqueue(collection=collection, user=user)
    return job
