"""The traffic of benchmarks/load.py: askers and uploaders over HTTP until a deadline,
the warm-up, and the tallies of their latencies and errors.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Tally:
    """One kind of request's latencies and errors (and for uploads, the time to job end)."""

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
    """The ``q`` quantile of ``values`` (nearest rank); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Novel(list):  # type: ignore[type-arg]
    """The questions, each time with a new number in front (never asked before)."""

    def __init__(self, questions: list[str], counter: itertools.count[int]) -> None:
        super().__init__(questions)
        self.counter = counter

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return f"Question {next(self.counter)}: {super().__getitem__(index)}"


def warm_up(base: str, tokens: dict[str, str], askers: int, questions: list[str]) -> int:
    """Every distinct question once, by ``askers`` at a time; prints the figures; answers."""
    todo = list(questions)
    lock = threading.Lock()
    tally = Tally()

    def take() -> str | None:
        with lock:
            return todo.pop() if todo else None

    def one_asker(token: str) -> None:
        client = Asker(base, token)
        try:
            while (question := take()) is not None:
                started = time.monotonic()
                error = client.ask(question)
                tally.add(time.monotonic() - started, error)
        finally:
            client.close()

    started = time.monotonic()
    threads = [
        threading.Thread(target=one_asker, args=(tokens[f"asker{n}"],)) for n in range(askers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    lat = tally.latencies
    print(
        f"warm-up, each of {len(questions)} questions once by {askers} askers (cold caches): "
        f"{len(lat) / took:.1f} req/s, {len(tally.errors)} errors, "
        f"p50 {percentile(lat, 0.5) * 1000:.0f} ms, p95 {percentile(lat, 0.95) * 1000:.0f} ms"
    )
    return len(lat) - len(tally.errors)


class Asker:
    """One asker's connection to the site: keep-alive HTTP/1.1 on loopback.

    The load generator shares the measured machine's cores with the site; with
    the standard library's client it spends 0.8-0.9 CPU-ms a request, against
    2.0-2.6 with httpx (load.py's own figures, 20 askers).
    """

    def __init__(self, base: str, token: str) -> None:
        self.address = urlsplit(base)
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.connection: http.client.HTTPConnection | None = None

    def ask(self, question: str) -> str:
        """Ask ``question``; "" for an answer with text, else what went wrong."""
        body = json.dumps({"question": question})
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(
                    self.address.hostname or "127.0.0.1", self.address.port, timeout=120
                )
            try:
                self.connection.request("POST", "/api/collections/load/query", body, self.headers)
                response = self.connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The server closed a kept-alive connection between two requests:
                # the question was not taken, so it is asked once more anew.
                self.close()
                if attempt == 2:
                    return "disconnected"
                continue
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                return type(exc).__name__
            if response.will_close:
                self.close()
            if not 200 <= response.status < 300:
                return f"{response.status}"
            return "" if json.loads(data).get("answer") else "no answer"
        return "disconnected"

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def asker(base: str, token: str, stop: float, tally: Tally, n: int, questions: list[str]) -> None:
    """Ask question after question until ``stop``; asker ``n`` starts at its own place."""
    client = Asker(base, token)
    # Each asker walks the questions from its own place, 7 apart (coprime with
    # most lengths), so concurrent askers rarely ask the same question at once.
    i = n * 7
    try:
        while time.monotonic() < stop:
            started = time.monotonic()
            error = client.ask(questions[i % len(questions)])
            tally.add(time.monotonic() - started, error)
            i += 1
    finally:
        client.close()


def uploader(base: str, token: str, stop: float, tally: Tally, n: int) -> None:
    """Upload a new note and wait for its job to end, again and again until ``stop``."""
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


def tally_print(kind: str, tally: Tally, args: argparse.Namespace) -> None:
    """One line of figures for ``kind``: requests, rate, errors, latencies."""
    lat = tally.latencies
    print(
        f"{kind}: {len(lat)} requests in {args.seconds:.0f} s, "
        f"{len(lat) / args.seconds:.1f} req/s, {len(tally.errors)} errors"
        + (f" ({', '.join(sorted(set(tally.errors)))})" if tally.errors else "")
        + f", p50 {percentile(lat, 0.5) * 1000:.0f} ms, p95 {percentile(lat, 0.95) * 1000:.0f} ms"
        + (f", max {max(lat) * 1000:.0f} ms" if lat else "")
    )
