"""SearxNG: a self-hostable metasearch engine with a JSON API (``/search?format=json``).

The instance must list ``json`` among its ``search.formats`` (settings.yml); one
that does not answers 403, which is reported like any other failure.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from collections_app.ingestion.fetch import fetch_url, is_web_url
from collections_app.ingestion.types import IngestionError
from query_app.pipeline.web.providers import (
    WEB_PROVIDERS,
    WebResult,
    WebSearchConfig,
    WebSearchFailed,
)


def searxng_search_url(base: str, query: str) -> str:
    """``base`` (the instance's root, or its /search address) asked for ``query`` as JSON."""
    root = base.rstrip("/")
    if not root.endswith("/search"):
        root += "/search"
    return f"{root}?{urlencode({'q': query, 'format': 'json', 'pageno': 1})}"


@WEB_PROVIDERS.register("searxng")
class SearxngProvider:
    name = "searxng"

    def search(self, query: str, *, config: WebSearchConfig, limit: int) -> list[WebResult]:
        url = searxng_search_url(config.url, query)
        try:
            raw = fetch_url(url, limits=config.limits(search=True))
        except IngestionError as exc:
            raise WebSearchFailed(f"the SearxNG server could not be asked: {exc}") from exc
        return parse_results(raw.data, limit=limit)


def parse_results(data: bytes, *, limit: int) -> list[WebResult]:
    """The http(s) results of a SearxNG JSON reply, deduplicated, at most ``limit``."""
    try:
        reply: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        start = " ".join(data[:60].decode("utf-8", "replace").split())
        raise WebSearchFailed(
            f"the SearxNG reply is not JSON ({type(exc).__name__}; it starts {start!r})"
        ) from None
    items = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        raise WebSearchFailed("the SearxNG reply has no 'results' list")
    results: list[WebResult] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        if not isinstance(url, str) or not is_web_url(url) or url in seen:
            continue
        seen.add(url)
        results.append(
            WebResult(
                url=url,
                title=_text(item.get("title")),
                snippet=_text(item.get("content")),
            )
        )
        if len(results) >= limit:
            break
    return results


def _text(value: Any) -> str:
    return " ".join(value.split())[:500] if isinstance(value, str) else ""
