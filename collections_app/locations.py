"""A source's location as answers show it, without the server's directory layout.

Sources read from the server's disk are stored under their absolute path (the
manifest and re-ingestion need it); a citation shows the path relative to the
ingest root that holds it (``RAG["ingestion"]["roots"]``), or just the file name.
URLs and uploads (``upload:<name>``) are shown as they are.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from django.conf import settings


def _roots() -> list[PurePosixPath]:
    configured = settings.RAG.get("ingestion", {}).get("roots") or []
    roots = [PurePosixPath(os.path.abspath(os.path.expanduser(str(r)))) for r in configured]
    # The deepest root that holds a path names it most closely.
    return sorted(roots, key=lambda root: len(root.parts), reverse=True)


def location_shown(location: str) -> str:
    """``location`` for a citation: a server path relative to its ingest root, else its name."""
    if "://" in location or not location.startswith("/"):
        return location
    path = PurePosixPath(os.path.normpath(location))
    for root in _roots():
        if root in path.parents:
            return path.relative_to(root).as_posix()
    return path.name or location
