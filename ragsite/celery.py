"""Celery application; configuration comes from Django settings (CELERY_*)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import (
    before_task_publish,
    celeryd_init,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutting_down,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")

logger = logging.getLogger(__name__)

app = Celery("ragsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

BROKER_FOLDER_OPTIONS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


@celeryd_init.connect
@before_task_publish.connect
def embedded_broker_folders_create(**_: Any) -> None:
    """Create the embedded filesystem broker's folders, which kombu expects to exist.

    Done when a worker starts and before a task is published, so neither the worker
    nor a producer (a web request, ``rag ingest --async``) meets a missing folder,
    and importing the settings creates nothing. Other brokers need nothing.
    """
    if not str(app.conf.broker_url or "").startswith("filesystem"):
        return
    options = app.conf.broker_transport_options or {}
    for key in BROKER_FOLDER_OPTIONS:
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


# A pool child loading its models before it reports "up" needs longer than the
# 4 s Celery grants by default.
WARMUP_PROC_ALIVE_TIMEOUT_S = 300.0


@worker_init.connect
def worker_models_warm(sender: Any = None, **_: Any) -> None:
    """Load the models as the worker starts (settings.RAG["warmup"]), before it takes a task.

    A prefork worker forks its pool children after this: they load their own
    (``pool_child_models_warm``), since torch's thread pools do not survive a fork.
    Threads and solo pools run tasks in this process, which loads them now.
    """
    from ragsite.warmup import models_warm, warmup_enabled

    if not warmup_enabled():
        return
    if _is_prefork(getattr(sender, "pool_cls", None)):
        app.conf.worker_proc_alive_timeout = max(
            float(app.conf.worker_proc_alive_timeout or 0), WARMUP_PROC_ALIVE_TIMEOUT_S
        )
        return
    models_warm()


@worker_process_init.connect
def pool_child_models_warm(**_: Any) -> None:
    """A prefork pool child loads the models before it reports that it is up."""
    from ragsite.warmup import models_warm, warmup_enabled

    if warmup_enabled():
        models_warm()


def _is_prefork(pool_cls: Any) -> bool:
    from celery import concurrency

    if pool_cls is None:
        return False
    cls = concurrency.get_implementation(pool_cls) if isinstance(pool_cls, str) else pool_cls
    return str(getattr(cls, "__module__", "")).endswith("concurrency.prefork")


# --- ingestion jobs: recovery after a worker death --------------------------------


@worker_ready.connect
def ingestion_jobs_watch(**_: Any) -> None:
    """As a worker starts: recover jobs a dead worker left, then keep checking.

    Celery beat is not part of every deployment (``bin/start`` runs none), so
    each worker checks by itself from a daemon thread: running jobs whose
    worker went silent are resumed or failed, and waiting jobs get a worker
    woken for them (their message may have died with the old worker).
    """
    thread = threading.Thread(target=_watch_jobs, name="ingestion-jobs-watch", daemon=True)
    thread.start()


@worker_shutting_down.connect
def ingestion_jobs_release(**_: Any) -> None:
    """A stopping worker's jobs stop between two sources and go back to the queue."""
    from collections_app.services.jobs import worker_stopping

    worker_stopping.set()


def _watch_jobs() -> None:
    from django.db import DatabaseError, connection

    from collections_app.services import ingestion_jobs_reconcile
    from collections_app.services.jobs import JobTiming, worker_stopping

    while not worker_stopping.is_set():
        try:
            outcome = ingestion_jobs_reconcile()
            if outcome.resumed or outcome.failed:
                logger.warning(
                    "ingestion jobs whose worker stopped: resumed %s, failed %s",
                    outcome.resumed,
                    outcome.failed,
                )
        except DatabaseError as exc:  # the database is down: try again next time
            logger.warning("could not check the ingestion jobs: %s", exc)
        except Exception:
            logger.exception("checking the ingestion jobs failed")
        finally:
            # No connection is held between checks (nor inherited by a forked child).
            connection.close()
        worker_stopping.wait(JobTiming.from_settings().reconcile_s)
