"""Reading sources: server paths (with globs) and web pages by URL.

The URL fetcher is an SSRF guard as much as a client: it resolves the host itself,
refuses private, loopback, link-local (cloud metadata at 169.254.169.254), multicast,
reserved and unspecified addresses, then connects to exactly the address it checked
(so a DNS answer that changes between check and connect cannot slip through), follows
redirects by hand re-checking every hop, and bounds time and size.
"""

from __future__ import annotations

import glob
import ipaddress
import os
import socket
import time
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import httpx

from .limits import IngestionLimits
from .loaders.base import format_bytes
from .types import (
    RawSource,
    SourceLoadError,
    SourceTooLarge,
    UrlFetchError,
    UrlRefused,
)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_GLOB_CHARS = ("*", "?")
_REDIRECT_STATUSES = {301, 302, 303, 307, 308}
_USER_AGENT = "ragsite-ingest/1.0"


def is_url(location: str) -> bool:
    """``scheme://...`` locations are URLs; everything else is a server path."""
    scheme, sep, _rest = location.partition("://")
    return bool(sep) and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum()


def normalise_url(location: str) -> str:
    """A URL with its scheme in lower case (``HTTP://x`` → ``http://x``); paths unchanged.

    Schemes are case-insensitive (RFC 3986), so ``HTTP://`` is as good an address as
    ``http://`` and must not be accepted at one step and refused at the next.
    """
    if not is_url(location):
        return location
    scheme, _sep, rest = location.partition("://")
    return f"{scheme.lower()}://{rest}"


def is_web_url(location: str) -> bool:
    """An http or https URL, whatever the case of its scheme."""
    return normalise_url(location.strip()).startswith(("http://", "https://"))


def read_path(path: Path, *, limits: IngestionLimits) -> RawSource:
    """Read a file from the server's disk, refusing it by size before reading a byte."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SourceLoadError(f"file not found: {path}") from None
    except OSError as exc:
        raise SourceLoadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if path.is_dir():
        raise SourceLoadError(f"{path} is a directory, not a file")
    if info.st_size > limits.max_file_bytes:
        raise SourceTooLarge(
            f"the file is {format_bytes(info.st_size)}; "
            f"the limit is {format_bytes(limits.max_file_bytes)}"
        )
    try:
        with path.open("rb") as handle:
            # Bounded even if the file grows after stat().
            data = handle.read(limits.max_file_bytes + 1)
    except OSError as exc:
        raise SourceLoadError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > limits.max_file_bytes:
        raise SourceTooLarge(f"the file is larger than {format_bytes(limits.max_file_bytes)}")
    return RawSource(location=str(path), origin="path", data=data, filename=path.name)


def expand_locations(patterns: list[str], *, base_dir: Path | None = None) -> list[tuple[str, str]]:
    """Expand locations into ``(location, origin_pattern)`` pairs, in a stable order.

    A URL passes through. A path with ``*``, ``**`` or ``?``, or a directory (read as
    ``dir/**/*``), becomes the files it matches, sorted, each carrying the absolute
    pattern it came from, so that a file later missing from the same pattern can be
    recognised as removed. A single file carries ``""``. A pattern that matches nothing
    yields nothing: the caller reports it. Hidden files are skipped by the globs.
    """
    base = base_dir or Path.cwd()
    seen: set[str] = set()
    expanded: list[tuple[str, str]] = []

    def add(location: str, origin: str) -> None:
        if location not in seen:
            seen.add(location)
            expanded.append((location, origin))

    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        if is_url(pattern):
            add(pattern, "")
            continue
        absolute = os.path.abspath(base / Path(pattern).expanduser())
        if any(char in pattern for char in _GLOB_CHARS):
            matches = glob.glob(absolute, recursive=True)
            for match in sorted(m for m in matches if os.path.isfile(m)):
                add(match, absolute)
        elif os.path.isdir(absolute):
            matches = glob.glob(os.path.join(absolute, "**", "*"), recursive=True)
            for match in sorted(m for m in matches if os.path.isfile(m)):
                add(match, absolute)
        else:
            add(absolute, "")
    return expanded


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# SIIT "IPv4-translated" addresses, ::ffff:0:a.b.c.d (RFC 2765).
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_REACHES_INNER_HOST = {"IPv4-mapped", "6to4", "NAT64", "IPv4-translated"}


def embedded_ipv4(address: IpAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the scheme that carries it.

    6to4 (2002::/16), Teredo (2001::/32: server and client), NAT64 (64:ff9b::/96),
    IPv4-mapped (::ffff:0:0/96) and IPv4-translated addresses reach the IPv4 host
    inside them, so that host is what the address check must look at.
    """
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    if address.ipv4_mapped is not None:
        return [("IPv4-mapped", address.ipv4_mapped)]
    if address.sixtofour is not None:
        return [("6to4", address.sixtofour)]
    if address.teredo is not None:
        server, client = address.teredo
        return [("Teredo", client), ("Teredo server", server)]
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _NAT64:
        return [("NAT64", low)]
    if address in _IPV4_TRANSLATED:
        return [("IPv4-translated", low)]
    return []


