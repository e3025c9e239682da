"""Size, time and address limits for ingestion, read from settings.RAG["ingestion"]."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class IngestionLimits:
    max_file_bytes: int = 50 * 1024 * 1024
    max_text_chars: int = 20_000_000
    max_pdf_pages: int = 2000
    max_decompressed_bytes: int = 200 * 1024 * 1024
    max_compression_ratio: int = 100
    # A document's metadata (front matter, PDF info, ...) as JSON.
    max_metadata_bytes: int = 64 * 1024
    url_timeout_s: float = 15.0
    url_max_bytes: int = 20 * 1024 * 1024
    url_max_redirects: int = 5
    allow_private_urls: bool = False
    # ``host:port`` pairs fetched even when they resolve to a private or loopback
    # address. Empty for ingestion; the web fallback names the configured search
    # server (a self-hosted SearxNG) and the hosts its settings list, nothing else.
    private_hosts_allowed: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, **overrides: Any) -> IngestionLimits:
        from django.conf import settings

        block = settings.RAG.get("ingestion", {})
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in block.items() if k in known}
        return replace(cls(**values), **overrides)
