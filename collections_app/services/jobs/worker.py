"""What a worker does: run one named job, or drain the queue of jobs and parts of jobs."""

from __future__ import annotations

import logging
import time

from collections_app.ingestion.pipeline import DATABASE_LOST
from collections_app.ingestion.report import IngestionReport
from collections_app.models import IngestionJob, IngestionPart
from collections_app.services.jobs.fanout import ingestion_part_claim, ingestion_part_run, job_split
from collections_app.services.jobs.heartbeat import JobTiming, worker_identity, worker_stopping
from collections_app.services.jobs.queue import ingestion_job_claim, ingestion_jobs_wake
from collections_app.services.jobs.run import job_run

logger = logging.getLogger(__name__)


def ingestion_job_execute(*, job: IngestionJob) -> IngestionReport | None:
    """Run the recorded job ``job`` now, in this process, keeping its row up to date.

    Idempotent: a job already finished, or running elsewhere, is left alone (None).
    Raises :class:`IngestionError` for a run-level problem, after recording it.
    """
    worker = worker_identity()
    claimed = ingestion_job_claim(worker=worker, job_id=job.pk)
    if claimed is None:
        return None
    return job_run(claimed, worker=worker, into=job)


def ingestion_jobs_drain(*, worker: str | None = None, max_seconds: float | None = None) -> int:
    """Claim and run queued jobs and parts of jobs until none is left; return how many ran.

    Jobs and parts take turns: a worker that ran a job next looks for a part
    first, and the other way round, so neither a flood of small jobs nor a job
    of many parts keeps the other waiting for more than one turn. A job too
    large for one worker is split into parts here, which every woken worker
    shares. Stops early when the worker is shutting down or the database is
    lost (the periodic check wakes a worker again once it is back). After
    ``max_seconds`` it starts nothing more and wakes a worker for what is left,
    so a worker asked to stop (a prefork child finishes its task first) waits
    for one job or part.
    """
    worker = worker or worker_identity()
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    timing = JobTiming.from_settings()
    ran = 0
    part_first = False
    while not worker_stopping.is_set():
        if deadline is not None and time.monotonic() > deadline:
            if _work_waits():
                ingestion_jobs_wake()
            break
        turn = _next_turn(worker=worker, part_first=part_first)
        if turn is None:
            break
        try:
            if isinstance(turn, IngestionPart):
                part_first = False
                ingestion_part_run(turn, worker=worker)
            else:
                part_first = True
                if not job_split(turn, worker=worker, timing=timing):
                    job_run(turn, worker=worker)
        except DATABASE_LOST:
            logger.warning("database lost while running %s; stopping", turn)
            break
        except Exception:  # recorded on the job row; the next job goes ahead
            pass
        ran += 1
    return ran


def _next_turn(*, worker: str, part_first: bool) -> IngestionJob | IngestionPart | None:
    if part_first:
        return ingestion_part_claim(worker=worker) or ingestion_job_claim(worker=worker)
    return ingestion_job_claim(worker=worker) or ingestion_part_claim(worker=worker)


def _work_waits() -> bool:
    return (
        IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).exists()
        or IngestionPart.objects.filter(
            status=IngestionPart.Status.QUEUED, job__status=IngestionJob.Status.RUNNING
        ).exists()
    )
