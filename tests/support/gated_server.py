"""A web page on 127.0.0.1 that answers only when the test lets it.

Ingestion reads its sources in order, so a page that holds its answer parks a
running job at a known point: the sources listed before the page are stored,
the ones after are not. Tests use it to kill a worker, or cut its database
connection, exactly there. ``on_request`` runs when the first request arrives,
before the gate is waited on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGE = (
    "<html><head><title>Release notes</title></head><body><main>"
    "<h1>Release notes</h1><p>Version 4.2 adds resumable ingestion jobs: a job "
    "interrupted by a worker crash continues where it stopped.</p></main></body></html>"
)


class GatedPageServer:
    """Serves :data:`PAGE`; each request waits until :meth:`open` (or ``timeout_s``)."""

    def __init__(
        self, *, timeout_s: float = 120.0, on_request: Callable[[], None] | None = None
    ) -> None:
        self.requested = threading.Event()
        self.gate = threading.Event()
        self.timeout_s = timeout_s
        self.on_request = on_request
        self.hits = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits += 1
                first = not server.requested.is_set()
                server.requested.set()
                if first and server.on_request is not None:
                    server.on_request()
                server.gate.wait(server.timeout_s)
                body = PAGE.encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client is gone (a killed worker)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/release-notes.html"

    def start(self) -> GatedPageServer:
        self._thread.start()
        return self

    def open(self) -> None:
        """Let every waiting and later request through."""
        self.gate.set()

    def stop(self) -> None:
        self.gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()
