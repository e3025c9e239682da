"""DOCX loader: paragraphs, headings, list items and tables from ``word/document.xml``.

A DOCX file is a zip archive, so it can be a zip bomb: the declared sizes in the
archive's directory are checked against the limits before a single member is inflated,
and members are read with a bounded reader in case those sizes lie.
"""

from __future__ import annotations

import io
import re
import zipfile

from lxml import etree

from ..detect import MIME_BY_KIND
from ..limits import IngestionLimits
from ..types import LoadedDocument, RawSource, SourceLoadError, SourceTooLarge
from .base import LOADERS, format_bytes, squeeze_blank_lines

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_NS = {
    "w": _W,
    "dc": "http://purl.org/dc/elements/1.1/",
    "cp": "http://schemas.openxmlformats.org/package/2006/metadata/core-properties",
}
_MAX_MEMBERS = 10_000
# Below this, a high compression ratio is harmless (e.g. a page of repeated spaces).
_RATIO_FLOOR_BYTES = 1024 * 1024
_HEADING_NAME = re.compile(r"^(?:heading|überschrift|titre|título|titolo|kop)\s*(\d)$", re.I)
# No network, no entity expansion, no huge trees: the XML is untrusted.
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)


def check_archive_limits(archive: zipfile.ZipFile, limits: IngestionLimits) -> int:
    """Refuse an archive whose declared contents exceed the limits; return their total size."""
    members = archive.infolist()
    if len(members) > _MAX_MEMBERS:
        raise SourceTooLarge(f"the archive has {len(members)} members; the limit is {_MAX_MEMBERS}")
    total = sum(member.file_size for member in members)
    compressed = sum(member.compress_size for member in members)
    if total > limits.max_decompressed_bytes:
        raise SourceTooLarge(
            f"decompressed size {format_bytes(total)} exceeds the limit of "
            f"{format_bytes(limits.max_decompressed_bytes)} (zip bomb?)"
        )
    ratio = total / max(compressed, 1)
    if total > _RATIO_FLOOR_BYTES and ratio > limits.max_compression_ratio:
        raise SourceTooLarge(
            f"decompressed size {format_bytes(total)} is {ratio:.0f} times the compressed size, "
            f"which exceeds the limit of {limits.max_compression_ratio} (zip bomb?)"
        )
    return total


def read_member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """Read one member, never inflating more than ``limit`` bytes whatever its header says."""
    with archive.open(name) as member:
        data = member.read(limit + 1)
    if len(data) > limit:
        raise SourceTooLarge(
            f"decompressed size of {name} exceeds the limit of {format_bytes(limit)} (zip bomb?)"
        )
    return data


