"""Askers and uploaders at once, over real HTTP on loopback, for a bounded time.

Starts its own site as ``bin/start`` does (gunicorn, 2 processes x 4 threads;
one Celery worker, threads pool, 2 at once; models loaded at start) on a fresh
embedded PostgreSQL and broker under a temporary RAGSITE_VAR_DIR (removed at
the end), with the demo corpus and the golden dataset's corpus ingested. Then
for ``--seconds``:

- ``--askers`` users each ask question after question (``POST
  /api/collections/load/query``, the default ``fast`` profile, extractive);
- ``--uploaders`` users each upload a new small Markdown file
  (``POST .../sources/upload``) and wait for its job to finish before the next.

Each user has their own token. The per-user API throttles are raised for the
run (RAG_THROTTLE_QUERY / RAG_THROTTLE_UPLOAD), so what is measured is the site,
not the throttle. Prints per kind: requests, errors (anything but 2xx, or no
answer), p50 / p95 latency; for uploads also the time from upload to job end.

Measured on a 2-core machine without GPU, shared with other work: see README
("Faults and load").
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from _django import ROOT, isolated_django_setup

QUESTIONS = [
    "Which profile reranks with a cross-encoder?",
    "How do I start the application?",
    "What happens to documents that look like prompt injection?",
    "How are chunk sizes counted?",
    "Which file formats can be ingested?",
    "How do I run the evaluation gate?",
    "What does the fast profile do?",
    "Where is the data of the embedded database kept?",
]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    extra: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, error: str = "", extra: float | None = None) -> None:
        with self.lock:
            self.latencies.append(seconds)
            if error:
                self.errors.append(error)
            if extra is not None:
                self.extra.append(extra)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--askers", type=int, default=10)
    parser.add_argument("--uploaders", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    var = isolated_django_setup(
        name="load",
        RAG_WARMUP="1",
        RAG_THROTTLE_QUERY="100000/min",
        RAG_THROTTLE_UPLOAD="100000/min",
    )
    processes: list[subprocess.Popen[bytes]] = []
    log = open(var / "site.log", "ab")  # noqa: SIM115 - kept for the run
    try:
        tokens, base = _site(var, log, processes, args)
        asked, uploaded = Tally(), Tally()
        stop = time.monotonic() + args.seconds
        threads = [
            threading.Thread(target=_asker, args=(base, tokens[f"asker{n}"], stop, asked, n))
            for n in range(args.askers)
        ] + [
            threading.Thread(
                target=_uploader, args=(base, tokens[f"uploader{n}"], stop, uploaded, n)
            )
            for n in range(args.uploaders)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        _print("ask", asked, args)
        _print("upload", uploaded, args)
        if uploaded.extra:
            print(
                f"upload to job end: p50 {percentile(uploaded.extra, 0.5) * 1000:.0f} ms, "
                f"p95 {percentile(uploaded.extra, 0.95) * 1000:.0f} ms"
            )
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
        log.close()
        from ragsite.embedded_db import embedded_server_stop

        embedded_server_stop(data_dir=var / "pgdata")
        if args.keep:
            atexit.unregister(shutil.rmtree)


def _site(var, log, processes, args):  # type: ignore[no-untyped-def]
    """Migrate, create the users and collections, ingest the demo corpus, start the site."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from collections_app.services import collection_create, collection_ingest, membership_set

    call_command("migrate", verbosity=0)
    users = get_user_model()
    owner = users.objects.create_user(username="owner", password="owner-pw-long")
    load = collection_create(name="Load", slug="load", user=owner)
    inbox = collection_create(name="Inbox", slug="inbox", user=owner)
    report = collection_ingest(
        collection=load,
        locations=[str(ROOT / "demo_corpus"), str(ROOT / "eval" / "golden" / "corpus")],
    )
    print(
        f"load: demo and golden corpora ingested ({report.sources_seen} documents, "
        f"{report.chunks_written} passages)"
    )
    tokens = {}
    for name in [f"asker{n}" for n in range(args.askers)]:
        user = users.objects.create_user(username=name, password=f"{name}-pw-long")
        membership_set(collection=load, user=user, role="read")
        tokens[name] = Token.objects.create(user=user).key
    for name in [f"uploader{n}" for n in range(args.uploaders)]:
        user = users.objects.create_user(username=name, password=f"{name}-pw-long")
        membership_set(collection=inbox, user=user, role="write")
        tokens[name] = Token.objects.create(user=user).key
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ)
    python_bin = Path(sys.executable).parent
    processes.append(
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ragsite", "worker", "--pool=threads",
             "--concurrency=2", "--loglevel=WARNING"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    )  # fmt: skip
    processes.append(
        subprocess.Popen(
            [str(python_bin / "gunicorn"), "ragsite.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--workers", "2", "--threads", "4", "--timeout", "300"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    _ready(base, tokens["asker0"])
    return tokens, base


def _ready(base: str, token: str) -> None:
    import httpx

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            answer = httpx.post(
                f"{base}/api/collections/load/query",
                json={"question": QUESTIONS[0]},
                headers={"Authorization": f"Token {token}"},
                timeout=120,
            )
            if answer.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("load: the site did not answer within 10 minutes")


def _asker(base: str, token: str, stop: float, tally: Tally, n: int) -> None:
    import httpx

    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=120) as client:
        i = n
        while time.monotonic() < stop:
            started = time.monotonic()
            try:
                answer = client.post(
                    f"{base}/api/collections/load/query",
                    json={"question": QUESTIONS[i % len(QUESTIONS)]},
                )
                error = "" if answer.is_success else f"{answer.status_code}"
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            tally.add(time.monotonic() - started, error)
            i += 1


def _uploader(base: str, token: str, stop: float, tally: Tally, n: int) -> None:
    import httpx

    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=120) as client:
        i = 0
        while time.monotonic() < stop:
            name = f"note-{n}-{i}.md"
            text = f"# Note {n}.{i}\n\nUploader {n} wrote note {i} about item {n * 1000 + i}.\n"
            started = time.monotonic()
            try:
                sent = client.post(
                    f"{base}/api/collections/inbox/sources/upload",
                    files={"files": (name, text.encode(), "text/markdown")},
                )
            except httpx.HTTPError as exc:
                tally.add(time.monotonic() - started, type(exc).__name__)
                continue
            took = time.monotonic() - started
            if not sent.is_success:
                tally.add(took, f"{sent.status_code}")
                continue
            job = sent.json()["job"]["id"]
            status = ""
            while time.monotonic() < stop + 120:
                status = client.get(f"{base}/api/collections/inbox/jobs/{job}").json()["status"]
                if status in {"succeeded", "partial", "failed"}:
                    break
                time.sleep(0.2)
            error = "" if status == "succeeded" else f"job {status or 'unfinished'}"
            tally.add(took, error, extra=time.monotonic() - started)
            i += 1


def _print(kind: str, tally: Tally, args: argparse.Namespace) -> None:
    lat = tally.latencies
    print(
        f"{kind}: {len(lat)} requests in {args.seconds:.0f} s, {len(tally.errors)} errors"
        + (f" ({', '.join(sorted(set(tally.errors)))})" if tally.errors else "")
        + f", p50 {percentile(lat, 0.5) * 1000:.0f} ms, p95 {percentile(lat, 0.95) * 1000:.0f} ms"
        + (f", mean {statistics.fmean(lat) * 1000:.0f} ms" if lat else "")
    )


if __name__ == "__main__":
    main()
