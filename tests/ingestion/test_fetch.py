"""Reading paths and globs, and fetching URLs from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from collections_app.ingestion.fetch import (
    address_refusal,
    expand_locations,
    fetch_url,
    is_web_url,
    normalise_url,
    read_path,
)
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.types import (
    SourceLoadError,
    SourceTooLarge,
    UrlFetchError,
    UrlRefused,
)
from collections_app.models import Source
from collections_app.services import collection_ingest

LOCAL = IngestionLimits(allow_private_urls=True, url_timeout_s=5.0)
GUARDED = IngestionLimits(allow_private_urls=False, url_timeout_s=5.0)
PAGE = (
    b"<!doctype html><html><body><main><h1>Status</h1><p>All systems go.</p></main></body></html>"
)


# --- paths -----------------------------------------------------------------------------


def test_read_path_reads_the_file_with_its_name(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hello")
    raw = read_path(path, limits=IngestionLimits())
    assert (raw.data, raw.filename, raw.origin, raw.location) == (
        b"hello",
        "notes.txt",
        "path",
        str(path),
    )


def test_read_path_refuses_an_oversized_file_by_its_size_alone(tmp_path):
    path = tmp_path / "huge.log"
    with path.open("wb") as handle:
        handle.truncate(8 * 1024**3)  # sparse: 8 GiB on paper, nothing on disk
    with pytest.raises(SourceTooLarge, match=r"the file is 8\.0 GiB; the limit is 1\.0 MiB"):
        read_path(path, limits=IngestionLimits(max_file_bytes=1024 * 1024))


def test_read_path_of_a_missing_file_says_so(tmp_path):
    with pytest.raises(SourceLoadError, match="file not found"):
        read_path(tmp_path / "gone.txt", limits=IngestionLimits())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for relative in [
        "a.md",
        "b.txt",
        "docs/c.md",
        "docs/deep/d.md",
        "docs/.hidden.md",
        "docs/e.csv",
    ]:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(relative)
    return tmp_path


def test_recursive_glob_expands_to_sorted_files_with_their_pattern(tree):
    pattern = str(tree / "**" / "*.md")
    assert expand_locations([pattern]) == [
        (str(tree / "a.md"), pattern),
        (str(tree / "docs" / "c.md"), pattern),
        (str(tree / "docs" / "deep" / "d.md"), pattern),
    ]


def test_relative_patterns_resolve_against_the_base_directory(tree):
    entries = expand_locations(["docs/?.md", "b.txt"], base_dir=tree)
    assert entries == [
        (str(tree / "docs" / "c.md"), str(tree / "docs" / "?.md")),
        (str(tree / "b.txt"), ""),
    ]


def test_directory_means_every_file_below_it(tree):
    entries = expand_locations([str(tree / "docs")])
    assert [location for location, _ in entries] == [
        str(tree / "docs" / "c.md"),
        str(tree / "docs" / "deep" / "d.md"),
        str(tree / "docs" / "e.csv"),
    ]
    assert {origin for _, origin in entries} == {str(tree / "docs")}


def test_glob_matching_nothing_yields_nothing_and_urls_pass_through(tree):
    entries = expand_locations(
        [str(tree / "*.pdf"), "https://example.org/a.html", str(tree / "a.md")]
    )
    assert entries == [("https://example.org/a.html", ""), (str(tree / "a.md"), "")]


def test_a_file_listed_twice_is_expanded_once(tree):
    entries = expand_locations([str(tree / "a.md"), str(tree / "*.md")])
    assert entries == [(str(tree / "a.md"), "")]


# --- address checks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.251", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "not publicly routable"),
        ("93.184.215.14", None),
        ("2606:4700::6810:84e5", None),
        # IPv6 addresses that carry an IPv4 host reach that host.
        ("2002:7f00:1::1", "loopback (6to4 address of 127.0.0.1)"),
        ("2002:c0a8:0001::1", "private (6to4 address of 192.168.0.1)"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (Teredo address of 127.0.0.1)"),
        ("64:ff9b::7f00:1", "loopback (NAT64 address of 127.0.0.1)"),
        ("64:ff9b::a9fe:a9fe", "link-local (NAT64 address of 169.254.169.254)"),
        ("::ffff:0:a00:1", "private (IPv4-translated address of 10.0.0.1)"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:5db8:d70e::1", None),
        ("64:ff9b::5db8:d70e", None),
    ],
)
def test_address_refusal_names_why(address, reason):
    assert address_refusal(ipaddress.ip_address(address)) == reason


def test_6to4_literal_of_loopback_is_refused_without_a_request(server):
    with pytest.raises(UrlRefused, match=r"loopback \(6to4 address of 127\.0\.0\.1\)"):
        fetch_url(f"http://[2002:7f00:1::1]:{server.port}/page.html", limits=GUARDED)
    assert server.requests == []


@pytest.mark.parametrize("location", ["HTTP://Example.com/A?b=C", "Https://example.com/"])
def test_url_schemes_in_capitals_are_web_urls_in_lower_case(location):
    assert is_web_url(location)
    scheme, rest = location.split("://", 1)
    assert normalise_url(location) == f"{scheme.lower()}://{rest}"


@pytest.mark.django_db
def test_url_in_capitals_is_fetched_and_ingested(server, collection, rag_set):
    rag_set("ingestion.allow_private_urls", True)
    url = f"HTTP://127.0.0.1:{server.port}/page.html"
    report = collection_ingest(collection=collection, locations=[url]).as_dict()
    assert report["sources_failed"] == 0, report["sources"]
    assert report["sources_ingested"] == 1
    assert Source.objects.get(collection=collection).location == url.replace("HTTP", "http", 1)


# --- URLs against a real server ------------------------------------------------------------


@dataclass
class Server:
    base: str
    port: int
    requests: list[tuple[str, str]] = field(default_factory=list)  # (path, Host header)


class _Handler(BaseHTTPRequestHandler):
    server: _RecordingServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.record.requests.append((self.path, self.headers.get("Host", "")))
        # The client giving up first is what some tests are about.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route()

    def _route(self) -> None:
        route = self.path.split("?", 1)[0]
        if route == "/page.html":
            self._send(200, PAGE, "text/html; charset=utf-8")
        elif route == "/start":
            self._redirect("/hop")
        elif route == "/hop":
            self._redirect("/page.html")
        elif route == "/loop":
            self._redirect("/loop")
        elif route == "/to-file":
            self._redirect("file:///etc/passwd")
        elif route == "/slow":
            time.sleep(3)
            self._send(200, b"too late", "text/plain")
        elif route == "/big":
            self._send(200, b"x" * 5000, "text/plain")
        elif route == "/big-chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(10):
                self.wfile.write(b"3e8\r\n" + b"y" * 1000 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._send(404, b"nothing here", "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    record: Server


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = _RecordingServer(("127.0.0.1", 0), _Handler)
    port = httpd.server_address[1]
    httpd.record = Server(base=f"http://127.0.0.1:{port}", port=port)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield httpd.record
    httpd.shutdown()
    httpd.server_close()


def test_fetch_returns_the_body_and_what_the_server_said(server):
    raw = fetch_url(f"{server.base}/page.html", limits=LOCAL)
    assert raw.data == PAGE
    assert raw.origin == "url"
    assert raw.http_status == 200
    assert raw.declared_mime == "text/html; charset=utf-8"
    assert raw.final_url == f"{server.base}/page.html"
    assert raw.filename == "page.html"


def test_fetch_by_host_name_connects_to_the_checked_address_and_keeps_the_host(server):
    raw = fetch_url(f"http://localhost:{server.port}/page.html", limits=LOCAL)
    assert raw.data == PAGE
    assert server.requests == [("/page.html", f"localhost:{server.port}")]


def test_redirects_are_followed_and_the_final_url_recorded(server):
    raw = fetch_url(f"{server.base}/start", limits=LOCAL)
    assert raw.data == PAGE
    assert raw.final_url == f"{server.base}/page.html"
    assert [path for path, _ in server.requests] == ["/start", "/hop", "/page.html"]


def test_endless_redirects_stop_at_the_limit(server):
    limits = IngestionLimits(allow_private_urls=True, url_max_redirects=3)
    with pytest.raises(UrlRefused, match=r"too many redirects \(more than 3\)"):
        fetch_url(f"{server.base}/loop", limits=limits)
    assert len(server.requests) == 4


def test_redirect_to_a_non_http_scheme_is_refused(server):
    with pytest.raises(UrlRefused, match="only http and https"):
        fetch_url(f"{server.base}/to-file", limits=LOCAL)


def test_slow_server_times_out_with_the_limit_in_the_message(server):
    limits = IngestionLimits(allow_private_urls=True, url_timeout_s=0.5)
    with pytest.raises(UrlFetchError, match=r"timed out after 0\.5 s"):
        fetch_url(f"{server.base}/slow", limits=limits)


def test_http_error_status_is_reported(server):
    with pytest.raises(UrlFetchError, match="HTTP 404 Not Found"):
        fetch_url(f"{server.base}/missing", limits=LOCAL)


@pytest.mark.parametrize("path", ["/big", "/big-chunked"])
def test_body_over_the_size_limit_is_refused(server, path):
    limits = IngestionLimits(allow_private_urls=True, url_max_bytes=2000)
    with pytest.raises(SourceTooLarge, match="larger than the limit"):
        fetch_url(f"{server.base}{path}", limits=limits)


def test_connection_refused_is_a_fetch_error(server):
    with pytest.raises(UrlFetchError, match="could not fetch"):
        # Port 9 (discard) is closed on loopback in any test environment worth the name.
        fetch_url("http://127.0.0.1:9/", limits=LOCAL)


def test_loopback_url_is_refused_without_a_request(server):
    with pytest.raises(UrlRefused, match=r"127\.0\.0\.1, a loopback address"):
        fetch_url(f"{server.base}/page.html", limits=GUARDED)
    assert server.requests == []


def test_host_name_resolving_to_loopback_is_refused_without_a_request(server):
    with pytest.raises(UrlRefused, match="loopback"):
        fetch_url(f"http://localhost:{server.port}/page.html", limits=GUARDED)
    assert server.requests == []


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
    ],
)
def test_cloud_metadata_address_is_refused(url):
    with pytest.raises(UrlRefused, match="link-local"):
        fetch_url(url, limits=GUARDED)


@pytest.mark.parametrize("url", ["ftp://example.org/file.txt", "file:///etc/passwd"])
def test_other_schemes_are_refused(url):
    with pytest.raises(UrlRefused, match="only http and https"):
        fetch_url(url, limits=GUARDED)


def test_private_addresses_are_refused_unless_allowed():
    assert IngestionLimits().allow_private_urls is False
