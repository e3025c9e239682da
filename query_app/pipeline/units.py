"""The readable units of a passage: sentences, list items and table rows, with offsets.

Extracted text keeps its line breaks: Markdown soft wraps, PDF line ends, HTML
whitespace. A sentence split on those lines would quote half sentences, so
lines are joined before sentences are cut (the join is length-preserving, so
every unit's offsets point into the passage as stored). List items and table
rows stay units of their own; headings, standalone title lines ("Root cause",
"Page 1 of 2"), table headers and the half sentences a chunk boundary cut off
are marked, so an answer never quotes them.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache

import pysbd

from query_app.pipeline.lexical import HEADING_RE

# Kinds of unit.
SENTENCE = "sentence"
ITEM = "item"  # a list item
ROW = "row"  # a table row or a one-line record ("Col: value; Col: value")
CODE = "code"  # a line of a code block

_BULLET_RE = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+")
_TABLE_RE = re.compile(r"^[ \t]*\|")
_TABLE_RULE_RE = re.compile(r"^[ \t]*\|?[ \t:|-]+\|[ \t:|-]*$")
_FENCE_RE = re.compile(r"^[ \t]*(```|~~~)")
_TERMINAL = (".", "!", "?", ":", ";", '"', "'", ")", "]", "”", "`")
_SENTENCE_END = (".", "!", "?", '"', "'", ")", "”", "`")
# A table-of-contents line: "2. Backup schedules (page 2)", "Restoring ........ 12".
# "Page 1 of 2", "- 3 -": page furniture, a title but no section heading.
_FOOTER_RE = re.compile(r"^(?:page\s+\d+(?:\s+of\s+\d+)?|-?\s*\d+\s*-?)$", re.IGNORECASE)
_TOC_ENTRY_RE = re.compile(r"\((?:page|p\.)\s*\d+\)$|\.{4,}\s*\d+$", re.IGNORECASE)
# Words at most in a line that stands alone as a title.
TITLE_MAX_WORDS = 8
# Words at least in a sentence an answer may quote ("Version 3.4." is a label).
SENTENCE_MIN_WORDS = 3
# A list item up to this many words is one unit, whatever its sentences: "Alert 30
# days before expiry. Owner: Aisha Bakker. Due on 15 August." reads as one fact.
ITEM_MAX_WORDS = 40


@dataclass(frozen=True)
class TextUnit:
    """One unit of a passage; ``start``/``end`` are offsets into the passage text."""

    text: str  # as a reader sees it: line breaks and runs of blanks folded
    start: int
    end: int
    kind: str = SENTENCE
    # A heading, a standalone title line, a table header or rule, a page footer.
    title: bool = False
    # A title that names what the units after it are about (a heading or a title
    # line); a table's header or rule, a contents entry and a page footer are not.
    heading: bool = False
    # Cut by the passage's edges (a chunk boundary fell inside it).
    fragment: bool = False

    @property
    def quotable(self) -> bool:
        return not self.title and not self.fragment


@dataclass
class _Line:
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    @property
    def stripped(self) -> str:
        return self.text.strip()


_segmenter_lock = threading.Lock()


@lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False, char_span=True)


def _lines(text: str) -> list[_Line]:
    lines: list[_Line] = []
    offset = 0
    for raw in text.split("\n"):
        lines.append(_Line(raw, offset))
        offset += len(raw) + 1
    return lines


def _is_title_line(
    line: str, previous: str | None, following: str | None, *, after_paragraph: bool
) -> bool:
    """A short line without closing punctuation, standing between whole sentences."""
    text = line.strip()
    if HEADING_RE.fullmatch(text) or _TOC_ENTRY_RE.search(text):
        return True
    if not text or text.endswith(_TERMINAL) or len(text.split()) > TITLE_MAX_WORDS:
        return False
    if ";" in text or (": " in text and not text.endswith(":")):
        return False  # a record or a "label: value" fact
    # After a list, a table or a title any short line stands alone; after a
    # paragraph only when the paragraph's last sentence is complete.
    before_ok = not after_paragraph or previous is None or previous.strip().endswith(_TERMINAL)
    after_ok = following is None or not following.strip() or not following.strip()[0].islower()
    return before_ok and after_ok


def _fold(text: str) -> str:
    # Hyphenated line ends ("embed-\nding") rejoin; other breaks become one blank.
    text = re.sub(r"(?<=[a-z])-\n(?=[a-z])", "", text)
    return " ".join(text.split())


# Where a sentence may end inside a paragraph: without one, it is one sentence.
_MAYBE_END_RE = re.compile(r"[.!?;:)\]\u2026][\"'\u2019\u201d)\]]*\s+\S")


def _segment(flat: str) -> list[tuple[str, int]]:
    """The segmenter's sentences of ``flat`` with their offsets.

    The same as ``Segmenter.segment`` with character spans, at a third of the
    cost: a paragraph with nowhere a sentence could end is not segmented at
    all, and the sentences are located by a forward search instead of the
    library's regular expression per sentence (compiled anew each time).
    """
    if not _MAYBE_END_RE.search(flat):
        return [(flat, 0)]
    with _segmenter_lock:
        segmenter = _segmenter()
        sentences = segmenter.processor(flat).process()
        found: list[tuple[str, int]] = []
        position = 0
        for sentence in sentences:
            at = flat.find(sentence, position)
            if at < 0:  # not a verbatim piece: the library's own search
                return [(span.sent, span.start) for span in segmenter.segment(flat)]
            found.append((sentence, at))
            position = at + len(sentence)
        return found


def _sentences(text: str, base: int, kind: str) -> list[TextUnit]:
    """Sentences of one paragraph or list item (``text`` starts at ``base``)."""
    flat = text.replace("\n", " ")  # same length: offsets stay exact
    pieces: list[tuple[int, int]] = []  # offsets into ``text``
    for raw, at in _segment(flat):
        stripped = raw.strip()
        if not stripped:
            continue
        lead = len(raw) - len(raw.lstrip())
        start = at + lead
        end = start + len(stripped)
        # The segmenter cuts before file extensions and after initials (".docx",
        # "to ." + "docx."): a piece starting in lower case continues the last.
        if pieces and (stripped[0].islower() or text[pieces[-1][1] - 2 : pieces[-1][1]] == " ."):
            pieces[-1] = (pieces[-1][0], end)
        else:
            pieces.append((start, end))
    units = [TextUnit(_fold(text[a:b]), base + a, base + b, kind=kind) for a, b in pieces]
    # "Version 3.4." opening a PDF's first paragraph is a label, not something to quote.
    return [
        TextUnit(u.text, u.start, u.end, kind, title=True)
        if kind == SENTENCE
        and len(u.text.split()) < SENTENCE_MIN_WORDS
        and not u.text.endswith(":")  # "Install silently:" introduces what follows
        else u
        for u in units
    ]


def _group(lines: list[_Line]) -> list[tuple[str, list[_Line]]]:
    """Consecutive lines grouped into paragraphs, list items, rows, titles and code."""
    groups: list[tuple[str, list[_Line]]] = []
    in_code = False
    for index, line in enumerate(lines):
        text = line.stripped
        if _FENCE_RE.match(line.text):
            in_code = not in_code
            groups.append(("fence", [line]))
            continue
        if in_code:
            groups.append(("code", [line]))
            continue
        if not text:
            groups.append(("blank", [line]))
            continue
        previous = lines[index - 1].text if index > 0 else None
        following = lines[index + 1].text if index + 1 < len(lines) else None
        last_kind = groups[-1][0] if groups else "blank"
        if HEADING_RE.fullmatch(text):
            groups.append(("title", [line]))
        elif _TABLE_RE.match(line.text):
            is_rule = bool(_TABLE_RULE_RE.match(line.text))
            header = following is not None and bool(_TABLE_RULE_RE.match(following))
            groups.append(("title" if is_rule or header else "row", [line]))
        elif _BULLET_RE.match(line.text):
            groups.append(("title" if _TOC_ENTRY_RE.search(text) else "item", [line]))
        elif last_kind == "item" and (line.text[:1] in " \t" or text[0].islower()):
            groups[-1][1].append(line)  # the item's continuation line
        elif _is_title_line(line.text, previous, following, after_paragraph=last_kind == "para"):
            groups.append(("title", [line]))
        elif last_kind == "para":
            groups[-1][1].append(line)
        else:
            groups.append(("para", [line]))
    return groups


def _subtitle_marked(groups: list[tuple[str, list[_Line]]]) -> list[tuple[str, list[_Line]]]:
    """A page's title block: "Incident report INC-2024-031" / "Beacon Cloud outage on 18
    July 2024." / "Summary". A short one-line paragraph between the opening title line
    and the next one is a subtitle, even with a full stop. Only for titles found by their
    shape (PDF, plain text): under Markdown headings a one-line paragraph is an answer."""
    shown = [i for i, (kind, _) in enumerate(groups) if kind != "blank"]
    if len(shown) < 3:
        return groups
    (k0, l0), (k1, l1), (k2, _) = (groups[i] for i in shown[:3])
    if (
        k0 == "title"
        and k1 == "para"
        and k2 == "title"
        and len(l1) == 1
        and len(l1[0].stripped.split()) <= TITLE_MAX_WORDS
        and not HEADING_RE.fullmatch(l0[0].stripped)
    ):
        groups[shown[1]] = ("title", l1)
    return groups


# Passages recur across questions (a few chunks answer many of them), and cutting
# one into sentences took a fifth of the web workers' CPU under load
# (benchmarks/load.py): the units of recently read passages are kept, per process.
UNITS_CACHE_ENTRIES = 4096


def text_units(text: str) -> list[TextUnit]:
    """The units of ``text`` in order, titles and edge fragments marked."""
    return list(_units_cached(text))  # the caller's own list: the kept one never changes


@lru_cache(maxsize=UNITS_CACHE_ENTRIES)
def _units_cached(text: str) -> tuple[TextUnit, ...]:
    return tuple(_text_units(text))


def _text_units(text: str) -> list[TextUnit]:
    units: list[TextUnit] = []
    for kind, lines in _subtitle_marked(_group(_lines(text))):
        if kind in ("blank", "fence"):
            continue
        start, end = lines[0].start, lines[-1].end
        body = text[start:end]
        lead = len(body) - len(body.lstrip())
        start, body = start + lead, body.strip()
        if not body:
            continue
        if kind == "code":
            units.append(TextUnit(body, start, start + len(body), kind=CODE))
        elif kind == "title":
            first = lines[0].text
            furniture = _TABLE_RE.match(first) or _BULLET_RE.match(first) or _FOOTER_RE.match(body)
            units.append(
                TextUnit(
                    _fold(body),
                    start,
                    start + len(body),
                    kind=ROW,
                    title=True,
                    heading=not furniture,
                )
            )
        elif kind == "row":
            cells = [c.strip() for c in body.strip("|").split("|")]
            units.append(TextUnit(" | ".join(c for c in cells if c), start, start + len(body), ROW))
        elif kind == "item":
            skip = 0
            while bullet := _BULLET_RE.match(body[skip:]):  # "- 1. Overview": both marks
                skip += bullet.end()
            item = body[skip:]
            if len(item.split()) <= ITEM_MAX_WORDS:
                units.append(TextUnit(_fold(item), start + skip, start + len(body), kind=ITEM))
            else:
                units += _sentences(item, start + skip, ITEM)
        elif "\n" not in body and ";" in body and ": " in body:
            units.append(TextUnit(_fold(body), start, start + len(body), kind=ROW))  # a record
        else:
            units += _sentences(body, start, SENTENCE)
    return _mark_edges(text, units)


def _mark_edges(text: str, units: list[TextUnit]) -> list[TextUnit]:
    """Half sentences at the passage's edges (a chunk boundary fell inside them)."""
    if not units:
        return units
    first, last = units[0], units[-1]
    if first.kind == SENTENCE and first.text[:1].islower():
        units[0] = _fragment(first)
    last = units[-1]
    if (
        last.kind == SENTENCE
        and not last.title
        and not last.text.endswith(_SENTENCE_END)
        and not last.text.endswith(":")
        and not text[last.end :].strip()
    ):
        units[-1] = _fragment(last)
    return units


def _fragment(unit: TextUnit) -> TextUnit:
    return TextUnit(unit.text, unit.start, unit.end, unit.kind, unit.title, fragment=True)
