"""Web fallback: when a collection's evidence stays insufficient, search the web.

Opt-in per collection (``Collection.web_fallback``) and per request
(``web.enabled``), off by default; the corrective and adaptive graphs run it
once their iteration budget is spent (``stages/web.py``).

- ``providers.py``: the provider registry (``WEB_PROVIDERS``), the deployment's
  configuration (``settings.RAG["web_search"]``) and what a search returns;
- ``searxng.py``: SearxNG's JSON API, the first provider (self-hostable);
- ``pages.py``: result pages fetched through the ingestion's SSRF guard and
  size/time limits, read by the HTML loader, checked by the prompt-injection
  validator, and cut into passages marked "web" with their URL.

Nothing found on the web is ever written into a collection: web passages live
in the answer's state and its stored citations only.
"""

from __future__ import annotations

from query_app.pipeline.web import searxng  # noqa: F401  (registers the provider)
from query_app.pipeline.web.pages import WebHarvest, is_web_chunk, web_passages
from query_app.pipeline.web.providers import (
    WEB_PROVIDERS,
    WebResult,
    WebSearchConfig,
    WebSearchFailed,
    WebSearchProvider,
)

__all__ = [
    "WEB_PROVIDERS",
    "WebHarvest",
    "WebResult",
    "WebSearchConfig",
    "WebSearchFailed",
    "WebSearchProvider",
    "is_web_chunk",
    "web_passages",
]
