"""A scripted SearxNG-compatible search server and scripted web pages, on 127.0.0.1.

No search engine can run in the test environment, so the web fallback talks to
this real HTTP server instead. ``GET /search?q=…&format=json`` answers SearxNG's
JSON shape (``{"query": …, "results": [{"url", "title", "content"}, …]}``)
from a script: queued replies first, then the standing ``results``. Any other
path serves a scripted page (``pages``), so a second instance plays the web
sites the results point at. Every request is recorded for the assertions.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class SearchReply:
    """One scripted answer to a search (or a page): JSON, raw bytes, a status, a delay."""

    status: int = 200
    json_body: Any = None
    raw: bytes | None = None
    content_type: str = "application/json"
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def searxng_results(query: str, results: list[dict[str, str]]) -> SearchReply:
    """SearxNG's JSON reply for ``query`` with ``results`` (url, title, content)."""
    return SearchReply(
        json_body={
            "query": query,
            "number_of_results": len(results),
            "results": [{"engine": "scripted", "score": 1.0, **r} for r in results],
            "answers": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }
    )


def html_page(title: str, body: str) -> SearchReply:
    html = (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f"<nav>Home · About · Contact</nav><main>{body}</main>"
        "<footer>© scripted site</footer></body></html>"
    )
    return SearchReply(raw=html.encode(), content_type="text/html; charset=utf-8")


class ScriptedSearchServer:
    def __init__(self) -> None:
        self.queue: list[SearchReply] = []
        # Standing search results (url, title, content) when nothing is queued.
        self.results: list[dict[str, str]] = []
        self.pages: dict[str, SearchReply] = {}
        self.requests: list[str] = []  # paths with their query strings
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                with server._lock:
                    server.requests.append(self.path)
                    if parts.path.rstrip("/") == "/search":
                        query = parse_qs(parts.query).get("q", [""])[0]
                        if server.queue:
                            reply = server.queue.pop(0)
                        else:
                            reply = searxng_results(query, server.results)
                        if parse_qs(parts.query).get("format") != ["json"]:
                            reply = SearchReply(
                                status=403, raw=b"Forbidden", content_type="text/html"
                            )
                    else:
                        reply = server.pages.get(parts.path) or SearchReply(
                            status=404, raw=b"<h1>Not found</h1>", content_type="text/html"
                        )
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(reply)

            def _send(self, reply: SearchReply) -> None:
                data = reply.raw if reply.raw is not None else json.dumps(reply.json_body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        """``127.0.0.1:port``, as the web fallback's allowance lists hosts."""
        host, port = self._httpd.server_address[:2]
        return f"{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}"

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def start(self) -> ScriptedSearchServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, *replies: SearchReply) -> None:
        self.queue.extend(replies)

    def searches(self) -> list[str]:
        """The ``q`` of every search asked, in order."""
        return [
            parse_qs(urlsplit(path).query).get("q", [""])[0]
            for path in self.requests
            if urlsplit(path).path.rstrip("/") == "/search"
        ]

    def fetched(self) -> list[str]:
        """The page paths fetched, in order."""
        return [
            urlsplit(path).path
            for path in self.requests
            if urlsplit(path).path.rstrip("/") != "/search"
        ]
