"""Ingestion jobs: expand what to read, record a job, run it with live progress.

A job row carries the progress the pages poll; a form submitted twice with the
same one-time token (``request_key``) starts no second job.

The job table is the queue. A Celery message only wakes a worker, which then
claims queued jobs one at a time, fairest first: the owner (user, or the
collection for jobs without one) with the fewest running jobs, then the one
served longest ago. So one user's hundreds of queued jobs delay another user's
job by at most the jobs already running.

A running job's worker writes a heartbeat. A job whose heartbeat stops (the
worker was killed, the database went away) is found by the next worker to
start, by every worker's periodic check, and by anyone reading the job: it is
queued again and resumes where it stopped (what it finished is committed per
source), or, after ``max_attempts`` tries, failed with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.utils import timezone

from collections_app.ingestion.fetch import expand_locations, is_web_url, normalise_url
from collections_app.ingestion.pipeline import (
    DATABASE_LOST,
    IngestionRun,
    PathPolicy,
    ProgressCallback,
    QuotaCheck,
    RunInterrupted,
    WorkItem,
)
from collections_app.ingestion.report import IngestionReport, SourceOutcome, SourceStatus
from collections_app.ingestion.server_paths import server_file_refusal, server_path_refusal
from collections_app.ingestion.types import IngestionError
from collections_app.models import Collection, IngestionJob, Source
from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure
from collections_app.services.quotas import quota_run_check, quota_submission_check

logger = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")

# Same window as ingestion_job_create: a token reused later starts a new job.
REQUEST_KEY_WINDOW = timedelta(minutes=10)

# The full report (one entry per source) is written at most this often while
# a job runs; the counts on every change.
REPORT_EVERY_S = 1.0

# Set when the worker process is shutting down: running jobs stop between two
# sources and go back to the queue, to resume on the next worker.
worker_stopping = threading.Event()


@dataclass(frozen=True)
class JobTiming:
    """Heartbeat and recovery settings (``settings.RAG["jobs"]``)."""

    heartbeat_s: float = 10.0
    stale_s: float = 60.0
    max_attempts: int = 3
    reconcile_s: float = 30.0

    @classmethod
    def from_settings(cls) -> JobTiming:
        config: dict[str, Any] = settings.RAG.get("jobs", {})
        return cls(
            heartbeat_s=float(config.get("heartbeat_s", cls.heartbeat_s)),
            stale_s=float(config.get("stale_s", cls.stale_s)),
            max_attempts=int(config.get("max_attempts", cls.max_attempts)),
            reconcile_s=float(config.get("reconcile_s", cls.reconcile_s)),
        )


def worker_identity() -> str:
    """This process as a job's ``worker``: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def work_items_for(
    *,
    locations: Sequence[str] = (),
    sources: Iterable[Source] = (),
    path_policy: PathPolicy | None = None,
) -> tuple[list[WorkItem], list[str], list[SourceOutcome]]:
    """Expand locations (paths, globs, directories, URLs) and existing sources into work.

    Returns the items, the glob/directory patterns that were re-listed (their
    vanished sources get removed), and failures found while listing. With a
    ``path_policy``, a path or pattern it refuses is a failure and is not listed.
    """
    items: list[WorkItem] = []
    relisted: list[str] = []
    problems: list[SourceOutcome] = []
    for raw in locations:
        if is_web_url(raw):
            items.append(WorkItem(location=normalise_url(raw.strip()), origin=Source.Origin.URL))
            continue
        if "://" in raw:
            problems.append(
                SourceOutcome(
                    location=raw, status="failed", reason="only http and https URLs are supported"
                )
            )
            continue
        path = Path(raw).expanduser()
        pattern = str(path.absolute())
        refusal = path_policy(raw) if path_policy is not None else ""
        if refusal:
            problems.append(SourceOutcome(location=pattern, status="failed", reason=refusal))
            continue
        is_pattern = bool(GLOB_CHARS & set(raw)) or path.is_dir()
        if not is_pattern and not path.exists():
            problems.append(
                SourceOutcome(location=pattern, status="failed", reason="file not found")
            )
            continue
        entries = expand_locations([str(path.absolute())])
        if is_pattern:
            relisted.append(pattern)
            if not entries:
                problems.append(
                    SourceOutcome(
                        location=pattern, status="failed", reason="no files match this pattern"
                    )
                )
        items.extend(
            WorkItem(
                location=loc,
                origin=Source.Origin.PATH,
                origin_pattern=pattern if is_pattern else "",
            )
            for loc, _ in entries
        )
    for source in sources:
        items.append(
            WorkItem(
                location=source.location,
                origin=source.origin,
                origin_pattern=source.origin_pattern,
                source=source if source.origin == Source.Origin.UPLOAD else None,
            )
        )
    return items, relisted, problems


