"""PDF loader (pypdf): one page span per page, pages without a text layer flagged."""

from __future__ import annotations

import contextlib
import io
import logging
import re
from pathlib import PurePosixPath
from typing import Any

from pypdf import PageObject, PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PyPdfError

from ..detect import MIME_BY_KIND, name_hint
from ..limits import IngestionLimits
from ..types import LoadedDocument, PageSpan, RawSource, SourceLoadError, SourceTooLarge
from .base import LOADERS, normalise_newlines, squeeze_blank_lines

logger = logging.getLogger(__name__)
_PAGE_SEPARATOR = "\n\n"
# Titles that PDF producers write when the author gave none (ReportLab writes
# "untitled", office suites "Untitled 1" or "Document1").
_PLACEHOLDER_TITLE = re.compile(
    r"^(?:untitled(?:[\s_-]*(?:document)?[\s_-]*\d*)|no title|title|document\s*\d*|"
    r"\(?anonymous\)?)$",
    re.I,
)


@LOADERS.register("pdf")
def load_pdf(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """Text of every page, joined by blank lines, with each page's character range.

    Raises :class:`SourceLoadError` for an encrypted, truncated or corrupt file and
    :class:`SourceTooLarge` when it has more pages than ``limits.max_pdf_pages`` or a
    stream trips one of pypdf's decompression limits.
    """
    try:
        return _read(raw, limits)
    except (SourceLoadError, SourceTooLarge):
        raise
    except LimitReachedError as exc:
        raise SourceTooLarge(f"the PDF exceeds a parser limit: {exc}") from exc
    except DependencyError as exc:
        raise SourceLoadError(f"the PDF uses a feature this server cannot read: {exc}") from exc
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # pypdf reports structural damage with assorted exception types.
        raise SourceLoadError(
            f"the PDF is truncated or corrupt: {exc or type(exc).__name__}"
        ) from exc


def _read(raw: RawSource, limits: IngestionLimits) -> LoadedDocument:
    reader = PdfReader(io.BytesIO(raw.data), strict=False)
    # Many PDFs are encrypted only against editing, with an empty user password.
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise SourceLoadError("the PDF is password-protected")

    page_count = len(reader.pages)
    if page_count > limits.max_pdf_pages:
        raise SourceTooLarge(f"the PDF has {page_count} pages; the limit is {limits.max_pdf_pages}")

    warnings: list[str] = []
    if b"%%EOF" not in raw.data[-2048:]:
        warnings.append("the PDF has no end-of-file marker (truncated?); read what was there")

    parts: list[str] = []
    pages: list[PageSpan] = []
    hidden_texts: list[str] = []
    position = 0
    for number, page in enumerate(reader.pages, start=1):
        try:
            page_text, invisible = _page_text(page)
        except LimitReachedError:
            raise
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # One damaged page should not cost the others.
            logger.warning("PDF %s page %d unreadable: %s", raw.location, number, exc)
            warnings.append(f"page {number} could not be read: {exc or type(exc).__name__}")
            page_text, invisible = "", []
        if invisible:
            # Text nobody sees on a page that shows other text: hidden from readers.
            # (A scanned page whose only text is an invisible OCR layer keeps it.)
            for piece in invisible:
                page_text = page_text.replace(piece, "", 1)
            hidden_texts.append(" ".join(" ".join(invisible).split()))
        page_text = squeeze_blank_lines(normalise_newlines(page_text).replace("\x00", ""))
        has_text = bool(page_text.strip())
        if not has_text:
            page_text = ""
            if not any(w.startswith(f"page {number} ") for w in warnings):
                warnings.append(f"page {number} has no text layer (no OCR available)")
        if parts and has_text:
            position += len(_PAGE_SEPARATOR)
        start = position
        position += len(page_text)
        if has_text:
            parts.append(page_text)
        pages.append(
            PageSpan(number=number, char_start=start, char_end=position, has_text=has_text)
        )

    title, metadata = _metadata(reader)
    if not title or _PLACEHOLDER_TITLE.match(title):
        # No real title: the file name says more than "untitled" or nothing.
        title = PurePosixPath(name_hint(raw)).stem.strip()
    metadata["page_count"] = page_count
    return LoadedDocument(
        text=_PAGE_SEPARATOR.join(parts),
        kind="pdf",
        mime=MIME_BY_KIND["pdf"],
        title=title,
        metadata=metadata,
        pages=pages,
        hidden_texts=hidden_texts,
        warnings=warnings,
    )


# Text render modes that paint nothing (3: invisible; 7: only adds to the clipping path).
_INVISIBLE_MODES = {3, 7}


def _page_text(page: PageObject) -> tuple[str, list[str]]:
    """The page's text, and the pieces of it drawn invisibly when other text is visible.

    The text render mode (``Tr``) belongs to the graphics state: it persists across
    text objects and is saved and restored by ``q``/``Q``.
    """
    mode = [0]
    saved: list[int] = []
    visible: list[str] = []
    invisible: list[str] = []

    def operator(op: bytes, args: list[Any], *_: Any) -> None:
        if op == b"Tr" and args:
            with contextlib.suppress(TypeError, ValueError):
                mode[0] = int(args[0])
        elif op == b"q":
            saved.append(mode[0])
        elif op == b"Q" and saved:
            mode[0] = saved.pop()

    def shown(text: str, *_: Any) -> None:
        if text.strip():
            (invisible if mode[0] in _INVISIBLE_MODES else visible).append(text.strip())

    text = page.extract_text(visitor_operand_before=operator, visitor_text=shown) or ""
    return text, invisible if visible else []


def _metadata(reader: PdfReader) -> tuple[str, dict[str, object]]:
    """Title and author from the document information, when readable."""
    try:
        info = reader.metadata
    except (PyPdfError, ValueError, KeyError, TypeError):
        return "", {}
    if info is None:
        return "", {}
    metadata: dict[str, object] = {}
    for key, attribute in (("author", "author"), ("subject", "subject"), ("producer", "producer")):
        try:
            value = getattr(info, attribute)
        except (PyPdfError, ValueError, KeyError, TypeError):
            continue
        if value:
            metadata[key] = " ".join(str(value).split())
    try:
        keywords = info.get("/Keywords")
    except (PyPdfError, ValueError, KeyError, TypeError):
        keywords = None
    if keywords:
        # Read by whatever indexes the file; the injection validator checks them.
        metadata["keywords"] = " ".join(str(keywords).split())
    try:
        title = " ".join(str(info.title or "").split())
    except (PyPdfError, ValueError, KeyError, TypeError):
        title = ""
    return title[:200], metadata
