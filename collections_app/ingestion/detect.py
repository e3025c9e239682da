"""Content-based type detection: which loader reads a source.

The bytes decide first (magic numbers via ``filetype``, byte-order marks, NUL bytes),
so a PNG or an executable named ``.txt`` is refused with a clear message instead of being
indexed as garbage. The file name or the server's Content-Type is only a hint used to
choose among *text* formats (Markdown, CSV, HTML or plain text), which magic bytes
cannot tell apart.
"""

from __future__ import annotations

import codecs
import re
import zipfile
from io import BytesIO
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import filetype

from .types import RawSource, SourceLoadError, UnsupportedSourceType

KINDS: tuple[str, ...] = ("text", "markdown", "csv", "html", "pdf", "docx")
SUPPORTED_DESCRIPTION = "plain text, Markdown, CSV, HTML, PDF, DOCX"

MIME_BY_KIND: dict[str, str] = {
    "text": "text/plain",
    "markdown": "text/markdown",
    "csv": "text/csv",
    "html": "text/html",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}

# Byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one).
BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)

_SNIFF_BYTES = 8192
# Local file header and empty-archive signatures; DOCX files start with the first.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
# OLE2 compound file: Word 97-2003 documents, and DOCX files once encrypted.
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
_CSV_EXTENSIONS = {".csv", ".tsv"}
_HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}
_TEXT_MIME_KIND = {
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/csv": "csv",
    "text/tab-separated-values": "csv",
    "text/html": "html",
    "application/xhtml+xml": "html",
}
_HTML_START = re.compile(
    rb"^\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>]|head[\s>])",
    re.I | re.S,
)
_MARKDOWN_HINT = re.compile(r"^(?:---\s*\n|#{1,6}\s+\S)", re.M)
# Control characters other than tab, newline, carriage return and form feed.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def name_hint(raw: RawSource) -> str:
    """The file name a source goes by: its filename, else the last part of its location."""
    if raw.filename:
        return raw.filename
    location = raw.final_url or raw.location
    if "://" in location:
        location = urlsplit(location).path
    return PurePosixPath(location.replace("\\", "/")).name


def extension_of(raw: RawSource) -> str:
    return PurePosixPath(name_hint(raw)).suffix.lower()


def declared_mime_type(raw: RawSource) -> str:
    """The media type of a Content-Type header value, without parameters."""
    return raw.declared_mime.split(";", 1)[0].strip().lower()