def collection_ingest(
    *,
    collection: Collection,
    locations: Sequence[str] = (),
    sources: Iterable[Source] = (),
    chunking: str | None = None,
    reindex: bool = False,
    user: User | None = None,
    job: IngestionJob | None = None,
    quota: QuotaCheck | None = None,
    restrict_paths: bool = False,
    worker: str = "",
    run_options: dict[str, Any] | None = None,
) -> IngestionReport:
    """Ingest locations and/or existing sources into the collection, synchronously.

    Run-level problems (unknown chunking strategy, embedding profile drift) raise
    before anything is written; per-source problems are in the report. With
    ``restrict_paths`` (work asked for through the web or the API), server
    paths are read only inside the allowed roots (``server_paths``).
    ``worker``: the job's worker (progress is written while the job is still its).
    ``run_options`` go to the :class:`IngestionRun` (should_stop, carried).
    """
    sources = list(sources)
    if reindex:
        # A reindex rebuilds everything the collection holds, whatever was named.
        named = {s.pk for s in sources}
        sources += [
            s
            for s in collection.sources.exclude(status=Source.Status.REJECTED)
            if s.pk not in named
        ]
        locations = [loc for loc in locations if loc not in {s.location for s in sources}]
    items, relisted, problems = work_items_for(
        locations=locations,
        sources=sources,
        path_policy=server_path_refusal if restrict_paths else None,
    )
    options = dict(run_options or {})
    if job is not None:
        options["progress"] = _job_progress(job, total=len(items) + len(problems), worker=worker)
    run = IngestionRun(
        collection=collection,
        chunking=chunking,
        reindex=reindex,
        user=user,
        job=job,
        quota=quota,
        path_policy=server_file_refusal if restrict_paths else None,
        **options,
    )
    run.report.sources.extend(problems)
    return run.run(_dedupe(items), relisted_patterns=relisted)


def _dedupe(items: list[WorkItem]) -> list[WorkItem]:
    seen: set[str] = set()
    unique = []
    for item in items:
        if item.location not in seen:
            seen.add(item.location)
            unique.append(item)
    return unique


def _job_progress(job: IngestionJob, *, total: int, worker: str) -> ProgressCallback:
    """Write a run's progress onto its job row (the counts always, the report now and then).

    Every write is also a heartbeat. With ``worker``, only while the job is still
    this worker's: a job taken over by another worker is left alone.
    """
    IngestionJob.objects.filter(pk=job.pk).update(sources_total=total)
    rows = IngestionJob.objects.filter(pk=job.pk)
    if worker:
        rows = rows.filter(worker=worker, status=IngestionJob.Status.RUNNING)
    last_report = [0.0]

    def update(run: IngestionRun, message: str) -> None:
        report = run.report
        fields: dict[str, Any] = {
            "sources_total": max(total, report.sources_seen),
            "sources_done": report.sources_finished,
            "sources_failed": report.sources_failed,
            "chunks_written": report.chunks_written,
            # Counted as the model works through a batch, before its chunks are stored.
            "embeddings_computed": report.embeddings_computed + run.embedded_in_flush,
            "bytes_ingested": run.bytes_loaded,
            "current": message[:500],
            "heartbeat_at": timezone.now(),
        }
        now = time.monotonic()
        if now - last_report[0] >= REPORT_EVERY_S:
            fields["report"] = report.as_dict()
            last_report[0] = now
        rows.update(**fields)

    return update


