"""A WSGI application that answers with the process id of the worker that served it.

For tests of how gunicorn's workers share connections (ragsite/gunicorn_worker.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
