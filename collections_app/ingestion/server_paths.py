"""Which files on the server's disk the web and the API may have ingested.

Server paths are read by the worker with the application's own rights, so a
path named through the web or the API must stay inside the folders the
operator opened for it (``RAG_INGEST_ROOTS``; by default only the demo corpus)
and never reach the application's own data, code or secrets, even when an
opened folder contains them (a root of ``/`` or of the project's parent).

A path is judged by what it resolves to (symlinks followed, ``..`` removed), so
neither a link inside a root nor a ``..`` leads out of it. Globs and
directories are judged by their fixed part when they are submitted, and every
file they expand to is judged again when it is read.

The ``rag ingest`` command is the local operator and is not held to these rules.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.conf import settings

GLOB_CHARS = frozenset("*?[")

# Names never read from under a root, at any depth: credentials and the like.
SECRET_NAMES = frozenset({".env", ".netrc", ".pgpass", "id_rsa", "id_ed25519", "id_ecdsa"})


def ingest_roots() -> list[Path]:
    """The folders server paths may be read from, resolved (``RAG["ingestion"]["roots"]``)."""
    configured = settings.RAG["ingestion"].get("roots") or []
    return [Path(os.path.expanduser(str(root))).resolve() for root in configured]


def protected_folders() -> list[Path]:
    """The application's own data, code and environment, never read through the web."""
    folders = [
        Path(settings.BASE_DIR),
        Path(settings.VAR_DIR),
        Path(settings.MEDIA_ROOT),
        Path(settings.STATIC_ROOT),
        Path(sys.prefix),
    ]
    # The embedded database's socket folder is its data folder.
    data_dir = str(settings.DATABASES["default"].get("HOST") or "")
    if data_dir.startswith("/"):
        folders.append(Path(data_dir))
    settings_module = sys.modules.get(str(settings.SETTINGS_MODULE))
    if settings_module is not None and getattr(settings_module, "__file__", None):
        folders.append(Path(str(settings_module.__file__)).parent)
    return [folder.resolve() for folder in folders]


def server_path_refusal(location: str) -> str:
    """Why ``location`` (a path, directory or glob) may not be read for the web; "" if it may."""
    raw = os.path.expanduser(location.strip())
    if not os.path.isabs(raw):
        return f"{location}: a server path must be absolute"
    if ".." in Path(raw).parts:
        return f"{location}: a server path may not contain '..'"
    fixed = _fixed_part(raw)
    return _refusal(location, Path(fixed).resolve())


def server_file_refusal(location: str) -> str:
    """Why the file ``location`` may not be read for the web; "" if it may (checked as read)."""
    return _refusal(location, Path(location).resolve())


def _fixed_part(pattern: str) -> str:
    """The folders of a glob before its first wildcard (the whole path for a plain one)."""
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts:
        if GLOB_CHARS & set(part):
            break
        fixed.append(part)
    return os.path.join(*fixed) if fixed else "/"


def _refusal(location: str, resolved: Path) -> str:
    roots = ingest_roots()
    # The innermost root holding the file decides (a root may lie inside another).
    holding = [r for r in roots if resolved == r or r in resolved.parents]
    root = max(holding, key=lambda r: len(r.parts), default=None)
    if root is None:
        opened = ", ".join(str(r) for r in roots) or "none"
        return (
            f"{location}: server paths may only be read from the folders in "
            f"RAG_INGEST_ROOTS (now: {opened})"
        )
    inner = resolved.relative_to(root).parts
    if any(part.startswith(".") or part in SECRET_NAMES for part in inner):
        return f"{location}: hidden files and credentials are never read from the server"
    for folder in protected_folders():
        # A protected folder gives way only to a root opened inside it (the demo
        # corpus in the project folder); a root that is or holds it opens nothing.
        if (resolved == folder or folder in resolved.parents) and folder not in root.parents:
            return f"{location}: the application's own files are never read from the server"
    return ""