class JobHeartbeat:
    """Refreshes a running job's heartbeat from a thread; notices when the job was taken away.

    A job reconciled away from this worker (queued again or failed because its
    heartbeat looked stale) is ``lost``: the run stops at the next source.
    """

    def __init__(self, *, job_id: int, worker: str, interval_s: float) -> None:
        self.job_id, self.worker, self.interval_s = job_id, worker, interval_s
        self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"ingestion-job-{job_id}-heartbeat", daemon=True
        )

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
                    beat = IngestionJob.objects.filter(
                        pk=self.job_id, worker=self.worker, status=IngestionJob.Status.RUNNING
                    ).update(heartbeat_at=timezone.now())
                    if not beat and self._taken_away():
                        self.lost = True
                        return
                except DatabaseError as exc:
                    logger.warning("heartbeat of ingestion job %s failed: %s", self.job_id, exc)
                    connection.close()
        finally:
            connection.close()

    def _taken_away(self) -> bool:
        # A row this connection cannot see (not committed yet) is not a lost job.
        row = IngestionJob.objects.filter(pk=self.job_id).values("worker", "status").first()
        return row is not None and (
            row["worker"] != self.worker or row["status"] != IngestionJob.Status.RUNNING
        )


def ingestion_job_for_request(*, collection: Collection, request_key: str) -> IngestionJob | None:
    """The job an identical earlier submission started, if any.

    An advisory lock on the token serialises two copies of the same submission
    arriving at once, so the second always sees the first one's job.
    """
    if not request_key:
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"ingest:{request_key}"])
    return IngestionJob.objects.filter(
        collection=collection,
        request_key=request_key,
        created_at__gte=timezone.now() - REQUEST_KEY_WINDOW,
    ).first()


def ingestion_job_create(
    *,
    collection: Collection,
    user: User | None = None,
    locations: Sequence[str] = (),
    source_ids: Sequence[int] = (),
    chunking: str | None = None,
    reindex: bool = False,
    request_key: str = "",
    upload_bytes: int = 0,
    operator: bool = False,
    foreground: bool = False,
) -> tuple[IngestionJob, bool]:
    """Record a job; a repeated ``request_key`` within 10 minutes returns the first job.

    Returns (job, created). Raises :class:`QuotaExceeded` when the user's budgets
    do not allow another job. ``operator``: asked by the local operator (the
    CLI), whose server paths are not limited to the allowed roots.
    ``foreground``: run by the command that made it, not by a worker.
    """
    with transaction.atomic():
        earlier = ingestion_job_for_request(collection=collection, request_key=request_key)
        if earlier is not None:
            return earlier, False
        quota_submission_check(user=user, upload_bytes=upload_bytes)
        request: dict[str, Any] = {
            "locations": list(locations),
            "source_ids": list(source_ids),
            "chunking": chunking,
            "reindex": reindex,
        }
        if operator:
            request["operator"] = True
        if foreground:
            request["foreground"] = True
        job = IngestionJob.objects.create(
            collection=collection,
            created_by=user if user is not None and user.is_authenticated else None,
            request=request,
            sources_total=len(locations) + len(source_ids),
            request_key=request_key,
            bytes_reserved=upload_bytes,
        )
    return job, True


def ingestion_job_enqueue(**kwargs: Any) -> tuple[IngestionJob, bool]:
    """Create a job and wake a Celery worker once the transaction commits."""
    from collections_app.tasks import ingestion_job_run_task

    job, created = ingestion_job_create(**kwargs)
    if created:
        ingestion_job_run_task.delay_on_commit(job.pk)
    return job, created


def ingestion_jobs_wake() -> None:
    """Wake a worker to look for queued jobs (after the current transaction commits)."""
    from collections_app.tasks import ingestion_job_run_task

    def publish() -> None:
        try:
            ingestion_job_run_task.delay(0)
        except Exception:  # the broker is down: the next periodic check tries again
            logger.exception("could not wake a worker for queued ingestion jobs")

    transaction.on_commit(publish)


# Fairest first: the owner (user; the collection for jobs without one) with the
# fewest running jobs, then the owner served longest ago, then the oldest job.
CLAIM_SQL = """
WITH owners AS (
    SELECT coalesce(created_by_id, -collection_id) AS owner,
           count(*) FILTER (WHERE status = 'running') AS running,
           max(started_at) AS last_start
    FROM collections_app_ingestionjob
    WHERE status = 'running' OR started_at >= %s
    GROUP BY 1
)
SELECT j.id FROM collections_app_ingestionjob j
LEFT JOIN owners o ON o.owner = coalesce(j.created_by_id, -j.collection_id)
WHERE j.status = 'queued'
ORDER BY coalesce(o.running, 0), o.last_start ASC NULLS FIRST, j.created_at, j.id
LIMIT 1
FOR UPDATE OF j SKIP LOCKED
"""


