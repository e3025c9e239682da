"""gunicorn's workers share kept-alive connections evenly (ragsite/gunicorn_worker.py).

Real gunicorn processes on loopback, started with the project's own config
(``ragsite/gunicorn_conf.py``), serving a WSGI application that answers with
the serving worker's process id.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.processes import free_port, process_end

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"


@pytest.fixture
def site():
    """Two workers of two threads each; yields (port, the workers' pids)."""
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ragsite.settings"}
    process = subprocess.Popen(
        [str(GUNICORN), "tests.support.pid_app:application", "--bind", f"127.0.0.1:{port}",
         "--config", str(ROOT / "ragsite" / "gunicorn_conf.py"),
         "--workers", "2", "--threads", "2"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        pids = _workers_booted(process, count=2)
        # Keep reading its log, so that gunicorn never blocks on a full pipe.
        threading.Thread(target=process.stdout.read, daemon=True).start()  # type: ignore[union-attr]
        yield port, pids
    finally:
        process_end(process, timeout=30)


def _workers_booted(process: subprocess.Popen[bytes], *, count: int) -> set[int]:
    """The pids of the first ``count`` workers, read from gunicorn's log once they serve."""
    assert process.stdout is not None
    pids: set[int] = set()
    deadline = time.monotonic() + 60
    while len(pids) < count and time.monotonic() < deadline:
        line = process.stdout.readline().decode(errors="replace")
        if not line:
            break
        if found := re.search(r"Worker (\d+) takes connections", line):
            pids.add(int(found.group(1)))
    assert len(pids) == count, "gunicorn did not boot its workers"
    return pids


def _served_by(client: http.client.HTTPConnection) -> int:
    client.request("GET", "/")
    response = client.getresponse()
    assert response.status == 200
    return int(response.read())


def test_the_project_config_runs_the_balanced_worker():
    import runpy

    config = runpy.run_path(str(ROOT / "ragsite" / "gunicorn_conf.py"))
    assert config["worker_class"] == "ragsite.gunicorn_worker.BalancedThreadWorker"


def test_kept_alive_connections_are_shared_evenly_as_they_arrive(site):
    port, pids = site
    clients = []
    held: Counter[int] = Counter()
    try:
        for _ in range(16):
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            pid = _served_by(client)
            clients.append((client, pid))
            held[pid] += 1
            # At every step, not only at the end: the next connection goes to
            # the worker holding fewer.
            counts = [held[p] for p in pids]
            assert max(counts) - min(counts) <= 1, f"connections per worker: {dict(held)}"
        # A kept-alive connection stays with its worker.
        for client, pid in clients:
            assert _served_by(client) == pid
    finally:
        for client, _ in clients:
            client.close()


def test_a_new_connection_is_served_while_the_emptier_worker_cannot_take_it(site):
    """The hold only orders the workers: it never leaves a connection waiting for one."""
    port, pids = site
    first = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    busy = _served_by(first)  # holds one connection now
    stalled = (pids - {busy}).pop()  # holds none: the next one is its to take
    os.kill(stalled, signal.SIGSTOP)
    try:
        second = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        started = time.monotonic()
        assert _served_by(second) == busy
        # Served after the busy worker's hold, not after some timeout.
        assert time.monotonic() - started < 10
        second.close()
    finally:
        os.kill(stalled, signal.SIGCONT)
        first.close()


def test_a_replaced_worker_takes_the_new_connections(site):
    """A worker killed outright is replaced; the newcomer, holding none, takes the next ones."""
    port, pids = site
    clients = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(4)]
    try:
        served = Counter(_served_by(c) for c in clients)
        assert sorted(served.values()) == [2, 2]
        killed = min(pids)
        os.kill(killed, signal.SIGKILL)
        survivor = (pids - {killed}).pop()
        # The survivor holds its two; the replacement, once up, holds none and
        # must take the next two connections.
        later = []
        deadline = time.monotonic() + 60
        while len(later) < 2 and time.monotonic() < deadline:
            client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            clients.append(client)
            pid = _served_by(client)
            if pid != survivor:
                later.append(pid)
            else:
                # Served by the survivor: the replacement was not up yet.
                time.sleep(0.2)
        assert len(later) == 2 and killed not in later
        assert len(set(later)) == 1
    finally:
        for client in clients:
            client.close()
