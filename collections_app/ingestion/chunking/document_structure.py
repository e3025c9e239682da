"""The structure chunkers work from: blocks, headings and pages of a LoadedDocument.

Loaders hand over Markdown-flavoured text (headings as ``#`` lines, lists, ``|``
tables, fenced code), so one Markdown parser finds the structure of every kind
of source. Only block-level parsing runs: inline parsing (emphasis, links) is
most of markdown-it's cost and chunkers never need it, except for heading
titles, which are few.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from collections_app.ingestion.types import LoadedDocument

# Block-level parsing only; tables are a GFM extension CommonMark lacks.
_BLOCK_PARSER = MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])
_INLINE_PARSER = MarkdownIt("commonmark")
# markdown-it counts lines after normalising \r\n and \r to \n; so must we.
_NEWLINE = re.compile(r"\r\n|\r|\n")

# Top-level token types → block kinds. Anything else with a source map
# (a future plugin's block) is treated as a paragraph.
_KIND_BY_TOKEN = {
    "heading_open": "heading",
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "blockquote",
    "table_open": "table",
    "fence": "code",
    "code_block": "code",
    "html_block": "html",
    "hr": "hr",
}

# Blocks that structural chunking never splits while they fit the budget.
ATOMIC_KINDS = frozenset({"table", "code", "list"})


@dataclass(frozen=True)
class Block:
    """One top-level Markdown block: characters [start, end) of the text, stripped."""

    kind: str
    start: int
    end: int
    level: int = 0  # heading level 1-6; 0 for other blocks
    # Top-level items of a list, as stripped (start, end) spans.
    items: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Segment:
    """Characters [start, end) that come from one page (or the whole text without pages)."""

    start: int
    end: int
    page: int | None
    blocks: list[Block] = field(default_factory=list)


@dataclass
class DocumentStructure:
    """Blocks grouped by page, and the heading path in force at any offset."""

    text: str
    segments: list[Segment]
    heading_starts: list[int]
    heading_paths: list[tuple[str, ...]]

    @classmethod
    def parse(cls, doc: LoadedDocument) -> DocumentStructure:
        """Find the blocks, headings and page segments of ``doc.text``."""
        text = doc.text
        blocks = _parse_blocks(text)
        heading_starts: list[int] = []
        heading_paths: list[tuple[str, ...]] = []
        stack: list[tuple[int, str]] = []
        for block in blocks:
            if block.kind != "heading":
                continue
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, _heading_title(text[block.start : block.end])))
            heading_starts.append(block.start)
            heading_paths.append(tuple(title for _, title in stack if title))
        return cls(
            text=text,
            segments=_segments(text, blocks, doc),
            heading_starts=heading_starts,
            heading_paths=heading_paths,
        )

    def section_path_at(self, pos: int) -> list[str]:
        """Titles of the headings in force at character ``pos`` (outermost first)."""
        index = bisect_right(self.heading_starts, pos) - 1
        return list(self.heading_paths[index]) if index >= 0 else []


def strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Narrow [start, end) so that it neither starts nor ends with whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The non-blank lines of text[start:end], each stripped."""
    spans = []
    pos = start
    for match in _NEWLINE.finditer(text, start, end):
        s, e = strip_span(text, pos, match.start())
        if e > s:
            spans.append((s, e))
        pos = match.end()
    s, e = strip_span(text, pos, end)
    if e > s:
        spans.append((s, e))
    return spans


