"""Builders for the files the ingestion tests feed in: PDFs, DOCX archives, zip bombs.

Everything is generated in the test run, so each test shows exactly what it reads.
"""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape

import pypdf
from fpdf import FPDF

PNG_HEADER = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
)
ELF_HEADER = (
    b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x02\x00\x3e\x00\x01\x00\x00\x00" + b"\x00" * 40
)


def pdf_bytes(pages: list[str | None], *, title: str = "") -> bytes:
    """A PDF with one page per entry; ``None`` makes a page with no text layer at all."""
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text is None:
            # A drawn shape stands in for a scanned image: marks on the page, no text.
            pdf.rect(20, 20, 100, 60, style="F")
            continue
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def encrypted_pdf(
    plain: bytes, *, user_password: str, owner_password: str = "owner", algorithm: str = "AES-256"
) -> bytes:
    """``plain`` re-written with pypdf's standard encryption."""
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(plain)))
    writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


_W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" ContentType="application/'
    'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)


def _run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r>'


def docx_paragraph(text: str, *, style: str = "", numbered: bool = False) -> str:
    properties = ""
    if style or numbered:
        style_xml = f'<w:pStyle w:val="{style}"/>' if style else ""
        numbering = '<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>' if numbered else ""
        properties = f"<w:pPr>{style_xml}{numbering}</w:pPr>"
    return f"<w:p>{properties}{_run(text)}</w:p>"


def docx_table(rows: list[list[str]]) -> str:
    cells = "".join(
        "<w:tr>" + "".join(f"<w:tc>{docx_paragraph(cell)}</w:tc>" for cell in row) + "</w:tr>"
        for row in rows
    )
    return f"<w:tbl>{cells}</w:tbl>"


def docx_bytes(body_xml: str, *, title: str = "") -> bytes:
    """A minimal but valid Word document whose body is ``body_xml``."""
    document = (
        f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{_W_NS}">'
        f"<w:body>{body_xml}</w:body></w:document>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("word/document.xml", document)
        if title:
            archive.writestr(
                "docProps/core.xml",
                '<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://'
                'schemas.openxmlformats.org/package/2006/metadata/core-properties" '
                f'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{escape(title)}</dc:title>'
                "</cp:coreProperties>",
            )
    return buffer.getvalue()


def zip_bomb(inflated_bytes: int, *, member: str = "word/document.xml") -> bytes:
    """A small zip whose single member inflates to ``inflated_bytes`` of zeros."""
    buffer = io.BytesIO()
    block = b"\x00" * (1024 * 1024)
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open(member, "w", force_zip64=True) as handle,
    ):
        for _ in range(inflated_bytes // len(block)):
            handle.write(block)
        handle.write(b"\x00" * (inflated_bytes % len(block)))
    return buffer.getvalue()
