"""Ending the real processes tests start (servers on loopback)."""

from __future__ import annotations

import subprocess


def process_end(process: subprocess.Popen[bytes], *, timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
