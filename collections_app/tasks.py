"""Background ingestion on Celery workers.

A message only wakes a worker: the jobs themselves wait in the job table (and
the parts of a large job in the part table), and the worker runs them fairest
first (``collections_app.services.jobs``). A split job sends one message per
part, so that every idle worker takes a share.
"""

from __future__ import annotations

import logging

from celery import shared_task

from collections_app.ingestion.types import IngestionError
from collections_app.models import IngestionJob
from collections_app.services import ingestion_job_execute, ingestion_jobs_drain

logger = logging.getLogger(__name__)

# One message drains the queue for at most this long, then hands over to a new
# message: a worker told to stop never waits for more than the job in hand.
DRAIN_SECONDS = 300.0


@shared_task(bind=True, acks_late=True, ignore_result=True)
def ingestion_job_run_task(self, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Run queued ingestion jobs and parts of jobs, fairest first, until none is left.

    ``job_id`` names the job whose submission sent this message (0: none). On a
    worker it is one of the jobs the drain runs, in its fair turn; run eagerly
    (in the caller's process, tests and ``CELERY_TASK_ALWAYS_EAGER``) only that
    job runs. A vanished job is logged and ignored; a failed job is recorded on
    its row, so nothing is retried here.
    """
    if not self.request.is_eager or not job_id:
        ingestion_jobs_drain(max_seconds=DRAIN_SECONDS)
        return
    job = IngestionJob.objects.select_related("collection", "created_by").filter(pk=job_id).first()
    if job is None:
        logger.warning("ingestion job %s no longer exists", job_id)
        return
    try:
        ingestion_job_execute(job=job)
    except IngestionError:
        # Recorded on the job row (a user error, e.g. unknown chunking); no retry.
        return
