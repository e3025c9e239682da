"""Two real Celery workers share one ingestion job, and one of them is killed mid-job.

The workers consume a private queue on the loopback Redis and use the test
database. The job is split into parts of two sources; one part holds a web page
on 127.0.0.1 that answers only when the test lets it, which parks that part's
worker at a known point: the test kills that worker there with SIGKILL. The
other worker's periodic check sees the dead worker's part and queues it again,
and the part resumes on the surviving worker without redoing what it stored.
The result is compared with the same sources ingested whole, in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from collections_app.models import IngestionJob, IngestionPart, Provenance, Source
from collections_app.services import (
    collection_create,
    ingestion_job_create,
    ingestion_job_execute,
)
from tests.support.celery_worker import celery_worker_start
from tests.support.gated_server import GatedPageServer
from tests.support.ingestion_results import (
    chunk_rows,
    duplicate_chunks,
    job_transitions_record,
    manifest_rows,
    notes_write,
)

ROOT = Path(settings.BASE_DIR)
BROKER = "redis://127.0.0.1:6379/7"
WAIT_S = 240.0


def _env(queue: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        RAGSITE_DB_NAME=settings.DATABASES["default"]["NAME"],
        CELERY_BROKER_URL=BROKER,
        CELERY_QUEUE=queue,
        RAG_ALLOW_PRIVATE_URLS="1",
        RAG_JOB_PART_SOURCES="2",
        RAG_JOB_HEARTBEAT_S="0.5",
        RAG_JOB_STALE_S="20",
        RAG_JOB_RECONCILE_S="1",
        OMP_NUM_THREADS="1",
    )
    return environment


def _wait(condition, timeout_s: float = WAIT_S) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_two_workers_share_a_job_and_one_killed_mid_job_loses_nothing(
    user, collection, tmp_path, rag_set
):
    notes = notes_write(tmp_path / "notes", 8)
    page = GatedPageServer(timeout_s=WAIT_S).start()
    try:
        _check_shared_job(user, collection, notes, page, rag_set)
    finally:
        page.stop()


def _check_shared_job(user, collection, notes, page, rag_set) -> None:  # type: ignore[no-untyped-def]
    # Parts of two: the page is the second source of the third part.
    locations = [*notes[:5], page.url, *notes[5:]]
    queue = f"test-{uuid.uuid4().hex[:8]}"
    writes = job_transitions_record()
    queued = subprocess.run(
        [
            *(sys.executable, "manage.py", "rag", "ingest", "--async", "--json"),
            *("--collection", collection.slug, *locations),
        ],
        cwd=ROOT,
        env=_env(queue),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert queued.returncode == 0, queued.stderr
    job = IngestionJob.objects.get(pk=json.loads(queued.stdout)["job_id"])
    workers = [celery_worker_start(queue, _env(queue)) for _ in range(2)]
    outputs: list[str] = []
    try:
        killed = _kill_the_parked_worker(job, page, workers)
        page.open()
        finished = _wait(lambda: IngestionJob.objects.get(pk=job.pk).is_finished)
    finally:
        _workers_stop(workers, outputs)
    job.refresh_from_db()
    assert finished, outputs
    assert job.status == "succeeded", (job.error, outputs)
    assert (job.parts_total, job.parts_done, job.parts_failed) == (5, 5, 0)
    assert (job.sources_total, job.sources_done, job.sources_failed) == (9, 9, 0)
    # The killed worker's part was done again by the other worker, once.
    parked = IngestionPart.objects.get(job=job, index=2)
    assert parked.attempts == 2 and parked.worker not in {"", killed}
    assert Provenance.objects.filter(job=job, location=notes[5]).count() == 1
    # Progress moved forward and the job finished exactly once.
    rows = [row for row in writes() if row["job"] == job.pk]
    done = [row["sources_done"] for row in rows if row["status"] == "running"]
    assert done == sorted(done)
    assert [row["status"] for row in rows if row["finished"]] == ["succeeded"]
    writes.stop()

    # The same sources ingested whole, by one run in this process, leave the same.
    rag_set("ingestion.allow_private_urls", True)
    reference = collection_create(name="Reference", slug="reference", user=user)
    whole, _ = ingestion_job_create(collection=reference, locations=locations, operator=True)
    ingestion_job_execute(job=whole)
    whole.refresh_from_db()
    assert whole.status == "succeeded", whole.error
    assert chunk_rows(collection) == chunk_rows(reference)
    assert manifest_rows(collection) == manifest_rows(reference)
    assert len(manifest_rows(collection)) == 9
    assert duplicate_chunks(collection) == []
    assert Source.objects.filter(collection=collection, status="ready").count() == 9
    assert sorted(s["location"] for s in job.report["sources"]) == sorted(locations)


def _kill_the_parked_worker(job: IngestionJob, page: GatedPageServer, workers: list) -> str:  # type: ignore[type-arg]
    """SIGKILL the worker whose part waits on the page; return that worker's name."""
    assert page.requested.wait(WAIT_S), "no worker fetched the page"
    parked = IngestionPart.objects.get(job=job, index=2)
    assert parked.status == "running" and parked.items[1]["location"] == page.url
    victim = next(w for w in workers if parked.worker.endswith(f":{w.pid}"))
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    return parked.worker


def _workers_stop(workers: list, outputs: list[str]) -> None:  # type: ignore[type-arg]
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    for worker in workers:
        try:
            outputs.append(worker.communicate(timeout=60)[0][-3000:])
        except subprocess.TimeoutExpired:
            worker.kill()
            outputs.append(worker.communicate()[0][-3000:])