@LOADERS.register("docx")
def load_docx(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """Word document text, with headings as ``#`` lines and tables as ``|`` rows."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw.data)) as archive:
            total = check_archive_limits(archive, limits)
            names = set(archive.namelist())
            if "word/document.xml" not in names:
                raise SourceLoadError(
                    "not a valid DOCX file: it is a zip archive but not a Word document "
                    "(no word/document.xml)"
                )
            budget = limits.max_decompressed_bytes
            document = _parse(
                read_member(archive, "word/document.xml", budget), "word/document.xml"
            )
            styles = (
                _parse(read_member(archive, "word/styles.xml", budget), "word/styles.xml")
                if "word/styles.xml" in names
                else None
            )
            core = (
                _parse(read_member(archive, "docProps/core.xml", budget), "docProps/core.xml")
                if "docProps/core.xml" in names
                else None
            )
    except zipfile.BadZipFile as exc:
        raise SourceLoadError(
            f"not a valid DOCX file: its zip archive is damaged or truncated ({exc})"
        ) from exc
    except (zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
        # Unsupported compression, encrypted members, bad CRC, truncated data.
        raise SourceLoadError(f"not a valid DOCX file: it could not be read ({exc})") from exc

    heading_styles = _heading_styles(styles)
    blocks: list[str] = []
    headings: list[str] = []
    for element in _body_elements(document):
        if element.tag == f"{{{_W}}}p":
            text, level, is_list = _paragraph(element, heading_styles)
            if not text:
                continue
            if level:
                headings.append(text)
                blocks.append(f"{'#' * level} {text}")
            else:
                blocks.append(f"- {text}" if is_list else text)
        elif element.tag == f"{{{_W}}}tbl":
            table = _table(element, heading_styles)
            if table:
                blocks.append(table)

    title, metadata = _core_properties(core)
    return LoadedDocument(
        text=squeeze_blank_lines("\n\n".join(_join_lists(blocks))),
        kind="docx",
        mime=MIME_BY_KIND["docx"],
        title=title or (headings[0] if headings else ""),
        metadata=metadata,
        decompressed_bytes=total,
    )


def _body_elements(document: etree._Element) -> list[etree._Element]:
    """Top-level paragraphs and tables, looking inside content controls (``w:sdt``)."""
    body = document.find("w:body", _NS)
    elements: list[etree._Element] = []
    pending = list(body) if body is not None else []
    while pending:
        element = pending.pop(0)
        if element.tag == f"{{{_W}}}sdt":
            content = element.find("w:sdtContent", _NS)
            pending[:0] = list(content) if content is not None else []
        else:
            elements.append(element)
    return elements


def _parse(data: bytes, name: str) -> etree._Element:
    try:
        return etree.fromstring(data, parser=_PARSER)
    except etree.XMLSyntaxError as exc:
        raise SourceLoadError(
            f"not a valid DOCX file: {name} is not well-formed XML ({exc})"
        ) from exc


def _heading_styles(styles: etree._Element | None) -> dict[str, int]:
    """Map style ids to heading levels, by the style's name (ids are localised)."""
    levels: dict[str, int] = {"Title": 1}
    levels.update({f"Heading{n}": n for n in range(1, 10)})
    if styles is None:
        return levels
    for style in styles.iterfind("w:style", _NS):
        style_id = style.get(f"{{{_W}}}styleId")
        name = style.find("w:name", _NS)
        if style_id is None or name is None:
            continue
        label = (name.get(f"{{{_W}}}val") or "").strip()
        match = _HEADING_NAME.match(label)
        if match:
            levels[style_id] = min(int(match.group(1)), 6)
        elif label.lower() == "title":
            levels[style_id] = 1
    return levels


def _paragraph(paragraph: etree._Element, heading_styles: dict[str, int]) -> tuple[str, int, bool]:
    """Text of a paragraph, its heading level (0 = body text) and whether it is a list item."""
    parts: list[str] = []
    for node in paragraph.iter(f"{{{_W}}}t", f"{{{_W}}}tab", f"{{{_W}}}br", f"{{{_W}}}cr"):
        if node.tag == f"{{{_W}}}t":
            parts.append(node.text or "")
        elif node.tag == f"{{{_W}}}tab":
            parts.append("\t")
        else:
            parts.append("\n")
    text = "\n".join(" ".join(line.split()) for line in "".join(parts).split("\n")).strip()
    properties = paragraph.find("w:pPr", _NS)
    level = 0
    is_list = False
    if properties is not None:
        style = properties.find("w:pStyle", _NS)
        if style is not None:
            level = heading_styles.get(style.get(f"{{{_W}}}val") or "", 0)
        outline = properties.find("w:outlineLvl", _NS)
        if not level and outline is not None and (outline.get(f"{{{_W}}}val") or "").isdigit():
            level = min(int(outline.get(f"{{{_W}}}val") or 0) + 1, 6)
        is_list = properties.find("w:numPr", _NS) is not None
    if level:
        text = " ".join(text.split())
    return text, level, is_list


def _table(table: etree._Element, heading_styles: dict[str, int]) -> str:
    lines: list[str] = []
    for row in table.iterfind("w:tr", _NS):
        cells = []
        for cell in row.iterfind("w:tc", _NS):
            texts = [_paragraph(p, heading_styles)[0] for p in cell.iterfind(".//w:p", _NS)]
            cells.append(" ".join(" ".join(texts).split()).replace("|", "\\|"))
        if any(cells):
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _join_lists(blocks: list[str]) -> list[str]:
    """Consecutive list items form one block, as in Markdown."""
    joined: list[str] = []
    for block in blocks:
        if block.startswith("- ") and joined and joined[-1].startswith("- "):
            joined[-1] += "\n" + block
        else:
            joined.append(block)
    return joined


def _core_properties(core: etree._Element | None) -> tuple[str, dict[str, object]]:
    if core is None:
        return "", {}
    title = " ".join((core.findtext("dc:title", default="", namespaces=_NS) or "").split())
    metadata: dict[str, object] = {}
    creator = " ".join((core.findtext("dc:creator", default="", namespaces=_NS) or "").split())
    if creator:
        metadata["author"] = creator
    return title[:200], metadata
