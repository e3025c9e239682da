"""The loader tests' way in: bytes through the load stage as a server-path source.

Used by tests/ingestion/test_loaders*.py, a module per format.
"""

from __future__ import annotations

from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.types import LoadedDocument, RawSource

LIMITS = IngestionLimits()


def load(
    data: bytes | str, filename: str, *, limits: IngestionLimits = LIMITS, mime: str = ""
) -> LoadedDocument:
    """Load ``data`` as the file ``/srv/docs/<filename>``, with the declared MIME type ``mime``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    source = RawSource(
        location=f"/srv/docs/{filename}",
        origin="path",
        data=data,
        filename=filename,
        declared_mime=mime,
    )
    return load_document(source, limits=limits)
