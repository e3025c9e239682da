"""gunicorn's settings for ``bin/start`` and ``benchmarks/load.py``, sized to the machine.

One worker process per two CPU cores the process may use (at least one), each
running ``RAGSITE_WEB_THREADS`` threads (8). An answer is Python (one core per
process, whatever its threads) plus model calls and SQL, which run outside the
interpreter lock: one process keeps about two cores busy. Its threads share one
micro-batcher, so concurrent questions reach the model together (a question
alone cost 11 CPU-ms, in a batch of four 5), and one set of caches (question
vectors, passages' units). On 2 cores, ``benchmarks/load.py --sizes 2x4,1x8``
(20 askers, new questions, 60 s, machine shared): 2 x 4 35.1 req/s, p95
1,115 ms, 27.5 web CPU-ms an answer; 1 x 8 39.0 req/s, p95 644 ms, 21.8 CPU-ms
(README, "Benchmarks"). Each thread keeps one database connection
(``RAGSITE_DB_CONN_MAX_AGE``), plus one for the worker's run writer.
"""

from __future__ import annotations

import os

_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

workers = int(os.environ.get("RAGSITE_WEB_WORKERS") or max(1, (_cores or 1) // 2))
threads = int(os.environ.get("RAGSITE_WEB_THREADS") or 8)
timeout = 300


def worker_exit(server: object, worker: object) -> None:
    """Write the runs the worker's run writer still holds before it goes."""
    from query_app.run_writer import run_writer

    run_writer().stop()
