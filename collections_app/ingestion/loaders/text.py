"""Loaders for text formats: plain text, Markdown and CSV."""

from __future__ import annotations

import csv
import io
from pathlib import PurePosixPath
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler
from markdown_it import MarkdownIt

from ..detect import MIME_BY_KIND, name_hint
from ..limits import IngestionLimits
from ..types import LoadedDocument, RawSource, SourceLoadError
from .base import LOADERS, decode_text, jsonable

_TITLE_CHARS = 200
_CSV_SAMPLE_CHARS = 64 * 1024
_CSV_DELIMITERS = ",;\t|"


class AliasRefused(yaml.YAMLError):
    """Front matter used a YAML alias (``*name``)."""

    def __init__(self, anchor: str, line: int) -> None:
        super().__init__(f"YAML alias *{anchor} on line {line}")
        self.anchor = anchor
        self.line = line


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases: nested aliases expand exponentially (a
    417-byte "billion laughs" became 80 MB of metadata)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise AliasRefused(str(event.anchor), event.start_mark.line + 1)
        return super().compose_node(parent, index)


class _FrontMatterYAML(YAMLHandler):
    def load(self, fm: str, **kwargs: object) -> Any:
        # A SafeLoader subclass: no Python objects, and no aliases either.
        return yaml.load(fm, Loader=_NoAliasLoader)


_FRONT_MATTER = _FrontMatterYAML()


@LOADERS.register("text")
def load_text(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """Plain text, kept as written; the title is its first non-empty line."""
    text = decode_text(raw)
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return LoadedDocument(
        text=text,
        kind="text",
        mime=MIME_BY_KIND["text"],
        title=first_line[:_TITLE_CHARS],
    )


@LOADERS.register("markdown")
def load_markdown(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """Markdown: YAML front matter becomes metadata; headings are rewritten as ``#`` lines.

    Setext headings (underlined with ``===``/``---``) and indented or closed ATX headings
    are normalised so every chunker finds headings the same way.
    """
    source = decode_text(raw)
    warnings: list[str] = []
    metadata: dict[str, object] = {}
    body = source
    try:
        post = frontmatter.loads(source, handler=_FRONT_MATTER)
    except AliasRefused as exc:
        raise SourceLoadError(
            f"the front matter uses a YAML alias (*{exc.anchor}, line {exc.line}); aliases "
            "are not accepted in front matter, because they can expand to a huge amount of "
            "metadata: write the values out"
        ) from exc
    except yaml.YAMLError as exc:
        # Keep the whole file as text: losing content over a typo in metadata is worse.
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        warnings.append(f"the front matter is not valid YAML{where}; it was kept as text")
    else:
        metadata = jsonable(dict(post.metadata), max_chars=limits.max_metadata_bytes)
        body = post.content

    text, headings = _normalise_headings(body)
    title = metadata.get("title")
    if not isinstance(title, str) or not title.strip():
        title = headings[0] if headings else ""
    return LoadedDocument(
        text=text,
        kind="markdown",
        mime=MIME_BY_KIND["markdown"],
        title=title.strip()[:_TITLE_CHARS],
        metadata=metadata,
        warnings=warnings,
    )


def _normalise_headings(markdown: str) -> tuple[str, list[str]]:
    """Rewrite every heading as ``#… text`` on one line; return the text and the headings."""
    lines = markdown.split("\n")
    tokens = MarkdownIt("commonmark").parse(markdown)
    headings: list[str] = []
    replacements: list[tuple[int, int, str]] = []
    for index, token in enumerate(tokens):
        # Headings nested in quotes or lists keep their markers; only top-level ones move.
        if token.type != "heading_open" or token.map is None or token.level != 0:
            continue
        content = " ".join(tokens[index + 1].content.split())
        level = int(token.tag[1])
        headings.append(content)
        replacements.append((token.map[0], token.map[1], f"{'#' * level} {content}".rstrip()))
    # Replace from the bottom so earlier line numbers stay valid.
    for start, end, line in reversed(replacements):
        lines[start:end] = [line]
    return "\n".join(lines), headings


@LOADERS.register("csv")
def load_csv(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """CSV: each row becomes one paragraph ``Col: value; Col: value``.

    The dialect is sniffed; the first row must name the columns, because a record is
    only understandable with its headers.
    """
    text = decode_text(raw)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            text[:_CSV_SAMPLE_CHARS], delimiters=_CSV_DELIMITERS
        )
    except csv.Error:
        dialect = csv.excel_tab if name_hint(raw).lower().endswith(".tsv") else csv.excel
    try:
        rows = [
            row for row in csv.reader(io.StringIO(text), dialect) if any(c.strip() for c in row)
        ]
    except csv.Error as exc:
        raise SourceLoadError(f"the CSV could not be parsed: {exc}") from exc
    if not rows:
        return LoadedDocument(text="", kind="csv", mime=MIME_BY_KIND["csv"])

    header = [cell.strip() for cell in rows[0]]
    _check_header(header)
    records: list[str] = []
    warnings: list[str] = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) > len(header):
            warnings.append(f"row {number} has {len(row)} cells but the header has {len(header)}")
        names = header + [f"column {i}" for i in range(len(header) + 1, len(row) + 1)]
        fields = [
            f"{name}: {' '.join(value.split())}"
            for name, value in zip(names, row, strict=False)
            if value.strip()
        ]
        if fields:
            records.append("; ".join(fields))
    return LoadedDocument(
        text="\n\n".join(records),
        kind="csv",
        mime=MIME_BY_KIND["csv"],
        title=PurePosixPath(name_hint(raw)).stem,
        metadata={
            "columns": header,
            "row_count": len(records),
            "delimiter": getattr(dialect, "delimiter", ","),
        },
        warnings=warnings[:20],
    )


def _check_header(header: list[str]) -> None:
    """The first row must look like column names, not like a data row."""
    empty = [str(i) for i, name in enumerate(header, start=1) if not name]
    if empty:
        raise SourceLoadError(
            f"the CSV needs a header row naming every column; column(s) {', '.join(empty)} "
            "of the first row are empty"
        )
    numeric = [name for name in header if _is_number(name)]
    if numeric:
        raise SourceLoadError(
            "the CSV needs a header row naming the columns; the first row looks like data "
            f"({numeric[0]!r} is a number)"
        )


def _is_number(value: str) -> bool:
    try:
        float(value.replace(",", ""))
    except ValueError:
        return False
    return True
