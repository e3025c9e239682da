"""Sentence boundaries with pysbd, kept linear in the size of the text.

Measured on ~1 MB of package documentation: pysbd's ``Segmenter.segment``
spends most of its time re-locating every sentence in the input with a freshly
compiled regex (quadratic in a paragraph's length: a 100 kB paragraph took 20 s),
and its abbreviation pass rescans the whole input once per abbreviation it
meets. So this module runs pysbd's processor directly, locates the sentences
itself with ``str.find``, skips paragraphs that cannot hold two sentences, and
feeds pysbd windows of at most a few thousand characters.
"""

from __future__ import annotations

import re

import pysbd

from collections_app.ingestion.chunking.document_structure import strip_span

_SEGMENTER = pysbd.Segmenter(language="en", clean=False)
# Text where a sentence could end before more text: without one, a paragraph
# is a single sentence and pysbd is not consulted.
_CLOSERS = "\"'\u201d\u2019)\\]"  # quotes and brackets that may follow the full stop
_OPENERS = "\"'\u201c\u2018(\\["
_CJK_STOPS = "\u3002\uff01\uff1f"  # ideographic full stop, fullwidth ! and ?
_POSSIBLE_BOUNDARY = re.compile(rf"[.!?\u2026][{_CLOSERS}]*\s+\S|[{_CJK_STOPS}]\s*\S")
# Where a long paragraph may be cut before pysbd sees it: after sentence
# punctuation, before what looks like the start of a sentence.
_WINDOW_CUT = re.compile(rf"[.!?\u2026][{_CLOSERS}]*\s+(?=[{_OPENERS}]?[A-Z0-9])|[{_CJK_STOPS}]")
# pysbd's cost grows faster than linearly with the input; windows this long
# keep it at its per-character speed.
_WINDOW_CHARS = 3000


def sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of text[start:end] as stripped, ordered, non-empty spans."""
    start, end = strip_span(text, start, end)
    if end <= start:
        return []
    piece = text[start:end]
    if not _POSSIBLE_BOUNDARY.search(piece):
        return [(start, end)]
    spans: list[tuple[int, int]] = []
    for w_start, w_end in _windows(piece):
        spans.extend((start + s, start + e) for s, e in _segment(piece, w_start, w_end))
    return spans


def _windows(piece: str) -> list[tuple[int, int]]:
    if len(piece) <= _WINDOW_CHARS:
        return [(0, len(piece))]
    cuts = [m.end() for m in _WINDOW_CUT.finditer(piece)]
    windows: list[tuple[int, int]] = []
    pos = 0
    index = 0
    while pos < len(piece):
        limit = pos + _WINDOW_CHARS
        best = None
        while index < len(cuts) and cuts[index] <= limit:
            if cuts[index] > pos:
                best = cuts[index]
            index += 1
        if best is None:
            # No plausible boundary within a window: take the run up to the
            # next one, which _segment hands to the regex splitter.
            best = next((c for c in cuts[index:] if c > pos), len(piece))
        if len(piece) - best < _WINDOW_CHARS // 10:
            best = len(piece)
        windows.append((pos, best))
        pos = best
    return windows


def _segment(piece: str, w_start: int, w_end: int) -> list[tuple[int, int]]:
    """Sentences of piece[w_start:w_end], located in ``piece``."""
    window = piece[w_start:w_end]
    if len(window) > 2 * _WINDOW_CHARS:
        # Pathological input (minified text, one endless line of data): pysbd
        # would take seconds on it for no better answer than the regex.
        return _regex_sentences(piece, w_start, w_end)
    try:
        sentences = _SEGMENTER.processor(window).process()
    except Exception:
        # pysbd has crashed on odd input (IndexError in its rules); a regex
        # split is a worse but safe answer for this one paragraph.
        return _regex_sentences(piece, w_start, w_end)
    spans: list[tuple[int, int]] = []
    cursor = w_start
    for sentence in sentences:
        needle = sentence.strip()
        if not needle:
            continue
        found = piece.find(needle, cursor, w_end)
        if found < 0:
            # pysbd rewrote some characters; split the rest without it.
            spans.extend(_regex_sentences(piece, cursor, w_end))
            return spans
        sentence_start = found
        if found > cursor and piece[cursor:found].strip():
            # Text pysbd left out joins a neighbouring sentence: nothing is lost.
            if spans:
                spans[-1] = (spans[-1][0], found)
            else:
                sentence_start = cursor
        cursor = found + len(needle)
        spans.append((sentence_start, cursor))
    s, e = strip_span(piece, cursor, w_end)
    if e > s:
        if spans:
            spans[-1] = (spans[-1][0], e)
        else:
            spans.append((s, e))
    return [strip_span(piece, s, e) for s, e in spans]


def _regex_sentences(piece: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    pos = start
    for match in _WINDOW_CUT.finditer(piece, start, end):
        s, e = strip_span(piece, pos, match.end())
        if e > s:
            spans.append((s, e))
        pos = match.end()
    s, e = strip_span(piece, pos, end)
    if e > s:
        spans.append((s, e))
    return spans
