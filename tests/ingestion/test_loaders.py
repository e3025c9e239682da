"""Load stage: each format becomes normalised, Markdown-flavoured text, or a clear error.

Here: the limits and the registry, plain text, Markdown and CSV. HTML, PDF and DOCX
have modules of their own (test_loaders_html.py, test_loaders_pdf.py,
test_loaders_docx.py).
"""

from __future__ import annotations

import datetime as dt

import pytest

from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import LOADERS
from collections_app.ingestion.loaders.base import jsonable
from collections_app.ingestion.types import SourceLoadError, SourceTooLarge, UnsupportedSourceType
from tests.support.loading import load
from tests.support.sample_files import PNG_HEADER

# --- limits and registry -------------------------------------------------------------


def test_empty_file_is_refused_with_a_clear_message():
    with pytest.raises(SourceLoadError, match="the file is empty"):
        load(b"", "empty.txt")


def test_file_over_the_size_limit_is_refused_before_parsing():
    limits = IngestionLimits(max_file_bytes=1000)
    with pytest.raises(SourceTooLarge, match=r"the file is 1\.2 KiB; the limit is 1000 bytes"):
        load("x" * 1200, "big.txt", limits=limits)


def test_binary_file_named_txt_is_refused():
    with pytest.raises(UnsupportedSourceType, match=r"binary content \(image/png\) named \.txt"):
        load(PNG_HEADER + b"\x00" * 100, "notes.txt")


def test_unknown_loader_kind_lists_the_known_ones():
    with pytest.raises(UnsupportedSourceType) as excinfo:
        LOADERS.get("spreadsheet")
    for kind in LOADERS:
        assert kind in str(excinfo.value)


# --- plain text --------------------------------------------------------------------------


def test_plain_text_is_kept_as_written_with_its_first_line_as_title():
    doc = load("Release checklist\r\n\r\nTag the release.\r\nPublish notes.\r\n", "notes.txt")
    assert doc.kind == "text"
    assert doc.title == "Release checklist"
    assert doc.text == "Release checklist\n\nTag the release.\nPublish notes.\n"


def test_invalid_utf8_names_the_offending_byte_offset():
    data = "Caf\u00e9 menu: ".encode() + b"cr\xe8me br\xfbl\xe9e"
    expected_offset = data.index(b"\xe8")
    with pytest.raises(SourceLoadError) as excinfo:
        load(data, "menu.txt")
    message = str(excinfo.value)
    assert "not valid UTF-8" in message
    assert f"offset {expected_offset}" in message
    assert "0xe8" in message


def test_utf8_byte_order_mark_is_dropped():
    doc = load(b"\xef\xbb\xbfHello there", "bom.txt")
    assert doc.text == "Hello there"


def test_utf16_with_byte_order_mark_is_decoded():
    doc = load("\ufeffGr\u00fc\u00dfe aus K\u00f6ln\n".encode("utf-16-le"), "greeting.txt")
    assert doc.text == "Gr\u00fc\u00dfe aus K\u00f6ln\n"


def test_charset_declared_by_a_web_server_is_honoured():
    doc = load(
        "Cr\u00e8me br\u00fbl\u00e9e".encode("latin-1"),
        "dessert.txt",
        mime="text/plain; charset=ISO-8859-1",
    )
    assert doc.text == "Cr\u00e8me br\u00fbl\u00e9e"


# --- Markdown ----------------------------------------------------------------------------

MARKDOWN = """---
title: Deployment guide
owner: platform team
reviewed: 2024-05-02
tags: [ops, deploy]
---
Deployment
==========

Intro paragraph.

Rollback
--------

```
not a heading
-------------
# nor this
```

###   Closed heading   ###
"""


def test_markdown_front_matter_becomes_metadata_and_title():
    doc = load(MARKDOWN, "deploy.md")
    assert doc.kind == "markdown"
    assert doc.title == "Deployment guide"
    assert doc.metadata == {
        "title": "Deployment guide",
        "owner": "platform team",
        "reviewed": "2024-05-02",
        "tags": ["ops", "deploy"],
    }
    assert "owner: platform team" not in doc.text


