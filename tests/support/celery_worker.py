"""A real Celery worker process for the tests about workers (one queue, solo pool)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def celery_worker_start(queue: str, env: Mapping[str, str]) -> subprocess.Popen[str]:
    """A worker consuming ``queue`` only, its output captured as text."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ragsite",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "-Q",
            queue,
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
