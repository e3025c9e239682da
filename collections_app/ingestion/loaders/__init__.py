"""Loaders: one per source kind, chosen by content (see :mod:`..detect`).

``load_document`` is the load stage of ingestion: bytes in, normalised
Markdown-flavoured text out (:class:`~collections_app.ingestion.types.LoadedDocument`).
"""

from __future__ import annotations

import logging

from ..detect import detect_kind
from ..limits import IngestionLimits
from ..types import IngestionError, LoadedDocument, RawSource, SourceLoadError, SourceTooLarge
from .base import LOADERS, Loader, format_bytes, metadata_check

# Each loader module registers its kinds in LOADERS when imported.
from .docx import load_docx
from .html import load_html
from .pdf import load_pdf
from .text import load_csv, load_markdown, load_text

logger = logging.getLogger(__name__)


def load_document(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """Load stage: detect the kind of ``raw`` by its content and turn it into text.

    Raises :class:`SourceTooLarge` for input over ``limits.max_file_bytes`` (and the
    loaders' own page/decompression limits), :class:`SourceLoadError` for empty, corrupt,
    encrypted or wrongly encoded input, :class:`UnsupportedSourceType` for binary content
    no loader reads. An extraction that yields no text is returned as is: the validator
    reports it.
    """
    size = len(raw.data)
    if size > limits.max_file_bytes:
        raise SourceTooLarge(
            f"the file is {format_bytes(size)}; the limit is {format_bytes(limits.max_file_bytes)}"
        )
    if size == 0:
        raise SourceLoadError("the file is empty")
    kind = detect_kind(raw)
    loader = LOADERS.get(kind)
    try:
        document = loader(raw, limits=limits)
        metadata_check(document.metadata, max_bytes=limits.max_metadata_bytes)
        return document
    except IngestionError:
        raise
    except RecursionError as exc:
        raise SourceLoadError(f"the {kind} file is nested too deeply to read") from exc
    except Exception as exc:
        # A parser failing in a way nobody anticipated is still bad input, not a crash.
        logger.exception("loading %s as %s failed", raw.location, kind)
        raise SourceLoadError(f"the {kind} file could not be read: {exc}") from exc


__all__ = [
    "LOADERS",
    "Loader",
    "load_csv",
    "load_document",
    "load_docx",
    "load_html",
    "load_markdown",
    "load_pdf",
    "load_text",
]