def ingestion_job_claim(*, worker: str, job_id: int | None = None) -> IngestionJob | None:
    """Mark the fairest queued job (or queued job ``job_id``) running for ``worker``.

    Two workers claiming at once never get the same job (rows locked by one are
    skipped by the other). Returns None when there is nothing to claim.
    """
    with transaction.atomic(), connection.cursor() as cur:
        if job_id is None:
            cur.execute(CLAIM_SQL, [timezone.now() - timedelta(days=1)])
        else:
            cur.execute(
                "SELECT id FROM collections_app_ingestionjob WHERE id = %s AND status = 'queued' "
                "FOR UPDATE SKIP LOCKED",
                [job_id],
            )
        row = cur.fetchone()
        if row is None:
            return None
        now = timezone.now()
        IngestionJob.objects.filter(pk=row[0]).update(
            status=IngestionJob.Status.RUNNING,
            worker=worker,
            heartbeat_at=now,
            started_at=now,
            attempts=F("attempts") + 1,
            current="starting",
        )
    return IngestionJob.objects.select_related("collection", "created_by").get(pk=row[0])


def ingestion_job_execute(*, job: IngestionJob) -> IngestionReport | None:
    """Run the recorded job ``job`` now, in this process, keeping its row up to date.

    Idempotent: a job already finished, or running elsewhere, is left alone (None).
    Raises :class:`IngestionError` for a run-level problem, after recording it.
    """
    worker = worker_identity()
    claimed = ingestion_job_claim(worker=worker, job_id=job.pk)
    if claimed is None:
        return None
    return _job_run(claimed, worker=worker, into=job)


def ingestion_jobs_drain(*, worker: str | None = None, max_seconds: float | None = None) -> int:
    """Claim and run queued jobs, fairest first, until none is left; return how many ran.

    Stops early when the worker is shutting down or the database is lost (the
    periodic check wakes a worker again once it is back). After ``max_seconds``
    it starts no further job and wakes a worker for the ones left, so a worker
    asked to stop (a prefork child finishes its task first) waits for one job.
    """
    worker = worker or worker_identity()
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    ran = 0
    while not worker_stopping.is_set():
        if deadline is not None and time.monotonic() > deadline:
            if IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).exists():
                ingestion_jobs_wake()
            break
        job = ingestion_job_claim(worker=worker)
        if job is None:
            break
        try:
            _job_run(job, worker=worker)
        except DATABASE_LOST:
            logger.warning("database lost while running ingestion job %s; stopping", job.pk)
            break
        except Exception:  # recorded on the job row; the next job goes ahead
            pass
        ran += 1
    return ran


def _job_run(
    job: IngestionJob, *, worker: str, into: IngestionJob | None = None
) -> IngestionReport | None:
    timing = JobTiming.from_settings()
    heartbeat = JobHeartbeat(job_id=job.pk, worker=worker, interval_s=timing.heartbeat_s).start()
    request = job.request or {}
    carried = _carried_outcomes(job)
    try:
        report = collection_ingest(
            collection=job.collection,
            locations=request.get("locations", []),
            sources=Source.objects.filter(
                collection=job.collection, pk__in=request.get("source_ids", [])
            ),
            chunking=request.get("chunking"),
            reindex=bool(request.get("reindex")),
            user=job.created_by,
            job=job,
            quota=quota_run_check(user=job.created_by, job_id=job.pk),
            restrict_paths=not request.get("operator"),
            worker=worker,
            run_options={"should_stop": heartbeat.should_stop, "carried": carried},
        )
    except RunInterrupted:
        if heartbeat.lost:
            logger.warning("ingestion job %s was taken over by another worker", job.pk)
        else:
            # Shutting down: back to the queue, without counting this attempt.
            _job_requeue(job, worker=worker, note="resumes when a worker starts", attempt=False)
        return None
    except DATABASE_LOST:
        logger.exception("ingestion job %s lost the database", job.pk)
        _job_release_after_database_loss(job, worker=worker)
        raise
    except IngestionError as exc:
        _job_finish(
            job, worker=worker, status=IngestionJob.Status.FAILED, error=str(exc), into=into
        )
        raise
    except Exception as exc:
        logger.exception("ingestion job %s failed", job.pk)
        _job_finish(
            job,
            worker=worker,
            status=IngestionJob.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            into=into,
        )
        raise
    finally:
        heartbeat.stop()
    if carried:
        again = sum(1 for s in report.sources if s.location in carried)
        report.warnings.insert(
            0,
            f"resumed after an interruption (attempt {job.attempts}): {again} source(s) "
            "finished before were kept, not done again",
        )
    status = IngestionJob.Status.PARTIAL if report.sources_failed else IngestionJob.Status.SUCCEEDED
    _job_finish(job, worker=worker, status=status, report=report, into=into)
    return report


