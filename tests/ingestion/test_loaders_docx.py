"""Load stage, DOCX: structure as Markdown, and what is not a readable DOCX refused.

Zip bombs, damaged archives, files that are not zip archives and old Word documents
under a .docx name each get a clear error.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.types import SourceLoadError, SourceTooLarge
from tests.support.loading import load
from tests.support.sample_files import docx_bytes, docx_paragraph, docx_table, zip_bomb


def test_docx_headings_paragraphs_lists_and_tables():
    body = "".join(
        [
            docx_paragraph("Quarterly report", style="Title"),
            docx_paragraph("Revenue grew by 12%."),
            docx_paragraph("Highlights", style="Heading2"),
            docx_paragraph("New office in Lyon", numbered=True),
            docx_paragraph("Two hires", numbered=True),
            docx_table([["Region", "Revenue"], ["EMEA", "1.2 M"]]),
        ]
    )
    doc = load(docx_bytes(body, title="Q3 report"), "report.docx")
    assert doc.kind == "docx"
    assert doc.title == "Q3 report"
    assert doc.text == (
        "# Quarterly report\n\nRevenue grew by 12%.\n\n## Highlights\n\n"
        "- New office in Lyon\n- Two hires\n\n| Region | Revenue |\n| EMEA | 1.2 M |"
    )


def test_zip_bomb_renamed_docx_is_refused_by_its_declared_size():
    limits = IngestionLimits(max_decompressed_bytes=4 * 1024 * 1024)
    bomb = zip_bomb(6 * 1024 * 1024)
    assert len(bomb) < 64 * 1024
    with pytest.raises(
        SourceTooLarge, match=r"decompressed size 6\.0 MiB exceeds the limit of 4\.0 MiB"
    ):
        load(bomb, "invoice.docx", limits=limits)


def test_zip_bomb_is_refused_by_its_compression_ratio_under_default_limits():
    with pytest.raises(SourceTooLarge, match=r"times the compressed size.*limit of 100"):
        load(zip_bomb(3 * 1024 * 1024), "invoice.docx")


def test_zip_named_docx_without_a_document_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("photos/cat.jpg", b"not really a cat")
    with pytest.raises(SourceLoadError, match=r"not a valid DOCX file: .* not a Word document"):
        load(buffer.getvalue(), "album.docx")


def test_corrupt_docx_is_a_clear_load_error():
    data = docx_bytes(docx_paragraph("Hello"))
    with pytest.raises(SourceLoadError, match="not a valid DOCX file: its zip archive is damaged"):
        load(data[: len(data) // 2], "broken.docx")


@pytest.mark.parametrize(
    "data",
    [
        # What a damaged header looks like to text detection: a UTF-32 byte-order mark.
        b"\xff\xfe\x00\x00" + bytes(range(256)) * 4,
        bytes(range(256)) * 4,
        b"Meeting notes, saved as plain text under a .docx name.\n",
    ],
    ids=["utf32-mark", "binary", "text"],
)
def test_a_docx_that_is_not_a_zip_archive_is_called_not_a_valid_docx(data):
    with pytest.raises(SourceLoadError) as excinfo:
        load(data, "minutes.docx")
    message = str(excinfo.value)
    assert message.startswith("not a valid DOCX file: a DOCX is a zip archive")
    assert "utf" not in message.lower()


def test_an_old_word_document_named_docx_says_how_to_fix_it():
    ole2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    with pytest.raises(SourceLoadError, match=r"old-format \(\.doc\) or password-protected"):
        load(ole2, "minutes.docx")