def bom_encoding(data: bytes) -> str | None:
    """The encoding named by a byte-order mark at the start of ``data``, if any."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return encoding
    return None


def utf16_without_bom(data: bytes) -> str | None:
    """``"utf-16-le"`` or ``"utf-16-be"`` for UTF-16 text saved without a byte-order mark.

    Text in a Latin script saved as UTF-16 has a NUL in every other byte (the high
    byte of each character) and almost none in the others; which half holds them
    tells the byte order. The sample must then decode to text without control
    characters, so binary files with a similar rhythm are not taken for text.
    """
    head = data[:_SNIFF_BYTES]
    head = head[: len(head) - len(head) % 2]
    if len(head) < 4:
        return None
    even, odd = head[0::2], head[1::2]
    pairs = len(head) // 2
    for nuls, others, encoding in ((odd, even, "utf-16-le"), (even, odd, "utf-16-be")):
        if nuls.count(0) >= 0.3 * pairs and others.count(0) <= 0.02 * pairs:
            try:
                text = head.decode(encoding)
            except UnicodeDecodeError:
                # A sample cut inside a surrogate pair: drop the last character.
                try:
                    text = head[:-2].decode(encoding)
                except UnicodeDecodeError:
                    return None
            controls = sum(1 for ch in text if ch < " " and ch not in "\t\n\r\f")
            return encoding if controls <= max(2, len(text) // 100) else None
    return None


def text_encoding(data: bytes) -> str | None:
    """The encoding the bytes themselves reveal: a byte-order mark, or UTF-16 without one."""
    return bom_encoding(data) or utf16_without_bom(data)


def detect_kind(raw: RawSource) -> str:
    """Return the loader kind for ``raw``: one of :data:`KINDS`.

    Raises :class:`SourceLoadError` for an empty file and :class:`UnsupportedSourceType`
    for binary content no loader reads.
    """
    data = raw.data
    if not data:
        raise SourceLoadError("the file is empty")
    if data.lstrip()[:5] == b"%PDF-":
        return "pdf"
    if extension_of(raw) == ".docx" and not data.startswith(_ZIP_MAGIC):
        # Named as a Word document but not one: say so, rather than reporting
        # whatever the bytes look like as text ("not valid utf-32-le").
        raise SourceLoadError(_not_docx_message(data))
    if text_encoding(data):
        return _text_kind(raw, data)

    head = data[:_SNIFF_BYTES]
    guess = filetype.guess(head)
    if guess is not None:
        if guess.mime in {MIME_BY_KIND["docx"], "application/zip"} and _is_word_archive(raw):
            return "docx"
        # Some signatures are two printable letters ("BM" for a bitmap, "MZ" for a
        # Windows program): a note starting "BMW service intervals" is still text.
        if not _looks_like_text(head):
            raise UnsupportedSourceType(_binary_message(raw, guess.mime))
    elif b"\x00" in head or len(_CONTROL.findall(head)) > max(8, len(head) // 20):
        raise UnsupportedSourceType(_binary_message(raw, "application/octet-stream"))
    return _text_kind(raw, data)


def _looks_like_text(head: bytes) -> bool:
    """UTF-8 without NUL bytes and with hardly any control characters."""
    if b"\x00" in head or len(_CONTROL.findall(head)) > max(8, len(head) // 20):
        return False
    try:
        # Not final: the sample may end inside a multi-byte character.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _text_kind(raw: RawSource, data: bytes) -> str:
    """Choose among the text formats: content first, then the name, then the server."""
    encoding = text_encoding(data)
    head = data[:_SNIFF_BYTES]
    if encoding and encoding != "utf-8-sig":
        head = head.decode(encoding, errors="ignore").encode("utf-8")
    elif encoding:
        head = head[3:]
    if _HTML_START.match(head):
        return "html"
    extension = extension_of(raw)
    if extension in _HTML_EXTENSIONS:
        return "html"
    if extension in _MARKDOWN_EXTENSIONS:
        return "markdown"
    if extension in _CSV_EXTENSIONS:
        return "csv"
    mime_kind = _TEXT_MIME_KIND.get(declared_mime_type(raw))
    if mime_kind:
        return mime_kind
    if extension == "" and _MARKDOWN_HINT.match(head.decode("utf-8", errors="ignore")):
        return "markdown"
    return "text"


def _is_word_archive(raw: RawSource) -> bool:
    """A zip is read as DOCX when named so or when it holds ``word/document.xml``.

    Only the central directory is read here; the DOCX loader checks the declared sizes
    before inflating anything, so a zip bomb named ``.docx`` is refused there.
    """
    if extension_of(raw) == ".docx":
        return True
    try:
        with zipfile.ZipFile(BytesIO(raw.data)) as archive:
            return "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _not_docx_message(data: bytes) -> str:
    if data.startswith(_OLE2_MAGIC):
        return (
            "not a valid DOCX file: it is an old-format (.doc) or password-protected Word "
            "document; save it as .docx without a password"
        )
    return (
        "not a valid DOCX file: a DOCX is a zip archive and this file is not one "
        "(damaged, or saved in another format under a .docx name)"
    )


def _binary_message(raw: RawSource, mime: str) -> str:
    extension = extension_of(raw)
    named = f" named {extension}" if extension else ""
    return f"binary content ({mime}){named}; supported: {SUPPORTED_DESCRIPTION}"