def _carried_outcomes(job: IngestionJob) -> dict[str, SourceOutcome]:
    """What earlier attempts of ``job`` finished, by location.

    Read from the database (the sources this job read and stored or held), not
    only from the last report written, which may lag behind the work.
    """
    if job.attempts <= 1:
        return {}
    names = {f.name for f in dataclasses.fields(SourceOutcome)}
    reported: dict[str, dict[str, Any]] = {
        entry["location"]: entry
        for entry in (job.report or {}).get("sources", [])
        if isinstance(entry, dict) and isinstance(entry.get("location"), str)
    }
    finished: dict[str, SourceStatus] = {
        Source.Status.READY.value: "ingested",
        Source.Status.QUARANTINED.value: "quarantined",
    }
    carried: dict[str, SourceOutcome] = {}
    sources = Source.objects.filter(provenance__job=job, status__in=list(finished)).distinct()
    for source in sources:
        outcome = SourceOutcome(
            location=source.location,
            status=finished[str(source.status)],
            kind=source.kind,
            source_id=source.pk,
            chunks_written=source.chunk_count,
            embeddings_computed=source.chunk_count,
        )
        entry = reported.get(source.location)
        if entry is not None and entry.get("status") == outcome.status:
            for key, value in entry.items():
                if key in names and key != "location":
                    setattr(outcome, key, value)
        carried[source.location] = outcome
    return carried


def _job_release_after_database_loss(job: IngestionJob, *, worker: str) -> None:
    """Queue the job again if the database answers once more; else the periodic check will."""
    connection.close()
    try:
        _job_requeue(job, worker=worker, note="the database connection was lost")
        ingestion_jobs_wake()
    except DatabaseError:
        logger.warning(
            "ingestion job %s stays running until the database is back and a worker's "
            "periodic check resumes it",
            job.pk,
        )


def _job_requeue(job: IngestionJob, *, worker: str, note: str, attempt: bool = True) -> bool:
    """Put a job this worker was running back in the queue, to resume where it stopped."""
    fields: dict[str, Any] = {
        "status": IngestionJob.Status.QUEUED,
        "worker": "",
        "heartbeat_at": None,
        "current": f"waiting to resume: {note}"[:500],
    }
    if not attempt:
        fields["attempts"] = F("attempts") - 1
    return bool(
        IngestionJob.objects.filter(
            pk=job.pk, worker=worker, status=IngestionJob.Status.RUNNING
        ).update(**fields)
    )


def _job_finish(
    job: IngestionJob,
    *,
    status: str,
    worker: str = "",
    error: str = "",
    report: IngestionReport | None = None,
    into: IngestionJob | None = None,
) -> None:
    fields: dict[str, Any] = {
        "status": status,
        "error": error,
        "finished_at": timezone.now(),
        "current": "",
        "bytes_reserved": 0,
    }
    if report is not None:
        data = report.as_dict()
        fields.update(
            report=data,
            sources_total=len(report.sources),
            sources_done=len(report.sources),
            sources_failed=report.sources_failed,
            chunks_written=report.chunks_written,
            embeddings_computed=report.embeddings_computed,
        )
    rows = IngestionJob.objects.filter(pk=job.pk)
    if worker:
        rows = rows.filter(worker=worker)
    rows.update(**fields)
    for target in (job, into):
        if target is not None:
            for key, value in fields.items():
                setattr(target, key, value)


# --- recovery ---------------------------------------------------------------------------


@dataclass
class ReconcileOutcome:
    """What one check of the running jobs did."""

    resumed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    woke: bool = False


