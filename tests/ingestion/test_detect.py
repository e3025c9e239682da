"""Content decides the loader; the name only chooses among text formats."""

from __future__ import annotations

import io
import zipfile

import pytest

from collections_app.ingestion.detect import detect_kind
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.types import RawSource, SourceLoadError, UnsupportedSourceType
from tests.support.sample_files import ELF_HEADER, PNG_HEADER, docx_bytes, docx_paragraph, pdf_bytes


def raw(data: bytes, filename: str = "", *, location: str = "", mime: str = "") -> RawSource:
    return RawSource(
        location=location or f"/srv/docs/{filename}",
        origin="path",
        data=data,
        filename=filename,
        declared_mime=mime,
    )


def test_png_named_txt_is_refused_as_binary_with_its_real_type():
    with pytest.raises(UnsupportedSourceType) as excinfo:
        detect_kind(raw(PNG_HEADER + b"\x00" * 64, "notes.txt"))
    message = str(excinfo.value)
    assert "binary content (image/png) named .txt" in message
    assert "supported:" in message and "PDF" in message


def test_executable_named_txt_is_refused():
    with pytest.raises(
        UnsupportedSourceType, match=r"binary content \(.*executable.*\) named \.txt"
    ):
        detect_kind(raw(ELF_HEADER, "readme.txt"))


def test_unknown_binary_with_nul_bytes_is_refused():
    data = bytes(range(256)) * 4
    with pytest.raises(UnsupportedSourceType, match="application/octet-stream"):
        detect_kind(raw(data, "data.md"))


@pytest.mark.parametrize(
    "opening", [b"BMW service intervals", b"ID3 tags explained", b"MZ-5 manual"]
)
def test_text_that_starts_like_a_binary_signature_is_still_text(opening):
    assert detect_kind(raw(opening + b"\n\nPlain notes follow.\n", "notes.txt")) == "text"


def test_pdf_content_is_read_as_pdf_whatever_its_name():
    assert detect_kind(raw(pdf_bytes(["Hello"]), "report.txt")) == "pdf"


def test_html_document_named_txt_is_html():
    page = b"<!DOCTYPE html><html><body><p>Hi</p></body></html>"
    assert detect_kind(raw(page, "saved-page.txt")) == "html"


def test_xhtml_with_xml_declaration_is_html():
    page = b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html><html><body>x</body></html>'
    assert detect_kind(raw(page)) == "html"


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("guide.md", "markdown"),
        ("GUIDE.MARKDOWN", "markdown"),
        ("prices.csv", "csv"),
        ("prices.tsv", "csv"),
        ("page.htm", "html"),
        ("notes.txt", "text"),
        ("LICENSE", "text"),
    ],
)
def test_extension_chooses_among_text_formats(filename, expected):
    assert detect_kind(raw(b"Name,Value\nalpha,1\n", filename)) == expected


def test_text_without_a_name_that_opens_with_a_heading_is_markdown():
    source = raw(b"# Release notes\n\nFixed things.\n", location="upload-without-name")
    assert detect_kind(source) == "markdown"


def test_server_declared_type_chooses_the_text_format_of_a_url():
    source = RawSource(
        location="https://example.org/export",
        origin="url",
        data=b"a,b\n1,2\n",
        declared_mime="text/csv; charset=utf-8",
    )
    assert detect_kind(source) == "csv"


def test_word_archive_is_docx_even_without_the_extension():
    document = docx_bytes(docx_paragraph("Hello"))
    assert detect_kind(raw(document, "download.bin")) == "docx"


def test_any_zip_named_docx_goes_to_the_docx_loader_for_its_limits():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("payload.bin", b"x")
    assert detect_kind(raw(buffer.getvalue(), "report.docx")) == "docx"


def test_plain_zip_archive_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.txt", b"hello")
    with pytest.raises(
        UnsupportedSourceType, match=r"binary content \(application/zip\) named \.zip"
    ):
        detect_kind(raw(buffer.getvalue(), "bundle.zip"))


def test_utf16_text_with_byte_order_mark_is_text():
    data = "\ufeffHello in UTF-16".encode("utf-16-le")
    assert detect_kind(raw(data, "notes.txt")) == "text"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_text_without_byte_order_mark_is_read_as_text(encoding):
    # Windows tools save "Unicode" text without a BOM; it must not be called binary.
    text = "Grüße aus Köln.\nRefunds are possible within 30 days.\n"
    source = raw(text.encode(encoding), "notes.txt")
    assert detect_kind(source) == "text"
    assert load_document(source, limits=IngestionLimits()).text == text


def test_utf16_html_without_byte_order_mark_is_html():
    page = "<html><body><main><p>Héllo wörld</p></main></body></html>".encode("utf-16-le")
    source = raw(page, "page.html")
    assert detect_kind(source) == "html"
    assert load_document(source, limits=IngestionLimits()).text == "Héllo wörld"


def test_binary_with_a_two_byte_rhythm_is_still_binary():
    data = b"\x07\x00\x01\x00\x02\x00\x03\x00" * 200
    with pytest.raises(UnsupportedSourceType, match="binary content"):
        detect_kind(raw(data, "table.bin"))


def test_empty_file_is_a_load_error():
    with pytest.raises(SourceLoadError, match="the file is empty"):
        detect_kind(raw(b"", "empty.txt"))
