"""Write-side operations on collections: create, ingest, upload, review, remove.

One module per concept; everything a caller needs is importable from here.
"""

from collections_app.services.collection import (
    CollectionExists,
    LastAdmin,
    collection_create,
    collection_delete,
    collection_index_bump,
    collection_update,
    membership_change,
    membership_set,
)
from collections_app.services.jobs import (
    collection_ingest,
    ingestion_job_create,
    ingestion_job_enqueue,
    ingestion_job_execute,
    ingestion_job_for_request,
    work_items_for,
)
from collections_app.services.quarantine import (
    ReviewError,
    ReviewOutcome,
    quarantine_approve,
    quarantine_reject,
    quarantine_review,
)
from collections_app.services.sources import (
    Intake,
    OriginalFile,
    OriginalUnavailable,
    RefusedFile,
    location_refusal,
    source_download_name,
    source_original_open,
    source_reingest,
    source_remove,
    source_upload_create,
    upload_refusal,
    uploads_accept,
    urls_accept,
)

__all__ = [
    "CollectionExists",
    "Intake",
    "LastAdmin",
    "OriginalFile",
    "OriginalUnavailable",
    "RefusedFile",
    "ReviewError",
    "ReviewOutcome",
    "collection_create",
    "collection_delete",
    "collection_index_bump",
    "collection_ingest",
    "collection_update",
    "ingestion_job_create",
    "ingestion_job_enqueue",
    "ingestion_job_execute",
    "ingestion_job_for_request",
    "location_refusal",
    "membership_change",
    "membership_set",
    "quarantine_approve",
    "quarantine_reject",
    "quarantine_review",
    "source_download_name",
    "source_original_open",
    "source_reingest",
    "source_remove",
    "source_upload_create",
    "upload_refusal",
    "uploads_accept",
    "urls_accept",
    "work_items_for",
]
