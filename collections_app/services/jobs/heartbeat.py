"""Signs of life: a running job's (or part's) heartbeat, and telling a dead worker from a slow one."""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from collections_app.models import IngestionJob, IngestionPart

logger = logging.getLogger(__name__)

# Set when the worker process is shutting down: running jobs stop between two
# sources and go back to the queue, to resume on the next worker.
worker_stopping = threading.Event()


@dataclass(frozen=True)
class JobTiming:
    """Heartbeat, recovery and fan-out settings (``settings.RAG["jobs"]``)."""

    heartbeat_s: float = 10.0
    stale_s: float = 60.0
    max_attempts: int = 3
    reconcile_s: float = 30.0
    # A job of more sources than this is split into parts of this many sources,
    # which any number of workers share (0: never split).
    part_sources: int = 32

    @classmethod
    def from_settings(cls) -> JobTiming:
        config: dict[str, Any] = settings.RAG.get("jobs", {})
        return cls(
            heartbeat_s=float(config.get("heartbeat_s", cls.heartbeat_s)),
            stale_s=float(config.get("stale_s", cls.stale_s)),
            max_attempts=int(config.get("max_attempts", cls.max_attempts)),
            reconcile_s=float(config.get("reconcile_s", cls.reconcile_s)),
            part_sources=int(config.get("part_sources", cls.part_sources)),
        )


def worker_identity() -> str:
    """This process as a job's ``worker``: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class JobHeartbeat:
    """Refreshes a running job's heartbeat from a thread; notices when the job was taken away.

    A job reconciled away from this worker (queued again or failed because its
    heartbeat looked stale) is ``lost``: the run stops at the next source. With
    ``part_id`` it beats for that part of the job, and for the job as a whole.
    """

    def __init__(
        self, *, job_id: int, worker: str, interval_s: float, part_id: int | None = None
    ) -> None:
        self.job_id, self.worker, self.interval_s = job_id, worker, interval_s
        self.part_id = part_id
        self.lost = False
        self._done = threading.Event()
        name = f"ingestion-job-{job_id}" + (f"-part-{part_id}" if part_id else "")
        self._thread = threading.Thread(target=self._beat, name=f"{name}-heartbeat", daemon=True)

    def start(self) -> JobHeartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=max(5.0, self.interval_s))

    def should_stop(self) -> bool:
        """Asked by the run between sources: stop when the job is lost or the worker stops."""
        return self.lost or worker_stopping.is_set()

    def _beat(self) -> None:
        try:
            while not self._done.wait(self.interval_s):
                try:
                    if not self._beat_once() and self._taken_away():
                        self.lost = True
                        return
                except DatabaseError as exc:
                    logger.warning("heartbeat of ingestion job %s failed: %s", self.job_id, exc)
                    connection.close()
        finally:
            connection.close()

    def _beat_once(self) -> bool:
        now = timezone.now()
        if self.part_id is None:
            return bool(
                IngestionJob.objects.filter(
                    pk=self.job_id, worker=self.worker, status=IngestionJob.Status.RUNNING
                ).update(heartbeat_at=now)
            )
        beat = IngestionPart.objects.filter(
            pk=self.part_id, worker=self.worker, status=IngestionPart.Status.RUNNING
        ).update(heartbeat_at=now)
        if beat:
            # The job lives as long as one of its parts does.
            IngestionJob.objects.filter(pk=self.job_id, status=IngestionJob.Status.RUNNING).update(
                heartbeat_at=now
            )
        return bool(beat)

    def _taken_away(self) -> bool:
        # A row this connection cannot see (not committed yet) is not a lost job.
        rows = (
            IngestionJob.objects.filter(pk=self.job_id)
            if self.part_id is None
            else IngestionPart.objects.filter(pk=self.part_id)
        )
        row = rows.values("worker", "status").first()
        return row is not None and (row["worker"] != self.worker or row["status"] != "running")


def worker_gone(row: IngestionJob | IngestionPart, *, now: datetime, timing: JobTiming) -> str:
    """Why the worker of ``row`` (a job or a part) is taken to be gone, or "" while it may be alive."""
    last = row.heartbeat_at or row.started_at or row.created_at
    silent = (now - last).total_seconds()
    if silent > timing.stale_s:
        return f"no sign of life from its worker for {round(silent)} s"
    host, _, pid = row.worker.rpartition(":")
    if (
        host == socket.gethostname()
        and pid.isdigit()
        and silent > 2 * timing.heartbeat_s
        and not _process_alive(int(pid))
    ):
        return f"its worker process ({row.worker}) is no longer running"
    return ""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
