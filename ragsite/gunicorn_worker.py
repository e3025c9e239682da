"""gunicorn's threaded worker, taking new connections least-loaded first.

Every worker process waits on the same listening socket, and the first to wake
takes the connection. Clients that keep their connection open (browsers for a
while, a reverse proxy, an API client) stay with the worker that took it, so
the split made as they connect lasts: ``benchmarks/load.py``'s 20 askers were
seen split 14 to 6 and 19 to 1 between two workers, and an idle site gives
every connection to the same one. An answer is mostly Python, which one process
runs on one core at a time, so the worker holding 19 queues its requests while
the other has a core to spare: the busier one sets the tail latency.

``BalancedThreadWorker`` publishes how many connections it holds in a table
shared by the workers of one gunicorn (created when the master imports this
module, before it forks them). A worker that holds more connections than a
sibling steps aside for ``ACCEPT_HOLD_S``, so the sibling takes the new
connection; a worker holding no more than any other accepts at once. The hold
only orders the workers and never loses a connection: when no sibling took
it (one is hung, stopped or slow to wake), the waiting worker does.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path
from typing import Any

from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]

# How long a worker holding more connections than a sibling lets the sibling
# take a new one. Under full load a process's threads take turns on the
# interpreter lock every 5 ms and its main thread waits for a core: a few such
# turns, so that the emptier worker is there to take it.
ACCEPT_HOLD_S = 0.05

# (pid, connections held) for each worker, one pair per slot. gunicorn creates
# each worker object in the master, which takes a free slot for it there (no
# two workers can race for one); the forked worker then writes its pid into it.
SLOTS = 64
STOPPING = 1 << 62  # the count a stopping worker publishes: never the emptier one
_table = mmap.mmap(-1, SLOTS * 2 * 8)
_cells = memoryview(_table).cast("q")
_PROC = Path("/proc/self/stat").exists()


def _worker_of(pid: int, master: int) -> bool:
    """Whether ``pid`` is a running child of ``master`` (a worker of this gunicorn).

    Read from /proc where there is one, so that a worker's pid reused by another
    process after it died is not taken for it; elsewhere, whether the pid lives.
    """
    if not _PROC:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[1]) == master


def slot_take() -> int:
    """A slot for a worker about to be forked (in the master): free, or its worker gone."""
    master = os.getpid()
    for slot in range(SLOTS):
        pid = _cells[2 * slot]
        if pid == 0 or (pid != master and not _worker_of(pid, master)):
            # Marked with the master's pid until the worker writes its own.
            _cells[2 * slot] = master
            _cells[2 * slot + 1] = 0
            return slot
    return -1  # more than SLOTS workers: this one accepts like gunicorn's own


def slot_publish(slot: int, pid: int, connections: int) -> None:
    if slot >= 0:
        _cells[2 * slot] = pid
        _cells[2 * slot + 1] = connections


def fewer_elsewhere(slot: int, connections: int) -> bool:
    """Whether a running sibling worker holds fewer than ``connections``."""
    master = os.getppid()  # a slot still marked by the master: its worker is not up yet
    for other in range(SLOTS):
        pid = _cells[2 * other]
        if other == slot or pid in (0, master):
            continue
        if _cells[2 * other + 1] < connections and _worker_of(pid, master):
            return True
    return False


class BalancedThreadWorker(ThreadWorker):
    """gunicorn's ``gthread`` worker that lets a less loaded sibling take new connections."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # in the master, before the fork
        self._slot = slot_take()
        self._hold_until = 0.0  # while a hold lasts, when it ends

    def run(self) -> None:
        # Listed once the application is loaded and the worker takes connections.
        slot_publish(self._slot, os.getpid(), 0)
        self.log.info("Worker %s takes connections", os.getpid())
        try:
            super().run()
        finally:
            slot_publish(self._slot, os.getpid(), STOPPING)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        if self._hold_until:
            # Wake when the hold ends: the loop's next turn takes the connection.
            timeout = min(timeout, max(0.0, self._hold_until - time.monotonic()))
        super().wait_for_and_dispatch_events(timeout)
        # Connections are counted up and down in several places of the loop:
        # publish the count once a turn. A stopping worker takes no more.
        slot_publish(self._slot, self.pid, self.nr_conns if self.alive else STOPPING)

    def set_accept_enabled(self, enabled: bool) -> None:
        # The main loop enables accepting on every turn while there is room.
        if enabled and self._hold_until:
            if time.monotonic() < self._hold_until:
                return
            # The hold is over: take the connection waiting, unless a sibling did.
            self._hold_until = 0.0
            super().set_accept_enabled(True)
            for listener in self.sockets:
                self._accept_now(listener)
            return
        super().set_accept_enabled(enabled)

    def accept(self, listener: Any) -> None:
        if self._slot < 0 or not fewer_elsewhere(self._slot, self.nr_conns):
            self._accept_now(listener)
            return
        # Step aside; the main loop's wait ends with the hold.
        self._hold_until = time.monotonic() + ACCEPT_HOLD_S
        super().set_accept_enabled(False)

    def _accept_now(self, listener: Any) -> None:
        super().accept(listener)
        slot_publish(self._slot, self.pid, self.nr_conns)
