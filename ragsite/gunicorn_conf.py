"""gunicorn's settings for ``bin/start`` and ``benchmarks/load.py``, sized to the machine.

One worker process per CPU core the process may use (at least one, at most 8:
each holds its own models, ~1 GiB), each running ``RAGSITE_WEB_THREADS`` threads
(4). An answer is Python, which holds the interpreter lock, plus model calls and
SQL, which run outside it: one process kept 1.2 cores busy, so one process per
core fills the machine. A process's threads share one micro-batcher, so
concurrent questions reach the model together, and one set of caches (question
vectors, passages' units). On 2 quiet cores, ``benchmarks/load.py --sizes
1x8,2x4`` (20 askers, new questions, 60 s; README, "Benchmarks"): 1 x 8 54.8
req/s, p95 429 ms, the web process at 72 of the 120 CPU-seconds; 2 x 4 62.0 req/s,
p95 448 ms, the machine full (web 83, PostgreSQL 25, the load generator 5). Each
thread keeps one database connection (``RAGSITE_DB_CONN_MAX_AGE``), plus one for
the worker's run writer.

The workers are ``ragsite/gunicorn_worker.py``'s: gunicorn's threaded worker,
taking each new connection on the worker that holds the fewest, so clients
that keep their connections open are shared evenly between the processes.
"""

from __future__ import annotations

import os

_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

workers = int(os.environ.get("RAGSITE_WEB_WORKERS") or min(8, max(1, _cores or 1)))
threads = int(os.environ.get("RAGSITE_WEB_THREADS") or 4)
timeout = 300


def worker_exit(server: object, worker: object) -> None:
    """Write the runs the worker's run writer still holds before it goes."""
    from query_app.run_writer import run_writer

    run_writer().stop()


worker_class = "ragsite.gunicorn_worker.BalancedThreadWorker"
