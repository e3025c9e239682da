"""Starting the site that benchmarks/load.py measures: the database with its users,
collections and ingested corpus, the Celery worker, and gunicorn once it answers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from _django import ROOT

# The questions of ``--corpus demo``; the site is ready once it answers the first.
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


def pubmedqa_write(folder: Path, documents: int) -> list[str]:
    """Write the first ``documents`` judged documents as Markdown files; their questions."""
    import json

    source = ROOT / "eval" / "pubmedqa_faq"
    with (source / "corpus.jsonl").open(encoding="utf-8") as fh:
        corpus = {d["_id"]: d for d in map(json.loads, fh)}
    with (source / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    judged: dict[str, list[str]] = {}
    with (source / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, _grade = line.split()
            judged.setdefault(qid, []).append(did)
    folder.mkdir(parents=True)
    written: set[str] = set()
    questions = []
    for qid, dids in judged.items():
        if len(written) >= documents:
            break
        questions.append(queries[qid])
        for did in dids:
            if did not in written:
                doc = corpus[did]
                title = doc.get("title") or f"PubMed {did}"
                (folder / f"{did}.md").write_text(f"# {title}\n\n{doc['text']}\n", "utf-8")
                written.add(did)
    return questions


def site_prepare(var, log, processes, args, askers, uploaders):  # type: ignore[no-untyped-def]
    """Migrate, create the users and collections, ingest the corpora, start the worker."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from collections_app.services import collection_create, collection_ingest, membership_set

    call_command("migrate", verbosity=0)
    users = get_user_model()
    owner = users.objects.create_user(username="owner", password="owner-pw-long")
    load = collection_create(name="Load", slug="load", user=owner)
    inbox = collection_create(name="Inbox", slug="inbox", user=owner)
    locations = [str(ROOT / "demo_corpus"), str(ROOT / "eval" / "golden" / "corpus")]
    questions = list(QUESTIONS)
    if args.corpus == "pubmedqa":
        questions = pubmedqa_write(var / "pubmedqa", args.documents)
        locations.append(str(var / "pubmedqa"))
    started = time.monotonic()
    report = collection_ingest(collection=load, locations=locations)
    print(
        f"load: {args.corpus} corpus ingested ({report.sources_seen} documents, "
        f"{report.chunks_written} passages, {time.monotonic() - started:.0f} s); "
        f"{len(questions)} distinct questions"
    )
    tokens = {}
    for name in [f"asker{n}" for n in range(askers)]:
        user = users.objects.create_user(username=name, password=f"{name}-pw-long")
        membership_set(collection=load, user=user, role="read")
        tokens[name] = Token.objects.create(user=user).key
    for name in [f"uploader{n}" for n in range(uploaders)]:
        user = users.objects.create_user(username=name, password=f"{name}-pw-long")
        membership_set(collection=inbox, user=user, role="write")
        tokens[name] = Token.objects.create(user=user).key
    processes.append(
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ragsite", "worker", "--pool=threads",
             "--concurrency=2", "--loglevel=WARNING"],
            cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
        )
    )  # fmt: skip
    return tokens, questions


def web_start(log, processes, workers, threads, token):  # type: ignore[no-untyped-def]
    """Start gunicorn (its config's size, or ``workers`` x ``threads``); its address once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    python_bin = Path(sys.executable).parent
    sizing = []
    if workers:
        sizing += ["--workers", str(workers)]
    if threads:
        sizing += ["--threads", str(threads)]
    config = ROOT / "ragsite" / "gunicorn_conf.py"
    processes.append(
        subprocess.Popen(
            [str(python_bin / "gunicorn"), "ragsite.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--timeout", "300",
             *(["--config", str(config)] if config.exists() else []), *sizing],
            cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT,
        )
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    web_ready(base, token)
    print(f"web server: {web_sizing(workers, threads)}")
    return base


def web_sizing(workers: int | None, threads: int | None) -> str:
    """The web server's size as it runs (the config's where not given)."""
    import runpy

    config = runpy.run_path(str(ROOT / "ragsite" / "gunicorn_conf.py"))
    return (
        f"gunicorn {workers or config['workers']} workers x {threads or config['threads']} threads"
    )


def web_ready(base: str, token: str) -> None:
    """Wait (10 minutes at most) until the site answers a question."""
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


def process_stop(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` (terminate, then kill after a minute) unless it has ended."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
