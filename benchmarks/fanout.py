"""One ingestion job on one worker, then the same job shared by two workers.

Runs on a server, database and broker of its own (nothing touches the app's
data). Each worker is a Celery worker as ``bin/start`` would run it, but with a
solo pool and one torch thread, so that two workers have the two cores one
worker would not use. The same folder is ingested three times, into three
collections: whole on one worker (``RAG_JOB_PART_SOURCES=0``), split into parts
on one worker, split into parts on two workers. Printed per run: seconds from
the job's claim to its end, passages, passages per second, parts per worker;
then whether the three collections hold the same chunks and manifest.

    .venv/bin/python benchmarks/fanout.py [--docs 48] [--paragraphs 20] [--part 8]

Bounded: every wait ends after ``--timeout-s``; the workers are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _django import ROOT, isolated_django_setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=48)
    parser.add_argument("--paragraphs", type=int, default=20)
    parser.add_argument("--part", type=int, default=8, help="sources per part")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args()
    var = isolated_django_setup(name="fanout", RAG_WARMUP="1", OMP_NUM_THREADS="1")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser(username="bench", password="bench-pw")
    corpus = _corpus(var / "corpus", args.docs, args.paragraphs)
    print(f"fanout: {args.docs} files x {args.paragraphs} paragraphs, parts of {args.part}")
    results = []
    for name, part, workers in (
        ("whole, 1 worker", 0, 1),
        ("parts, 1 worker", args.part, 1),
        ("parts, 2 workers", args.part, 2),
    ):
        results.append(_run(var, user, corpus, name=name, part=part, workers=workers, args=args))
    _compare(results)


def _corpus(folder: Path, docs: int, paragraphs: int) -> Path:
    folder.mkdir(parents=True)
    for d in range(docs):
        body = "\n\n".join(
            f"Section {p} of file {d} sets out rule {p}. "
            + " ".join(f"f{d}x{p}w{k}" for k in range(20))
            for p in range(paragraphs)
        )
        (folder / f"doc-{d:03}.md").write_text(f"# Document {d}\n\n{body}\n")
    return folder


def _run(var, user, corpus, *, name, part, workers, args):  # type: ignore[no-untyped-def]
    from collections_app.models import IngestionJob
    from collections_app.services import collection_create, ingestion_job_enqueue

    env = dict(os.environ, RAG_JOB_PART_SOURCES=str(part))
    logs = [var / f"{name.replace(' ', '_').replace(',', '')}-{n}.log" for n in range(workers)]
    procs = [_worker(env, log, n) for n, log in enumerate(logs)]
    try:
        if not _wait(lambda: all("ready." in log.read_text() for log in logs), args.timeout_s):
            raise SystemExit(f"{name}: the workers did not start")
        slug = f"run-{part}-{workers}"
        collection = collection_create(name=slug, slug=slug, user=user)
        job, _ = ingestion_job_enqueue(
            collection=collection, user=user, locations=[str(corpus)], operator=True
        )
        if not _wait(lambda: IngestionJob.objects.get(pk=job.pk).is_finished, args.timeout_s):
            raise SystemExit(f"{name}: the job did not finish in {args.timeout_s} s")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    job.refresh_from_db()
    seconds = (job.finished_at - job.started_at).total_seconds()
    by_worker: dict[str, int] = {}
    for worker in job.parts.values_list("worker", flat=True):
        by_worker[worker] = by_worker.get(worker, 0) + 1
    print(
        f"{name:>18}: {job.status}, {seconds:6.1f} s, {job.chunks_written} passages, "
        f"{job.chunks_written / seconds:6.1f} passages/s, parts per worker "
        f"{sorted(by_worker.values(), reverse=True) or '-'}"
    )
    return collection


def _worker(env: dict[str, str], log: Path, n: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "ragsite", "worker", "--pool=solo"),
            *("--loglevel=INFO", "-n", f"fanout{n}@%h", "--without-gossip", "--without-mingle"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def _wait(condition, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def _compare(collections) -> None:  # type: ignore[no-untyped-def]
    from collections_app.models import Chunk, ManifestEntry

    def chunks(c):  # type: ignore[no-untyped-def]
        return list(
            Chunk.objects.filter(collection=c)
            .order_by("source__location", "ordinal")
            .values_list("source__location", "ordinal", "text")
        )

    def manifest(c):  # type: ignore[no-untyped-def]
        return sorted(
            ManifestEntry.objects.filter(collection=c).values_list(
                "location", "content_hash", "chunker", "embedding"
            )
        )

    first = collections[0]
    same = all(
        chunks(c) == chunks(first) and manifest(c) == manifest(first) for c in collections[1:]
    )
    print(f"same chunks and manifest in all three: {same} ({len(chunks(first))} chunks each)")


if __name__ == "__main__":
    main()