def address_refusal(address: IpAddress) -> str | None:
    """Why fetching from ``address`` is refused (e.g. ``"loopback"``), or None if public."""
    carried = embedded_ipv4(address)
    for scheme, inner in carried:
        reason = _refusal(inner)
        if reason:
            if scheme == "IPv4-mapped":
                return reason
            return f"{reason} ({scheme} address of {inner})"
    if carried and carried[0][0] in _REACHES_INNER_HOST:
        # The IPv4 host inside is public, and it is what a connection reaches.
        return None
    # Teredo tunnels through relays: the IPv6 address is judged as well.
    return _refusal(address)


def _refusal(address: IpAddress) -> str | None:
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not publicly routable", not address.is_global),
    )
    return next((label for label, hit in checks if hit), None)


def resolve_host(host: str, port: int) -> list[IpAddress]:
    """All addresses ``host`` resolves to (an IP literal resolves to itself)."""
    try:
        return [ipaddress.ip_address(host.strip("[]").split("%", 1)[0])]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise UrlFetchError(f"could not resolve host {host}: {exc}") from exc
    addresses: list[IpAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UrlFetchError(f"could not resolve host {host}")
    return addresses


def host_key(host: str, port: int) -> str:
    """``host:port`` in lower case, as ``private_hosts_allowed`` lists it (IPv6 in brackets)."""
    host = host.strip("[]").lower()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_allowed(host: str, port: int, limits: IngestionLimits) -> bool:
    """Whether ``host:port`` is one of the few named exceptions to the address check."""
    return host_key(host, port) in {entry.lower() for entry in limits.private_hosts_allowed}


def _pinned(url: httpx.URL, limits: IngestionLimits) -> tuple[httpx.URL, str, str]:
    """Check ``url`` and return (URL with the checked IP as host, Host header, TLS name)."""
    if url.scheme not in {"http", "https"}:
        raise UrlRefused(f"only http and https URLs are fetched, not {url.scheme or 'no'} URLs")
    host = url.raw_host.decode("ascii")
    if not host:
        raise UrlRefused(f"the URL {url} has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = resolve_host(host, port)
    if not limits.allow_private_urls and not host_allowed(host, port, limits):
        # Every address must be public: an attacker's DNS may mix a private one in.
        for address in addresses:
            reason = address_refusal(address)
            if reason:
                raise UrlRefused(
                    f"{url.host} resolves to {address}, a {reason} address; "
                    "fetching it is not allowed (set RAG_ALLOW_PRIVATE_URLS to allow)"
                )
    host_header = url.netloc.decode("ascii").rpartition("@")[2]
    return url.copy_with(host=str(addresses[0])), host_header, host


def fetch_url(url: str, *, limits: IngestionLimits) -> RawSource:
    """Fetch a web page within the limits; see the module docstring for the guards.

    Raises :class:`UrlRefused` (scheme, private address, too many redirects),
    :class:`UrlFetchError` (timeout, HTTP error, connection failure) and
    :class:`SourceTooLarge` (body over ``limits.url_max_bytes``).
    """
    try:
        current = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UrlRefused(f"not a valid URL: {exc}") from exc
    deadline = time.monotonic() + limits.url_timeout_s
    with httpx.Client(trust_env=False, follow_redirects=False) as client:
        for _hop in range(limits.url_max_redirects + 1):
            target, host_header, server_name = _pinned(current, limits)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out(limits)
            request = client.build_request(
                "GET",
                target,
                headers={
                    "Host": host_header,
                    "User-Agent": _USER_AGENT,
                    # Compressed bodies could inflate far past the size limit.
                    "Accept-Encoding": "identity",
                },
                timeout=httpx.Timeout(remaining),
                extensions={"sni_hostname": server_name},
            )
            try:
                response = client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise _timed_out(limits) from exc
            except httpx.HTTPError as exc:
                raise UrlFetchError(f"could not fetch {current}: {exc}") from exc
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECT_STATUSES and location:
                    current = current.join(location)
                    continue
                if response.status_code >= 400:
                    raise UrlFetchError(f"HTTP {response.status_code} {response.reason_phrase}")
                data = _read_body(response, limits, deadline)
            finally:
                response.close()
            return RawSource(
                location=url,
                origin="url",
                data=data,
                filename=PurePosixPath(unquote(current.path)).name,
                final_url=str(current),
                http_status=response.status_code,
                declared_mime=response.headers.get("content-type", ""),
            )
    raise UrlRefused(f"too many redirects (more than {limits.url_max_redirects})")


def _timed_out(limits: IngestionLimits) -> UrlFetchError:
    return UrlFetchError(f"timed out after {limits.url_timeout_s:g} s")


def _read_body(response: httpx.Response, limits: IngestionLimits, deadline: float) -> bytes:
    """The body, streamed, stopping as soon as it passes the size or time limit."""
    too_large = SourceTooLarge(
        f"the response is larger than the limit of {format_bytes(limits.url_max_bytes)}"
    )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.url_max_bytes:
        raise too_large
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > limits.url_max_bytes:
                raise too_large
            # A server trickling bytes must not stretch the total time limit.
            if time.monotonic() > deadline:
                raise _timed_out(limits)
            chunks.append(chunk)
    except httpx.TimeoutException as exc:
        raise _timed_out(limits) from exc
    except httpx.HTTPError as exc:
        raise UrlFetchError(f"the download failed: {exc}") from exc
    return b"".join(chunks)
