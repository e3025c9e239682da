"""Chat servers running on this machine (Ollama, llama.cpp server), probed on loopback only."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

logger = logging.getLogger(__name__)

# Probed briefly: nothing listening is the common case, and the page is waiting.
DETECT_CONNECT_TIMEOUT_S = 0.3
DETECT_READ_TIMEOUT_S = 1.5


DEFAULT_LOCAL_SERVERS: tuple[dict[str, str], ...] = (
    {"kind": "ollama", "url": "http://127.0.0.1:11434"},
    {"kind": "llama.cpp", "url": "http://127.0.0.1:8080"},
)
LOCAL_SERVER_LABELS = {"ollama": "Ollama", "llama.cpp": "llama.cpp server"}


@dataclass(frozen=True)
class LocalServer:
    """A chat server found on this machine, offered as a one-click fill-in."""

    kind: str
    label: str
    base_url: str  # the OpenAI-compatible API root to save
    models: tuple[str, ...]


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _model_names(payload: Any) -> list[str]:
    """Model names from /api/tags ({"models": [{"name"}]}) or /v1/models ({"data": [{"id"}]})."""
    names: list[str] = []
    if isinstance(payload, dict):
        for item in payload.get("models") or []:
            if isinstance(item, dict) and isinstance(item.get("name") or item.get("model"), str):
                names.append(str(item.get("name") or item.get("model")))
        for item in payload.get("data") or []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                names.append(item["id"])
    return list(dict.fromkeys(names))


def _probe(kind: str, url: str) -> LocalServer | None:
    root = url.rstrip("/")
    paths = ["/api/tags", "/v1/models"] if kind == "ollama" else ["/v1/models"]
    timeout = httpx.Timeout(DETECT_READ_TIMEOUT_S, connect=DETECT_CONNECT_TIMEOUT_S)
    # trust_env=False: a proxy from the environment must not see loopback probes.
    with httpx.Client(timeout=timeout, trust_env=False, follow_redirects=False) as http:
        for path in paths:
            try:
                response = http.get(root + path)
            except httpx.HTTPError:
                return None  # nothing listening, or too slow to be of use
            if response.status_code != 200:
                continue
            try:
                payload = response.json()
            except ValueError:
                continue
            if not isinstance(payload, dict) or not ({"models", "data"} & payload.keys()):
                continue
            label = LOCAL_SERVER_LABELS.get(kind, kind)
            return LocalServer(kind, label, f"{root}/v1", tuple(_model_names(payload)))
    return None


def local_chat_servers_detect(
    servers: Sequence[Mapping[str, str]] | None = None,
) -> list[LocalServer]:
    """Ollama or llama.cpp servers answering on this machine (loopback only, short timeouts)."""
    if servers is None:
        servers = (settings.RAG.get("chat") or {}).get("local_servers") or DEFAULT_LOCAL_SERVERS
    probes = []
    for server in servers:
        kind, url = str(server.get("kind", "")), str(server.get("url", ""))
        if not is_loopback_url(url):
            logger.warning("not probing %s for a local chat server: not a loopback address", url)
            continue
        probes.append((kind, url))
    if not probes:
        return []
    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        found = list(pool.map(lambda probe: _probe(*probe), probes))
    return [server for server in found if server is not None]
