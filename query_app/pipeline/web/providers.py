"""Web-search providers: one registry, the deployment's configuration, the results.

A provider is a class with a ``search(query, *, config, limit)`` method returning
``WebResult``s in its own order; it raises ``WebSearchFailed`` (with a sentence
saying why) when the server is down, slow or answers something unreadable. The
web node turns that into a trace warning, never an error for the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from collections_app.ingestion.fetch import host_key
from collections_app.ingestion.limits import IngestionLimits
from query_app.exceptions import UnknownWebSearchProvider
from ragsite.registry import Registry


class WebSearchFailed(Exception):
    """The search server could not be asked or its reply could not be read."""


@dataclass(frozen=True)
class WebResult:
    """One search hit: where it is, and what the search engine said about it."""

    url: str
    title: str = ""
    snippet: str = ""


@dataclass(frozen=True)
class WebSearchConfig:
    """settings.RAG["web_search"]: the deployment's search server and limits.

    ``url`` is the search server (SearxNG's root); it is fetched even when it is on
    a private network or this machine, since the operator named it. Result pages
    are not: they pass the full address check unless their ``host:port`` is in
    ``allow_hosts`` (for an intranet search, or tests on loopback).
    """

    url: str = ""
    timeout_s: float = 10.0
    max_bytes: int = 2 * 1024 * 1024
    allow_hosts: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls) -> WebSearchConfig:
        from django.conf import settings

        block: dict[str, Any] = settings.RAG.get("web_search") or {}
        return cls(
            url=str(block.get("url") or "").strip(),
            timeout_s=float(block.get("timeout_s") or cls.timeout_s),
            max_bytes=int(block.get("max_bytes") or cls.max_bytes),
            allow_hosts=tuple(str(h).strip().lower() for h in block.get("allow_hosts") or ()),
        )

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def search_host(self) -> str:
        """The search server's ``host:port`` (the one private address always allowed)."""
        parts = urlsplit(self.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return host_key(parts.hostname or "", port)

    def limits(self, *, search: bool) -> IngestionLimits:
        """The fetcher's limits: for the search request, or for a result page."""
        allowed = (*self.allow_hosts, self.search_host()) if search else self.allow_hosts
        return IngestionLimits.from_settings(
            url_timeout_s=self.timeout_s,
            url_max_bytes=self.max_bytes,
            max_file_bytes=self.max_bytes,
            url_max_redirects=3,
            # Results come from the internet and any reader may trigger a search:
            # ingestion's blanket allowance never applies here.
            allow_private_urls=False,
            private_hosts_allowed=allowed,
        )


class WebSearchProvider(Protocol):
    name: str

    def search(self, query: str, *, config: WebSearchConfig, limit: int) -> list[WebResult]: ...


WEB_PROVIDERS: Registry[type[WebSearchProvider]] = Registry(
    "web search provider", unknown=UnknownWebSearchProvider
)
"""Providers by name; each module registers its own class where it defines it."""
