"""HTML loader: the main content of a page as Markdown-flavoured text.

Navigation, headers, footers, sidebars, forms, scripts and hidden elements are dropped;
headings become ``#`` lines, lists ``-`` items, tables ``|`` rows and ``<pre>`` blocks
fenced code, so the chunkers see the page's structure.

The tree is built and walked with lxml directly: BeautifulSoup over the same parser
took 50 ms per page of the PostgreSQL manual against 1 ms for lxml alone, which made
parsing cost as much as embedding the text.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

from lxml import etree

from ..detect import MIME_BY_KIND, text_encoding
from ..limits import IngestionLimits
from ..types import LoadedDocument, RawSource, SourceLoadError
from .base import LOADERS, declared_charset, squeeze_blank_lines
from .html_hidden import (
    Element,
    apply_hiding_rules,
    drop_tree,
    remove_hidden,
    style_context,
)

# Never part of the readable content, and never worth keeping as hidden text either.
_NEVER_CONTENT = {"script", "style", "noscript", "template", "iframe", "object", "embed"}
_BOILERPLATE = {"nav", "aside", "form", "button", "select", "input", "textarea", "svg", "canvas"}
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "body", "center", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "header",
    "hgroup", "hr", "html", "legend", "li", "main", "nav", "ol", "p", "pre", "section",
    "summary", "table", "ul", "caption", "tbody", "thead", "tfoot", "tr", "td", "th",
    *_HEADINGS,
}  # fmt: skip
_INLINE_CODE = {"code", "kbd", "samp", "tt"}
_LANGUAGE = re.compile(r"(?:language|lang|highlight)-([\w+#-]+)")
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w:.-]+)", re.I)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
# Marks a <br> while whitespace is collapsed; becomes a newline afterwards.
_BREAK = "\u2028"
_SPACES = re.compile(r"[ \t\n\r\f\v]+")
# Past this nesting depth an element is flattened to its text: hostile pages nest deeply.
_MAX_DEPTH = 120
# Plain lxml elements: lxml.html's element classes cost a Python call per element.
# huge_tree raises libxml2's nesting limit from 256 to 2048 elements; deeper content is
# dropped by the parser (only hostile pages nest that deep).
_PARSER = etree.HTMLParser(huge_tree=True, remove_pis=True, no_network=True)
_PARSER_MAX_DEPTH = 2048
_EXCESSIVE_DEPTH = "Excessive depth"  # libxml2's message when it stops descending
_FIND_MAIN = etree.XPath("(//main | //*[@role='main'])[1]")
_WITH_ROLE = etree.XPath(".//*[@role]")


@LOADERS.register("html")
def load_html(raw: RawSource, *, limits: IngestionLimits) -> LoadedDocument:
    """Main content of an HTML page; hidden elements and comments go to ``hidden_texts``."""
    markup, warnings = _decode(raw)
    document = etree.fromstring(markup, _PARSER) if markup.strip() else None
    too_deep = any(_EXCESSIVE_DEPTH in entry.message for entry in _PARSER.error_log)
    if document is None:
        # Nothing but whitespace: nothing to read; the validator says so.
        return LoadedDocument(text="", kind="html", mime=MIME_BY_KIND["html"], warnings=warnings)

    hidden_texts = _remove_comments(document)
    context = style_context(document)
    apply_hiding_rules(document, context)
    _drop(document.iter(*_NEVER_CONTENT))
    title = " ".join((document.findtext(".//title") or "").split())
    metadata: dict[str, object] = {}
    if document.get("lang"):
        metadata["lang"] = document.get("lang")
    description = document.find(".//meta[@name='description']")
    if description is not None and description.get("content"):
        metadata["description"] = " ".join((description.get("content") or "").split())

    root = _main_content(document)
    hidden = remove_hidden(root, context)
    hidden_texts.extend(text for _reason, text in hidden)
    if hidden:
        metadata["hidden_elements"] = len(hidden)
    _drop_boilerplate(root)

    text = squeeze_blank_lines("\n\n".join(_Converter().blocks(root, 0)))
    if too_deep:
        if not text.strip():
            # Otherwise the validator would only say that no text could be extracted.
            raise SourceLoadError(
                f"the HTML is nested too deeply to read: elements more than {_PARSER_MAX_DEPTH} "
                "levels deep are dropped by the parser, and nothing was left"
            )
        warnings.append(
            f"content nested more than {_PARSER_MAX_DEPTH} elements deep was dropped by the parser"
        )
    if not title:
        first_heading = re.search(r"^#{1,6} (.+)$", text, re.M)
        title = first_heading.group(1) if first_heading else ""
    return LoadedDocument(
        text=text,
        kind="html",
        mime=MIME_BY_KIND["html"],
        title=title[:200],
        metadata=metadata,
        hidden_texts=hidden_texts,
        warnings=warnings,
    )


def _decode(raw: RawSource) -> tuple[str, list[str]]:
    """Markup as text: BOM, then the server's charset, then <meta charset>, then UTF-8.

    libxml2 reads undeclared bytes as Latin-1, which garbles UTF-8 pages; deciding here
    keeps that from happening.
    """
    data = raw.data
    meta = _META_CHARSET.search(data[:4096])
    candidates = [
        text_encoding(data),
        declared_charset(raw),
        meta and meta.group(1).decode("ascii"),
    ]
    warnings: list[str] = []
    for name in [*candidates, "utf-8"]:
        if not name:
            continue
        try:
            text = data.decode(codecs.lookup(name).name)
            break
        except (LookupError, UnicodeDecodeError):
            continue
    else:
        text = data.decode("cp1252", errors="replace")
        warnings.append("the page's encoding is undeclared or wrong; it was read as Windows-1252")
    return _XML_DECLARATION.sub("", text.lstrip("\ufeff"), count=1), warnings


def _drop(elements: Iterable[Element]) -> None:
    """Remove elements but keep the text that follows each (it belongs to the parent)."""
    for element in list(elements):
        if element.getparent() is not None:
            drop_tree(element)


def _remove_comments(document: Element) -> list[str]:
    texts: list[str] = []
    comments = list(document.iter(etree.Comment))
    for comment in comments:
        text = " ".join((comment.text or "").split())
        # Conditional comments for old browsers are markup, not prose.
        if text and not text.startswith(("[if ", "<![endif")):
            # Marked as a comment so the validator can tell notes from hidden elements.
            texts.append(f"<!-- {text} -->")
    _drop(comments)
    return texts


def _main_content(document: Element) -> Element:
    """The element holding the page's own content: <main>, role=main, one <article>, <body>."""
    found = _FIND_MAIN(document)
    if found:
        return found[0]
    articles = document.findall(".//article")
    if len(articles) == 1:
        return articles[0]
    body = document.find(".//body")
    return body if body is not None else document


