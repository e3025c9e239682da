"""A scripted OpenAI-compatible chat server on 127.0.0.1.

No chat model can run in the test environment, so the tests talk to this real
HTTP server instead: it speaks the ``/v1/chat/completions`` protocol (JSON
completions and ``stream: true`` Server-Sent Events), lists ``models`` at
``GET /v1/models`` and ``GET /api/tags`` (as llama.cpp and Ollama do) and answers from a
script — queued replies first, then an optional responder function that sees
each request's JSON. Every request is recorded for the assertions.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    json_body: Any = None
    raw: bytes | None = None  # sent as-is (garbage) when set
    stream: Sequence[str] | None = None  # content pieces sent as SSE events
    stream_raw: Sequence[str] | None = None  # SSE data payloads sent as-is
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def completion(text: str) -> Reply:
    return Reply(
        json_body={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
    )


def streamed(pieces: Sequence[str]) -> Reply:
    return Reply(stream=list(pieces))


class ScriptedChatServer:
    def __init__(self) -> None:
        self.queue: list[Reply] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        # Listed by GET /v1/models (llama.cpp, OpenAI) and GET /api/tags (Ollama).
        self.models: list[str] = ["scripted-model"]
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.rstrip("/")
                if path == "/v1/models":
                    reply = Reply(
                        json_body={
                            "object": "list",
                            "data": [{"id": m, "object": "model"} for m in server.models],
                        }
                    )
                elif path == "/api/tags":
                    reply = Reply(json_body={"models": [{"name": m} for m in server.models]})
                else:
                    reply = Reply(status=404, json_body={"error": f"no route {self.path}"})
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(reply)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    if server.queue:
                        reply = server.queue.pop(0)
                    elif server.responder is not None:
                        reply = server.responder(body)
                    else:
                        reply = Reply(status=500, json_body={"error": "script exhausted"})
                if self.path.rstrip("/") != "/v1/chat/completions":
                    reply = Reply(status=404, json_body={"error": f"no route {self.path}"})
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                # The client may have given up already (timeout tests).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(reply)

            def _send(self, reply: Reply) -> None:
                if reply.stream is not None or reply.stream_raw is not None:
                    payloads = list(reply.stream_raw or [])
                    if reply.stream is not None:
                        payloads = [
                            json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]})
                            for piece in reply.stream
                        ] + ["[DONE]"]
                    data = "".join(f"data: {p}\n\n" for p in payloads).encode()
                    content_type = "text/event-stream"
                elif reply.raw is not None:
                    data, content_type = reply.raw, "application/json"
                else:
                    data, content_type = json.dumps(reply.json_body).encode(), "application/json"
                self.send_response(reply.status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    def user_messages(self) -> list[str]:
        return [m["content"] for r in self.requests for m in r["messages"] if m["role"] == "user"]
