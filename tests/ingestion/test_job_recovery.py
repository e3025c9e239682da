"""Jobs survive a worker killed mid-job and a lost database connection.

Before: after ``kill -9`` of the worker the job stayed "running" forever, and
its manifest was written only at the end, so a re-run embedded every source
again. Now a job has a heartbeat, a dead worker's job is resumed by the next
worker (or failed after ``max_attempts``), and each source is committed with its
manifest entry, so the resumed run only does what was missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError, connection
from django.utils import timezone

from collections_app.ingestion.pipeline.run import IngestionRun
from collections_app.models import IngestionJob, ManifestEntry, Provenance, Source
from collections_app.services import (
    collection_ingest,
    ingestion_job_create,
    ingestion_job_execute,
    ingestion_jobs_reconcile,
)
from tests.support.celery_worker import celery_worker_start
from tests.support.clients import token_client
from tests.support.gated_server import GatedPageServer

ROOT = Path(settings.BASE_DIR)
BROKER = "redis://127.0.0.1:6379/7"


def long_document(name: str, paragraphs: int) -> str:
    """A Markdown file of ``paragraphs`` distinct paragraphs, about one chunk each."""
    body = "\n\n".join(
        f"Paragraph {i} of {name} describes step {i} of the {name} procedure. "
        + " ".join(f"{name}{i}term{j}" for j in range(30))
        for i in range(paragraphs)
    )
    return f"# {name}\n\n{body}\n"


@pytest.fixture
def documents(tmp_path) -> dict[str, Path]:
    """Two large files (together one flush: embedded and stored before the run reads
    on) and two small ones."""
    folder = tmp_path / "docs"
    folder.mkdir()
    paragraphs = IngestionRun.flush_chunks // 2 + 12
    files = {
        "alpha": long_document("alpha", paragraphs),
        "beta": long_document("beta", paragraphs),
        "gamma": "# Gamma\n\nGamma is the third step.\n",
        "delta": "# Delta\n\nDelta is the last step.\n",
    }
    paths = {}
    for name, text in files.items():
        paths[name] = folder / f"{name}.md"
        paths[name].write_text(text)
    return paths


def _env(queue: str, **extra: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        RAGSITE_DB_NAME=settings.DATABASES["default"]["NAME"],
        CELERY_BROKER_URL=BROKER,
        CELERY_QUEUE=queue,
        RAG_ALLOW_PRIVATE_URLS="1",
        **extra,
    )
    return environment


def _worker(queue: str, **env: str) -> subprocess.Popen[str]:
    return celery_worker_start(queue, _env(queue, **env))


def _wait(condition, timeout_s: float = 240.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_was_killed_resumes_without_redoing_finished_sources(
    user, collection, documents
):
    page = GatedPageServer().start()
    queue = f"test-{uuid.uuid4().hex[:8]}"
    fast_recovery = {
        "RAG_JOB_HEARTBEAT_S": "0.5",
        "RAG_JOB_STALE_S": "5",
        "RAG_JOB_RECONCILE_S": "1",
    }
    queued = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "rag",
            "ingest",
            "--collection",
            collection.slug,
            "--async",
            "--json",
            str(documents["alpha"]),
            str(documents["beta"]),
            page.url,
            str(documents["gamma"]),
            str(documents["delta"]),
        ],
        cwd=ROOT,
        env=_env(queue),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert queued.returncode == 0, queued.stderr
    job = IngestionJob.objects.get(pk=json.loads(queued.stdout)["job_id"])
    first = _worker(queue, **fast_recovery)
    second = None
    try:
        # The worker stored alpha and beta, then waits on the page: kill it there.
        assert page.requested.wait(240), first.communicate(timeout=30)[0][-3000:]
        done_before = set(
            Source.objects.filter(collection=collection, status="ready").values_list(
                "location", flat=True
            )
        )
        assert done_before == {str(documents["alpha"]), str(documents["beta"])}
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        time.sleep(1.5)
        job.refresh_from_db()
        assert job.status == "running"  # nobody has noticed yet

        page.open()
        second = _worker(queue, **fast_recovery)
        finished = _wait(lambda: IngestionJob.objects.get(pk=job.pk).is_finished)
    finally:
        page.stop()
        for worker in (first, second):
            if worker is not None and worker.poll() is None:
                worker.terminate()
        output = second.communicate(timeout=60)[0] if second is not None else ""
    job.refresh_from_db()
    assert finished, output[-3000:]
    assert job.status == "succeeded", (job.error, output[-3000:])
    assert job.attempts == 2
    assert any("resumed" in w for w in job.report["warnings"])
    assert {s["status"] for s in job.report["sources"]} == {"ingested"}
    assert Source.objects.filter(collection=collection, status="ready").count() == 5
    assert ManifestEntry.objects.filter(collection=collection).count() == 5
    # alpha and beta were read (and embedded) once: the resumed run found them unchanged.
    for location in done_before:
        assert Provenance.objects.filter(job=job, location=location).count() == 1
    assert Provenance.objects.filter(job=job, location=str(documents["gamma"])).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_lost_database_connection_requeues_the_job_and_it_resumes(
    user, collection, documents, rag_set, celery_eager
):
    rag_set("ingestion.allow_private_urls", True)
    connection.ensure_connection()
    backend = connection.connection.info.backend_pid
    dsn = {
        k: v
        for k, v in connection.get_connection_params().items()
        if k in {"dbname", "user", "host", "port", "password"}
    }

    def cut_the_connection() -> None:
        with psycopg.connect(**dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [backend])

    page = GatedPageServer(on_request=cut_the_connection).start()
    page.open()
    job, _ = ingestion_job_create(
        collection=collection,
        user=user,
        locations=[str(documents["alpha"]), str(documents["beta"]), page.url],
    )
    rag_set("ingestion.roots", [str(documents["alpha"].parent)])
    try:
        with pytest.raises(OperationalError):
            ingestion_job_execute(job=job)
    finally:
        page.stop()

    job.refresh_from_db()
    # Queued again at once and, with a worker at hand (eager here), run to the end.
    assert job.status == "succeeded", job.error
    assert job.attempts == 2
    outcomes = {s["location"]: s for s in job.report["sources"]}
    assert outcomes[page.url]["status"] == "ingested"
    for name in ("alpha", "beta"):
        assert outcomes[str(documents[name])]["status"] == "ingested"
        location = str(documents[name])
        assert Provenance.objects.filter(job=job, location=location).count() == 1


@pytest.mark.django_db
def test_a_silent_job_is_resumed_then_failed_after_its_last_attempt(
    user, collection, documents, celery_eager, django_capture_on_commit_callbacks
):
    stale = timezone.now() - timedelta(minutes=10)
    job, _ = ingestion_job_create(
        collection=collection, user=user, locations=[str(documents["gamma"])], operator=True
    )
    IngestionJob.objects.filter(pk=job.pk).update(
        status="running", worker="gone-host:4242", heartbeat_at=stale, started_at=stale, attempts=1
    )

    with django_capture_on_commit_callbacks(execute=True):
        outcome = ingestion_jobs_reconcile()

    assert outcome.resumed == [job.pk]
    job.refresh_from_db()
    # Resumed by the worker the check woke (run eagerly here).
    assert job.status == "succeeded", job.current
    assert job.attempts == 2

    # A job that has had its tries is failed with the reason; its half-done source says so.
    last, _ = ingestion_job_create(
        collection=collection, user=user, locations=[str(documents["delta"])], operator=True
    )
    collection_ingest(collection=collection, locations=[str(documents["delta"])], job=last)
    source = Source.objects.get(location=str(documents["delta"]))
    Source.objects.filter(pk=source.pk).update(status="ingesting", chunk_count=0)
    Provenance.objects.filter(source=source).update(job=last)
    IngestionJob.objects.filter(pk=last.pk).update(
        status="running", worker="gone-host:4242", heartbeat_at=stale, attempts=3
    )

    outcome = ingestion_jobs_reconcile()

    assert outcome.failed == [last.pk]
    last.refresh_from_db()
    assert last.status == "failed"
    assert "interrupted 3 times" in last.error
    source.refresh_from_db()
    assert source.status == "failed" and "interrupted" in source.error


@pytest.mark.django_db
def test_reading_a_job_whose_worker_died_resumes_it(user, collection, documents):
    stale = timezone.now() - timedelta(minutes=10)
    job, _ = ingestion_job_create(
        collection=collection, user=user, locations=[str(documents["gamma"])], operator=True
    )
    IngestionJob.objects.filter(pk=job.pk).update(
        status="running", worker="gone-host:4242", heartbeat_at=stale, attempts=1
    )

    body = token_client(user).get(f"/api/collections/docs/jobs/{job.pk}").json()

    assert body["status"] == "queued"
    assert "no sign of life from its worker" in body["current"]


def test_bin_start_runs_a_killed_worker_again_and_stops_it_on_request(tmp_path):
    """bin/start keeps each process under ``supervise`` (bin/_supervise.sh): a worker
    killed with SIGKILL is started again (and resumes its job), instead of taking the
    web server and the database down with it; stopping the supervisor stops the process.
    """
    pids = tmp_path / "pids"
    script = (
        f"source {ROOT / 'bin' / '_supervise.sh'}\n"
        f"supervise worker sh -c 'echo $$ >> {pids}; exec sleep 60'\n"
    )
    supervisor = subprocess.Popen(["bash", "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: pids.exists() and len(pids.read_text().split()) == 1, 30)
        first = int(pids.read_text().split()[0])
        os.kill(first, signal.SIGKILL)
        assert _wait(lambda: len(pids.read_text().split()) == 2, 30)
        second = int(pids.read_text().split()[1])
        assert second != first
    finally:
        supervisor.terminate()
        _, log = supervisor.communicate(timeout=30)
    assert supervisor.returncode == 0
    assert "the worker stopped (exit status 137); starting it again" in log
    assert _wait(lambda: not _alive(second), 10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
