"""Content-integrity validator: is the extracted text usable at all?"""

from __future__ import annotations

import re

from ..limits import IngestionLimits
from ..loaders.base import format_bytes
from ..types import LoadedDocument, Signal
from .base import VALIDATORS, Validator

# Above this share of U+FFFD the text is unreadable (wrong encoding, broken font maps).
MAX_REPLACEMENT_SHARE = 0.3
_MIN_CHARS_FOR_SHARE = 20
_WHITESPACE = re.compile(r"\s+")


def check_integrity(doc: LoadedDocument, limits: IngestionLimits) -> tuple[list[Signal], list[str]]:
    """Errors that make a source unusable: empty or unreadable text, limits exceeded."""
    errors: list[str] = []
    text = doc.text
    if len(text) > limits.max_text_chars:
        errors.append(
            f"the extracted text has {len(text):,} characters; the limit is {limits.max_text_chars:,}"
        )
    if not text.strip():
        if doc.kind == "pdf" and doc.pages and not any(page.has_text for page in doc.pages):
            errors.append("no text layer on any page (scanned PDF?)")
        else:
            errors.append("no text could be extracted")
    elif replacement := text.count("\ufffd"):
        visible = len(_WHITESPACE.sub("", text))
        if visible >= _MIN_CHARS_FOR_SHARE and replacement / visible > MAX_REPLACEMENT_SHARE:
            errors.append(
                f"the text is mostly unreadable: {replacement / visible:.0%} of its characters "
                "are replacement characters (wrong encoding or a broken font)"
            )
    if doc.pages and len(doc.pages) > limits.max_pdf_pages:
        errors.append(
            f"the document has {len(doc.pages)} pages; the limit is {limits.max_pdf_pages}"
        )
    if (
        doc.decompressed_bytes is not None
        and doc.decompressed_bytes > limits.max_decompressed_bytes
    ):
        errors.append(
            f"decompressed size {format_bytes(doc.decompressed_bytes)} exceeds the limit of "
            f"{format_bytes(limits.max_decompressed_bytes)}"
        )
    return [], errors


CONTENT_INTEGRITY = VALIDATORS.add("content-integrity", Validator(check=check_integrity))