def test_markdown_headings_are_normalised_to_hash_lines_outside_code():
    doc = load(MARKDOWN, "deploy.md")
    lines = doc.text.split("\n")
    assert "# Deployment" in lines
    assert "## Rollback" in lines
    assert "### Closed heading" in lines
    # Code is left exactly as written.
    assert "not a heading\n-------------\n# nor this" in doc.text
    assert "==========" not in doc.text


def test_markdown_title_falls_back_to_the_first_heading():
    doc = load("Some intro.\n\n## Installing\n\nRun the installer.\n", "install.md")
    assert doc.title == "Installing"


# 7 levels of nested aliases: a few hundred bytes that expand to 9**7 strings.
ALIAS_BOMB = (
    "---\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdef", "bcdefg", strict=True)
    )
    + "---\n# Harmless title\n\nBody text.\n"
)


def test_markdown_front_matter_with_yaml_aliases_is_refused_with_a_clear_error():
    assert len(ALIAS_BOMB) < 600
    with pytest.raises(SourceLoadError, match=r"front matter uses a YAML alias \(\*a, line 3\)"):
        load(ALIAS_BOMB, "bomb.md")


def test_metadata_over_the_size_limit_fails_the_source():
    page = "---\ntitle: Notes\nsummary: " + "word " * 20_000 + "\n---\n# Notes\n"
    with pytest.raises(SourceTooLarge, match=r"metadata is larger than the limit of 64\.0 KiB"):
        load(page, "notes.md")
    small = IngestionLimits(max_metadata_bytes=100)
    html = '<html><head><meta name="description" content="' + "d" * 200 + '"></head>'
    with pytest.raises(SourceTooLarge, match=r"metadata is 2\d\d bytes as JSON; the limit is 100"):
        load(html + "<body><p>Text.</p></body></html>", "page.html", limits=small)


def test_shared_structures_are_bounded_while_converted_not_after():
    level = ["lol"] * 9
    for _ in range(8):
        level = [level] * 9  # 9**9 strings by reference: 387 million when expanded
    with pytest.raises(SourceTooLarge):
        jsonable({"bomb": level}, max_chars=64 * 1024)
    assert jsonable({"when": dt.date(2024, 1, 2), "tags": ("a", "b")}, max_chars=100) == {
        "when": "2024-01-02",
        "tags": ["a", "b"],
    }


def test_markdown_with_broken_front_matter_keeps_the_text_and_warns():
    source = "---\ntitle: [unclosed\n---\n# Notes\n\nBody text.\n"
    doc = load(source, "notes.md")
    assert "Body text." in doc.text
    assert doc.metadata == {}
    assert any("front matter is not valid YAML" in w for w in doc.warnings)


# --- CSV -----------------------------------------------------------------------------


def test_csv_rows_become_records_with_their_headers():
    doc = load(
        'Product,Price,Notes\nBasic plan,10,"monthly, cancel anytime"\nPro plan,25,\n', "prices.csv"
    )
    assert doc.kind == "csv"
    assert doc.text.split("\n\n") == [
        "Product: Basic plan; Price: 10; Notes: monthly, cancel anytime",
        "Product: Pro plan; Price: 25",
    ]
    assert doc.metadata["columns"] == ["Product", "Price", "Notes"]
    assert doc.metadata["row_count"] == 2


def test_csv_dialect_is_sniffed():
    doc = load("City;Office code\nGhent;GNT\nLyon;LYS\n", "offices.csv")
    assert doc.text == "City: Ghent; Office code: GNT\n\nCity: Lyon; Office code: LYS"
    assert doc.metadata["delimiter"] == ";"


def test_csv_without_a_header_row_is_refused():
    with pytest.raises(SourceLoadError, match="header row"):
        load("2024-01-01,12.5\n2024-01-02,13.0\n", "readings.csv")


def test_csv_with_an_unnamed_column_is_refused():
    with pytest.raises(SourceLoadError, match=r"column\(s\) 2"):
        load("Name,,Team\nAda,x,core\n", "people.csv")