def _parse_blocks(text: str) -> list[Block]:
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def span(line_map: list[int]) -> tuple[int, int]:
        first, last = line_map
        end = line_starts[last] if last < len(line_starts) else len(text)
        return strip_span(text, line_starts[first], end)

    blocks: list[Block] = []
    items: list[tuple[int, int]] = []
    for token in _BLOCK_PARSER.parse(text):
        if token.map is None or token.nesting < 0:
            continue
        if token.level == 1 and token.type == "list_item_open" and blocks:
            s, e = span(token.map)
            if e > s:
                items.append((s, e))
            continue
        if token.level != 0:
            continue
        if items:
            blocks[-1] = _with_items(blocks[-1], items)
            items = []
        s, e = span(token.map)
        if e <= s:
            continue
        kind = _KIND_BY_TOKEN.get(token.type, "paragraph")
        # Only ATX headings count as headings (loaders write ``#`` lines); a
        # setext underline in plain text is more often decoration than a title.
        if kind == "heading" and not token.markup.startswith("#"):
            kind = "paragraph"
        level = int(token.tag[1]) if kind == "heading" else 0
        blocks.append(Block(kind=kind, start=s, end=e, level=level))
    if items:
        blocks[-1] = _with_items(blocks[-1], items)
    return _fill_gaps(text, blocks)


def _with_items(block: Block, items: list[tuple[int, int]]) -> Block:
    if block.kind != "list":
        return block
    inside = tuple((s, e) for s, e in items if block.start <= s and e <= block.end)
    return Block(kind=block.kind, start=block.start, end=block.end, items=inside)


def _fill_gaps(text: str, blocks: list[Block]) -> list[Block]:
    """Text the parser left out of every block (link definitions, ...) becomes paragraphs."""
    filled: list[Block] = []
    pos = 0
    for block in sorted(blocks, key=lambda b: b.start):
        if block.start < pos:  # defensive: never let two blocks overlap
            continue
        s, e = strip_span(text, pos, block.start)
        if e > s:
            filled.append(Block(kind="paragraph", start=s, end=e))
        filled.append(block)
        pos = block.end
    s, e = strip_span(text, pos, len(text))
    if e > s:
        filled.append(Block(kind="paragraph", start=s, end=e))
    return filled


def _heading_title(line: str) -> str:
    """Plain text of a heading line: markers, closing #s and inline markup removed."""
    content = line.strip().lstrip("#").strip()
    content = re.sub(r"\s+#+$", "", content)
    if not any(ch in content for ch in "*_`[<\\&"):
        return content
    parts: list[str] = []
    for token in _INLINE_PARSER.parseInline(content):
        for child in token.children or []:
            if child.type in ("text", "code_inline"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
    return " ".join("".join(parts).split())


def _segments(text: str, blocks: list[Block], doc: LoadedDocument) -> list[Segment]:
    """Split the text at page starts; blocks crossing a page boundary are cut there."""
    pages = sorted(doc.pages, key=lambda p: p.char_start)
    bounds: list[tuple[int, int | None]] = []  # (segment start, page number)
    for page in pages:
        start = 0 if not bounds else max(page.char_start, 0)
        if bounds and start <= bounds[-1][0]:
            continue
        bounds.append((start, page.number))
    if not bounds:
        bounds = [(0, None)]
    starts = [s for s, _ in bounds]
    ends = [*starts[1:], len(text)]
    per_segment: list[list[Block]] = [[] for _ in bounds]
    for block in blocks:
        first = bisect_right(starts, block.start) - 1
        for index in range(max(first, 0), len(bounds)):
            if starts[index] >= block.end:
                break
            clipped = _clip(text, block, starts[index], ends[index])
            if clipped is not None:
                per_segment[index].append(clipped)
    return [
        Segment(start=s, end=e, page=page, blocks=segment_blocks)
        for (s, page), e, segment_blocks in zip(bounds, ends, per_segment, strict=True)
    ]


def _clip(text: str, block: Block, start: int, end: int) -> Block | None:
    if start <= block.start and block.end <= end:
        return block
    s, e = strip_span(text, max(block.start, start), min(block.end, end))
    if e <= s:
        return None
    items = tuple(
        span
        for a, b in block.items
        if (span := strip_span(text, max(a, s), min(b, e)))[1] > span[0]
    )
    return Block(kind=block.kind, start=s, end=e, level=block.level, items=items)
