"""gunicorn's settings for ``bin/start`` and ``benchmarks/load.py``, sized to the machine.

One worker process per CPU core the process may use: an answer is mostly
Python (one core per process, whatever its threads) plus short model calls and
SQL. Each worker runs ``RAGSITE_WEB_THREADS`` threads, enough to keep its core
busy while some wait on PostgreSQL; each thread keeps one database connection
(``RAGSITE_DB_CONN_MAX_AGE``), plus one for the worker's run writer. On 2
cores that is the 2 x 4 measured by ``benchmarks/load.py`` (README,
"Benchmarks"); other sizes were not compared there.
"""

from __future__ import annotations

import os

_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

workers = int(os.environ.get("RAGSITE_WEB_WORKERS") or max(1, _cores or 1))
threads = int(os.environ.get("RAGSITE_WEB_THREADS") or 4)
timeout = 300


def worker_exit(server: object, worker: object) -> None:
    """Write the runs the worker's run writer still holds before it goes."""
    from query_app.run_writer import run_writer

    run_writer().stop()
