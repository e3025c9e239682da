"""Load stage, PDF: pages with their character ranges, titles, and clear errors.

Pages without a text layer, password protection, truncation and the page limit.
"""

from __future__ import annotations

import pytest

from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.types import SourceLoadError, SourceTooLarge
from tests.support.loading import load
from tests.support.sample_files import encrypted_pdf, pdf_bytes


def test_pdf_pages_are_kept_with_their_character_ranges():
    data = pdf_bytes(["Apples grow on trees.", "Bananas grow in bunches."], title="Fruit")
    doc = load(data, "fruit.pdf")
    assert doc.kind == "pdf"
    assert doc.title == "Fruit"
    assert [page.number for page in doc.pages] == [1, 2]
    first, second = doc.pages
    assert doc.text[first.char_start : first.char_end] == "Apples grow on trees."
    assert doc.text[second.char_start : second.char_end] == "Bananas grow in bunches."
    assert doc.warnings == []


@pytest.mark.parametrize("title", ["", "untitled", "Untitled 1", "Document1"])
def test_a_pdf_without_a_real_title_is_named_after_its_file(title):
    doc = load(pdf_bytes(["Quarterly figures."], title=title), "q3-figures.pdf")
    assert doc.title == "q3-figures"


def test_a_pdf_title_that_merely_starts_like_a_placeholder_is_kept():
    doc = load(pdf_bytes(["Essay."], title="Untitled thoughts on tides"), "essay.pdf")
    assert doc.title == "Untitled thoughts on tides"


def test_pdf_page_without_text_layer_is_flagged():
    doc = load(pdf_bytes(["Page one text.", None, "Page three text."]), "scan.pdf")
    assert [page.has_text for page in doc.pages] == [True, False, True]
    assert doc.warnings == ["page 2 has no text layer (no OCR available)"]
    third = doc.pages[2]
    assert doc.text[third.char_start : third.char_end] == "Page three text."


ALGORITHMS = ["RC4-128", "AES-128", "AES-256"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_password_protected_pdf_is_refused(algorithm):
    data = encrypted_pdf(
        pdf_bytes(["Secret salaries."]), user_password="hunter2", algorithm=algorithm
    )
    with pytest.raises(SourceLoadError, match="the PDF is password-protected"):
        load(data, "salaries.pdf")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_pdf_encrypted_only_against_editing_is_read(algorithm):
    data = encrypted_pdf(pdf_bytes(["Public price list."]), user_password="", algorithm=algorithm)
    assert load(data, "prices.pdf").text == "Public price list."


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9])
def test_truncated_pdf_is_a_clear_load_error(keep):
    data = pdf_bytes(["First page.", "Second page.", "Third page."])
    with pytest.raises(SourceLoadError, match="the PDF is truncated or corrupt"):
        load(data[: int(len(data) * keep)], "cut.pdf")


def test_pdf_with_more_pages_than_allowed_is_refused():
    limits = IngestionLimits(max_pdf_pages=2)
    with pytest.raises(SourceTooLarge, match="the PDF has 3 pages; the limit is 2"):
        load(pdf_bytes(["a", "b", "c"]), "long.pdf", limits=limits)
