"""Background ingestion on Celery workers."""

from __future__ import annotations

import logging

from celery import shared_task

from collections_app.ingestion.types import IngestionError
from collections_app.models import IngestionJob
from collections_app.services import ingestion_job_execute

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=2, default_retry_delay=10)
def ingestion_job_run_task(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Run ingestion job ``job_id``; a vanished job is logged and ignored."""
    job = IngestionJob.objects.select_related("collection", "created_by").filter(pk=job_id).first()
    if job is None:
        logger.warning("ingestion job %s no longer exists", job_id)
        return
    try:
        ingestion_job_execute(job=job)
    except IngestionError:
        # Recorded on the job row (a user error, e.g. unknown chunking); no retry.
        return
