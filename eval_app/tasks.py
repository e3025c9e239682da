"""Background evaluation runs on Celery workers."""

from __future__ import annotations

import logging

from celery import shared_task

from eval_app.models import EvalRun
from eval_app.services import eval_run_execute

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=2, default_retry_delay=10)
def eval_run_task(self, run_id: int) -> None:  # type: ignore[no-untyped-def]
    """Execute evaluation run ``run_id``; a vanished run is logged and ignored.

    Execution is resumable: a retried task skips the (case, profile) pairs already
    stored. Expected failures are recorded on the run row, not retried.
    """
    run = EvalRun.objects.filter(pk=run_id).first()
    if run is None:
        logger.warning("evaluation run %s no longer exists", run_id)
        return
    eval_run_execute(run=run)
