#!/usr/bin/env python
"""First-answer latency after a fresh start, with and without the model warm-up.

Prepares the demo collection in its own database (``bench_first_answer``: the
demo corpus, ingested incrementally), then for each warm-up setting starts the
app as ``bin/start`` runs it — gunicorn (2 workers x 4 threads) beside one Celery
worker (threads pool) — on a free loopback port, and:

- times the start until ``/healthz`` answers (with warm-up on, a gunicorn worker
  answers only once its models are loaded);
- logs in as the demo user and asks ``--answers`` different questions one after
  the other through the streamed ask view (``POST /ask/stream/``, what the browser
  does), timing each until its first progress event and until its ``done`` event;
- asks the first question once more (what it costs once nothing is cold);
- stops the processes.

Each question is asked once (the retrieval cache never serves them). bin/start
runs two gunicorn workers, so without warm-up the first two answers may each find
a cold worker. The warm-up's own log lines (``warm-up: loaded ... in N s``) are
printed from the server's log.

Usage: .venv/bin/python benchmarks/first_answer.py [--warmup both|on|off] [--answers 4]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _django import ROOT, django_setup

DB_NAME = "bench_first_answer"
QUESTIONS = [
    "Which profile reranks with a cross-encoder?",
    "What does EmbeddingProfileDrift mean and how do I fix it?",
    "How do I ingest a directory of documents?",
    "What does the relevance floor do?",
    "Which file formats can be ingested?",
    "How are documents with injected instructions handled?",
]
READY_TIMEOUT_S = 300.0


@dataclass
class Answer:
    question: str
    first_event_s: float
    done_s: float
    steps: list[str] = field(default_factory=list)


@dataclass
class Start:
    warmup: bool
    ready_s: float
    answers: list[Answer]
    warmup_log: list[str]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare() -> None:
    """Migrate the benchmark database and ingest the demo collection into it."""
    django_setup(DB_NAME)
    from django.core.management import call_command

    from ragsite.demo import demo_setup

    call_command("migrate", verbosity=0)
    report = demo_setup()
    print(
        f"demo collection in {os.environ['RAGSITE_DB_NAME']}: "
        f"{report['sources_ingested']} ingested, {report['sources_unchanged']} unchanged"
    )


def start_app(*, warmup: bool, port: int, log: Path) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "RAGSITE_DB_NAME": os.environ["RAGSITE_DB_NAME"],
        "RAG_WARMUP": "1" if warmup else "0",
        "DJANGO_SETTINGS_MODULE": "ragsite.settings",
        # The worker idles here; a private in-memory broker keeps it off var/broker.
        "CELERY_BROKER_URL": "memory://",
    }
    venv = ROOT / ".venv" / "bin"
    out = log.open("ab")
    worker = subprocess.Popen(
        [str(venv / "celery"), "-A", "ragsite", "worker", "--pool=threads", "--concurrency=2"],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    web = subprocess.Popen(
        [
            str(venv / "gunicorn"),
            "ragsite.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "4",
            "--timeout",
            "300",
        ],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return [worker, web]


def stop_app(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_ready(client: object, started: float) -> float:
    import httpx

    assert isinstance(client, httpx.Client)
    while time.perf_counter() - started < READY_TIMEOUT_S:
        try:
            if client.get("/healthz", timeout=5).status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the server was not ready after {READY_TIMEOUT_S:.0f} s")


def log_in(client: object) -> None:
    import httpx

    assert isinstance(client, httpx.Client)
    client.get("/accounts/login/")
    response = client.post(
        "/accounts/login/",
        data={
            "username": "demo",
            "password": "demo",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
        headers={"Referer": str(client.base_url) + "/accounts/login/"},
    )
    if response.status_code != 302:
        raise SystemExit(f"logging in as demo failed: HTTP {response.status_code}")


def ask(client: object, question: str) -> Answer:
    """One streamed answer: seconds to the first progress event and to the rendered answer."""
    import httpx

    assert isinstance(client, httpx.Client)
    data = {
        "collection": "demo",
        "profile": "fast",
        "question": question,
        "csrfmiddlewaretoken": client.cookies["csrftoken"],
    }
    headers = {"Referer": str(client.base_url) + "/ask/", "Accept": "text/event-stream"}
    started = time.perf_counter()
    first: float | None = None
    steps: list[str] = []
    buffer = ""
    with client.stream("POST", "/ask/stream/", data=data, headers=headers, timeout=300) as resp:
        if resp.status_code != 200:
            raise SystemExit(f"asking failed: HTTP {resp.status_code}")
        for text in resp.iter_text():
            buffer += text
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                name = next((ln[7:] for ln in block.split("\n") if ln.startswith("event: ")), "")
                payload = next((ln[6:] for ln in block.split("\n") if ln.startswith("data: ")), "")
                if name and first is None:
                    first = time.perf_counter() - started
                if name == "step":
                    step = json.loads(payload)
                    steps.append(f"{step['stage']} {step['duration_ms']:.0f}")
                elif name == "error":
                    raise SystemExit(f"the answer failed: {payload}")
                elif name == "done":
                    done = time.perf_counter() - started
                    return Answer(question, first or done, done, steps)
    raise SystemExit("the stream ended without an answer")


def measure(*, warmup: bool, answers: int) -> Start:
    import httpx

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        started = time.perf_counter()
        processes = start_app(warmup=warmup, port=port, log=log)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
                ready = wait_ready(client, started)
                log_in(client)
                client.get("/ask/")
                done = [ask(client, q) for q in QUESTIONS[:answers]]
                # The first question again: what it costs once nothing is cold (its
                # retrieval comes from the cache; the answer is made again).
                done.append(ask(client, QUESTIONS[0]))
        finally:
            stop_app(processes)
        lines = log.read_text(errors="replace").splitlines()
    return Start(warmup, ready, done, [ln for ln in lines if "warm-up:" in ln])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--warmup", choices=["both", "on", "off"], default="both")
    parser.add_argument("--answers", type=int, default=4)
    args = parser.parse_args()
    if not 2 <= args.answers <= len(QUESTIONS):
        parser.error(f"--answers must be between 2 and {len(QUESTIONS)}")
    prepare()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    modes = {"both": [False, True], "on": [True], "off": [False]}[args.warmup]
    for warmup in modes:
        start = measure(warmup=warmup, answers=args.answers)
        print(
            f"\nRAG_WARMUP={int(warmup)}: ready (/healthz answers) {start.ready_s:.1f} s after start"
        )
        for line in start.warmup_log:
            print(f"  server log: {line.split(' ', 2)[-1]}")
        for n, answer in enumerate(start.answers, start=1):
            if n == len(start.answers):
                n = 1
                print("  the first question asked again:")
            print(
                f"  answer {n}: first progress event {answer.first_event_s * 1000:7.0f} ms, "
                f"answer done {answer.done_s * 1000:7.0f} ms  ({answer.question})"
            )
            print(f"            stages (ms): {', '.join(answer.steps)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