def _drop_boilerplate(root: Element) -> None:
    doomed: list[Element] = []
    candidates = [*root.iter(*_BOILERPLATE, "header", "footer"), *_WITH_ROLE(root)]
    for element in candidates:
        if element is root:
            continue
        tag = element.tag
        role = (element.get("role") or "").lower()
        if tag in _BOILERPLATE or role in _BOILERPLATE_ROLES:
            doomed.append(element)
        elif tag in {"header", "footer"}:
            # An article's own header carries its title; a page header is a banner.
            keep = (
                tag == "header"
                and root.tag != "body"
                and any(child.tag in _HEADINGS for child in element.iterdescendants())
            )
            if not keep:
                doomed.append(element)
    # A descendant of an element already removed goes with it; removing it again is harmless.
    _drop(doomed)


def _collapse(text: str) -> str:
    lines = _SPACES.sub(" ", text).split(_BREAK)
    return "\n".join(line.strip() for line in lines).strip()


def _fence(code: str, language: str) -> str:
    fence = "```"
    while fence in code:
        fence += "`"
    return f"{fence}{language}\n{code}\n{fence}"


def _children(element: Element) -> list[Element]:
    """Child elements, without comments or processing instructions."""
    return [child for child in element if isinstance(child.tag, str)]


class _Converter:
    """Turns an element tree into blocks of Markdown-flavoured text."""

    def blocks(self, node: Element, depth: int) -> list[str]:
        if depth > _MAX_DEPTH:
            flat = _collapse(" ".join(node.itertext()))
            return [flat] if flat else []
        out: list[str] = []
        inline: list[str] = [node.text or ""]

        def flush() -> None:
            text = _collapse("".join(inline))
            if text:
                out.append(text)
            inline.clear()

        for child in node:
            if isinstance(child.tag, str):
                if child.tag in _BLOCKS:
                    flush()
                    out.extend(self.block(child, depth + 1))
                else:
                    inline.append(self.inline(child, depth + 1))
            inline.append(child.tail or "")
        flush()
        return out

    def block(self, element: Element, depth: int) -> list[str]:
        tag = element.tag
        if tag in _HEADINGS:
            text = self.inline_text(element, depth)
            return [f"{'#' * _HEADINGS[tag]} {text}"] if text else []
        if tag in {"ul", "ol"}:
            return self.list_block(element, depth)
        if tag == "pre":
            return self.pre_block(element)
        if tag == "table":
            return self.table_block(element, depth)
        if tag == "blockquote":
            inner = "\n\n".join(self.blocks(element, depth))
            return ["\n".join(f"> {line}".rstrip() for line in inner.split("\n"))] if inner else []
        if tag == "hr":
            return []
        return self.blocks(element, depth)

    def inline(self, element: Element, depth: int) -> str:
        if element.tag == "br":
            return _BREAK
        if depth > _MAX_DEPTH:
            return " ".join(element.itertext())
        parts: list[str] = [element.text or ""]
        for child in element:
            if isinstance(child.tag, str):
                text = self.inline(child, depth + 1)
                # A block inside an inline element (<a><div>…) still separates words.
                parts.append(f" {text} " if child.tag in _BLOCKS else text)
            parts.append(child.tail or "")
        text = "".join(parts)
        if element.tag in _INLINE_CODE and text.strip():
            return f"`{' '.join(text.split())}`"
        return text

    def inline_text(self, element: Element, depth: int) -> str:
        return " ".join(_collapse(self.inline(element, depth)).split("\n"))

    def list_block(self, element: Element, depth: int) -> list[str]:
        lines: list[str] = []
        number = 1
        for item in _children(element):
            marker = f"{number}. " if element.tag == "ol" else "- "
            number += 1
            blocks = (
                self.blocks(item, depth + 1) if item.tag == "li" else self.block(item, depth + 1)
            )
            content = "\n".join(blocks)
            if not content:
                continue
            item_lines = content.split("\n")
            lines.append(marker + item_lines[0])
            lines.extend((" " * len(marker) + line) if line else "" for line in item_lines[1:])
        return ["\n".join(lines)] if lines else []

    def pre_block(self, element: Element) -> list[str]:
        code = "".join(element.itertext()).strip("\n")
        if not code.strip():
            return []
        code_child = element.find("code")
        classes = " ".join(
            candidate.get("class") or ""
            for candidate in (element, code_child, element.getparent())
            if candidate is not None
        )
        match = _LANGUAGE.search(classes)
        return [_fence(code, match.group(1) if match else "")]

    def table_block(self, table: Element, depth: int) -> list[str]:
        rows = [row for row in table.iter("tr") if _owning_table(row) is table]
        cells = [[cell for cell in _children(row) if cell.tag in {"td", "th"}] for row in rows]
        cells = [row for row in cells if row]
        if not cells:
            return []
        out: list[str] = []
        caption = table.find("caption")
        if caption is not None:
            text = self.inline_text(caption, depth)
            if text:
                out.append(text)
        if max(len(row) for row in cells) == 1:
            # A one-column table is layout, not data: keep its content as blocks.
            for row in cells:
                out.extend(self.blocks(row[0], depth + 1))
            return out
        has_head = table.find("thead") is not None
        lines = []
        for index, row in enumerate(cells):
            texts = [self.inline_text(cell, depth + 1).replace("|", "\\|") for cell in row]
            lines.append("| " + " | ".join(texts) + " |")
            if index == 0 and (has_head or all(cell.tag == "th" for cell in row)):
                lines.append("|" + "|".join(" --- " for _ in row) + "|")
        out.append("\n".join(lines))
        return out


def _owning_table(row: Element) -> Element | None:
    return next(row.iterancestors("table"), None)
