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
    collection_web_fallback_set,
    membership_change,
    membership_set,
)
from collections_app.services.jobs import (
    collection_ingest,
    ingestion_job_claim,
    ingestion_job_create,
    ingestion_job_enqueue,
    ingestion_job_execute,
    ingestion_job_for_request,
    ingestion_job_refresh,
    ingestion_jobs_drain,
    ingestion_jobs_reconcile,
    work_items_for,
)
from collections_app.services.quarantine import (
    ReviewError,
    ReviewOutcome,
    quarantine_approve,
    quarantine_reject,
    quarantine_review,
)
from collections_app.services.quotas import QuotaExceeded
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
from collections_app.services.summary_tree import collection_summary_tree_set

__all__ = [
    "CollectionExists",
    "Intake",
    "LastAdmin",
    "OriginalFile",
    "OriginalUnavailable",
    "QuotaExceeded",
    "RefusedFile",
    "ReviewError",
    "ReviewOutcome",
    "collection_create",
    "collection_delete",
    "collection_index_bump",
    "collection_ingest",
    "collection_summary_tree_set",
    "collection_update",
    "collection_web_fallback_set",
    "ingestion_job_claim",
    "ingestion_job_create",
    "ingestion_job_enqueue",
    "ingestion_job_execute",
    "ingestion_job_for_request",
    "ingestion_job_refresh",
    "ingestion_jobs_drain",
    "ingestion_jobs_reconcile",
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
