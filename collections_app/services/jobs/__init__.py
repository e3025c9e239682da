"""Ingestion jobs: expand what to read, record a job, run it with live progress.

A job row carries the progress the pages poll; a form submitted twice with the
same one-time token (``request_key``) starts no second job.

The job table is the queue (``queue.py``). A Celery message only wakes a
worker, which then claims queued jobs one at a time, fairest first: the owner
(user, or the collection for jobs without one) with the fewest running jobs,
then the one served longest ago. So one user's hundreds of queued jobs delay
another user's job by at most the jobs already running.

A job of more sources than ``part_sources`` is split into parts
(``fanout.py``): rows of the part table, which is a queue too, claimed by any
number of workers on any machines. Their progress adds up on the job row, and
the part that ends last finishes the job, once.

A running job's (or part's) worker writes a heartbeat (``heartbeat.py``). One
whose heartbeat stops (the worker was killed, the database went away) is found
by the next worker to start, by every worker's periodic check, and by anyone
reading the job (``reconcile.py``): it is queued again and resumes where it
stopped (what it finished is committed per source), or, after
``max_attempts`` tries, failed with the reason.
"""

from collections_app.services.jobs.heartbeat import (
    JobHeartbeat,
    JobTiming,
    worker_identity,
    worker_stopping,
)
from collections_app.services.jobs.queue import (
    ingestion_job_claim,
    ingestion_job_create,
    ingestion_job_enqueue,
    ingestion_job_for_request,
    ingestion_jobs_wake,
)
from collections_app.services.jobs.reconcile import (
    ReconcileOutcome,
    ingestion_job_refresh,
    ingestion_jobs_reconcile,
)
from collections_app.services.jobs.run import collection_ingest, work_items_for
from collections_app.services.jobs.worker import ingestion_job_execute, ingestion_jobs_drain

__all__ = [
    "JobHeartbeat",
    "JobTiming",
    "ReconcileOutcome",
    "collection_ingest",
    "ingestion_job_claim",
    "ingestion_job_create",
    "ingestion_job_enqueue",
    "ingestion_job_execute",
    "ingestion_job_for_request",
    "ingestion_job_refresh",
    "ingestion_jobs_drain",
    "ingestion_jobs_reconcile",
    "ingestion_jobs_wake",
    "work_items_for",
    "worker_identity",
    "worker_stopping",
]