def ingestion_jobs_reconcile(*, job_id: int | None = None) -> ReconcileOutcome:
    """Find running jobs whose worker stopped; queue them to resume, or fail them for good.

    A worker stopped when its heartbeat is older than ``stale_s``, or when it
    ran on this machine and its process is gone. A job run by a command (not a
    worker) is failed, not resumed; a job tried ``max_attempts`` times is failed
    with the reason, its unfinished sources marked failed. When jobs wait and
    none is running, a worker is woken (its message may have been lost with the
    one that died). ``job_id`` limits the check to one job (a page reading it).
    """
    timing = JobTiming.from_settings()
    now = timezone.now()
    outcome = ReconcileOutcome()
    with transaction.atomic():
        running = IngestionJob.objects.select_for_update(skip_locked=True).filter(
            status=IngestionJob.Status.RUNNING
        )
        if job_id is not None:
            running = running.filter(pk=job_id)
        for job in running:
            why = _worker_gone(job, now=now, timing=timing)
            if not why:
                continue
            if (job.request or {}).get("foreground"):
                _job_abandon(job, reason=f"the command running it stopped ({why})")
                outcome.failed.append(job.pk)
            elif job.attempts >= timing.max_attempts:
                _job_abandon(
                    job,
                    reason=(
                        f"it was interrupted {job.attempts} times ({why}); the sources it "
                        "finished are kept, start it again to finish the rest"
                    ),
                )
                outcome.failed.append(job.pk)
            else:
                _job_requeue(job, worker=job.worker, note=why)
                outcome.resumed.append(job.pk)
                logger.warning("ingestion job %s: %s; it will resume", job.pk, why)
        if job_id is None or outcome.resumed:
            waiting = IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).exists()
            busy = IngestionJob.objects.filter(
                status=IngestionJob.Status.RUNNING,
                heartbeat_at__gte=now - timedelta(seconds=timing.stale_s),
            ).exists()
            if waiting and (outcome.resumed or not busy):
                ingestion_jobs_wake()
                outcome.woke = True
    for pk in outcome.failed:
        _collection_index_settle(pk)
    return outcome


def ingestion_job_refresh(*, job: IngestionJob) -> IngestionJob:
    """``job`` as it stands, after checking that a running job's worker is still alive.

    Called when a page or the API reads a job: a job whose worker died is
    resumed (or failed) now instead of showing "running" forever.
    """
    if job.status != IngestionJob.Status.RUNNING:
        return job
    timing = JobTiming.from_settings()
    if not _worker_gone(job, now=timezone.now(), timing=timing):
        return job
    ingestion_jobs_reconcile(job_id=job.pk)
    job.refresh_from_db()
    return job


def _worker_gone(job: IngestionJob, *, now: datetime, timing: JobTiming) -> str:
    """Why ``job``'s worker is taken to be gone, or "" while it may be alive."""
    last = job.heartbeat_at or job.started_at or job.created_at
    silent = (now - last).total_seconds()
    if silent > timing.stale_s:
        return f"no sign of life from its worker for {round(silent)} s"
    host, _, pid = job.worker.rpartition(":")
    if (
        host == socket.gethostname()
        and pid.isdigit()
        and silent > 2 * timing.heartbeat_s
        and not _process_alive(int(pid))
    ):
        return f"its worker process ({job.worker}) is no longer running"
    return ""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _job_abandon(job: IngestionJob, *, reason: str) -> None:
    """Fail a job whose worker is gone for good; its unfinished sources say why."""
    IngestionJob.objects.filter(pk=job.pk).update(
        status=IngestionJob.Status.FAILED,
        error=reason[:2000],
        finished_at=timezone.now(),
        current="",
        worker="",
        bytes_reserved=0,
    )
    stuck = Source.objects.filter(
        provenance__job=job, status__in=[Source.Status.INGESTING, Source.Status.PENDING]
    ).distinct()
    for source in stuck:
        Source.objects.filter(pk=source.pk).update(
            status=Source.Status.READY if source.chunk_count else Source.Status.FAILED,
            error=f"interrupted: {reason}"[:2000],
        )
    pending_uploads = Source.objects.filter(
        pk__in=(job.request or {}).get("source_ids", []), status=Source.Status.PENDING
    )
    pending_uploads.update(status=Source.Status.FAILED, error=f"not ingested: {reason}"[:2000])
    logger.warning("ingestion job %s failed: %s", job.pk, reason)


def _collection_index_settle(job_id: int) -> None:
    """After a job failed half-way, bring its collection's index and statistics up to date."""
    job = IngestionJob.objects.select_related("collection").filter(pk=job_id).first()
    if job is None or not job.chunks_written:
        return
    collection = job.collection
    try:
        if collection.embedding_dimensions:
            vector_index_ensure(
                collection_id=collection.pk, dimensions=int(collection.embedding_dimensions)
            )
        collection_term_stats_refresh(collection=collection)
    except DatabaseError:
        logger.exception("could not refresh the index of collection %s", collection.slug)
