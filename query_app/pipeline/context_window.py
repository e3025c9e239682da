"""Small-to-big context: the text around a retrieved passage that the generator reads.

Retrieval ranks small chunks (precise matches); the answer is often better
written from more of the document around them. ``context.expand`` chooses
what the generator (and the extractive answerer) reads for each passage:

- ``chunk``: the passage alone (the default);
- ``window``: the passage with ``context.window`` neighbouring passages of the
  same document on each side;
- ``section``: the passages of the same section (same section path) around it.

Either grows outwards from the passage, nearer neighbours first, and stops at
``context.expand_max_tokens``. The text is the document's own, cut from the
source text between the first and the last passage taken, so overlapping
chunks are not repeated. Citations and highlights stay on the small passage:
only what the model reads grows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q

from collections_app.models import Chunk
from query_app.pipeline.types import Candidate

EXPANSIONS = ("chunk", "window", "section")


@dataclass(frozen=True)
class Window:
    """The document text given to the generator for one passage."""

    text: str
    char_start: int
    char_end: int
    ordinals: tuple[int, int]  # first and last passage taken (document order)
    kind: str  # window | section

    def trace(self, chunk_id: str) -> dict[str, Any]:
        return {
            "chunk": chunk_id,
            "kind": self.kind,
            "ordinals": list(self.ordinals),
            "chars": [self.char_start, self.char_end],
        }


@dataclass(frozen=True)
class _Neighbour:
    ordinal: int
    char_start: int
    char_end: int
    section: tuple[str, ...]


def windows_for(
    candidates: Sequence[Candidate], *, expand: str, size: int, max_chars: int
) -> dict[str, Window]:
    """Per chunk id, the window or section around each candidate (none for ``chunk``).

    Two queries whatever the number of candidates: the neighbours' offsets, then
    the text of each window cut from its source.
    """
    if expand == "chunk" or not candidates:
        return {}
    reach = size if expand == "window" else _SECTION_REACH
    ranges = Q()
    for c in candidates:
        ranges |= Q(
            source_id=c.source_id,
            ordinal__gte=max(0, c.ordinal - reach),
            ordinal__lte=c.ordinal + reach,
        )
    rows = (
        Chunk.objects.filter(ranges, kind=Chunk.Kind.PASSAGE)
        .order_by()
        .values_list(
            "source_id", "source_hash", "ordinal", "char_start", "char_end", "section_path"
        )
    )
    versions: dict[tuple[int, str], dict[int, _Neighbour]] = {}
    for source_id, source_hash, ordinal, start, end, section in rows:
        versions.setdefault((source_id, source_hash), {})[ordinal] = _Neighbour(
            ordinal, start, end, tuple(section or [])
        )
    spans: dict[str, tuple[int, int, int, int]] = {}
    for c in candidates:
        by_ordinal = _own_version(c, versions)
        spans[c.chunk_id] = _grow(c, by_ordinal, expand=expand, size=size, max_chars=max_chars)
    texts = _source_texts(candidates, spans)
    windows: dict[str, Window] = {}
    for c in candidates:
        first, last, start, end = spans[c.chunk_id]
        text = texts.get(c.chunk_id, "")
        if (first, last) == (c.ordinal, c.ordinal) or not text:
            continue  # nothing around it (or its source is gone): the passage alone
        windows[c.chunk_id] = Window(text, start, end, (first, last), expand)
    return windows


# How far a section may reach on either side, in passages, before the token cap applies.
_SECTION_REACH = 50


def _grow(
    c: Candidate, by_ordinal: dict[int, _Neighbour], *, expand: str, size: int, max_chars: int
) -> tuple[int, int, int, int]:
    """First and last ordinal, and the character span, taken around ``c``."""
    first = last = c.ordinal
    start, end = c.char_start, c.char_end
    section = tuple(c.section_path)
    reach = size if expand == "window" else _SECTION_REACH
    for step in range(1, reach + 1):
        grown = False
        for ordinal in (c.ordinal - step, c.ordinal + step):
            n = by_ordinal.get(ordinal)
            # Contiguous only: a gap (a missing passage) ends that side.
            if n is None or not (ordinal == first - 1 or ordinal == last + 1):
                continue
            if expand == "section" and n.section != section:
                continue
            new_start, new_end = min(start, n.char_start), max(end, n.char_end)
            if new_end - new_start > max_chars:
                continue
            first, last = min(first, ordinal), max(last, ordinal)
            start, end = new_start, new_end
            grown = True
        if not grown:
            break
    return first, last, start, end


def _own_version(
    c: Candidate, versions: dict[tuple[int, str], dict[int, _Neighbour]]
) -> dict[int, _Neighbour]:
    """The neighbours in the candidate's own version of its document.

    Old and new versions of a changed source coexist for a moment; the
    candidate's version is the one holding a passage at its place.
    """
    for (source_id, _hash), by_ordinal in versions.items():
        own = by_ordinal.get(c.ordinal)
        if source_id == c.source_id and own is not None and own.char_start == c.char_start:
            return by_ordinal
    return {}


def _source_texts(
    candidates: Sequence[Candidate], spans: dict[str, tuple[int, int, int, int]]
) -> dict[str, str]:
    """Per chunk id, its span of the source text, in one query (only the spans are read)."""
    wanted = [
        (c.chunk_id, c.source_id, spans[c.chunk_id][2], spans[c.chunk_id][3])
        for c in candidates
        if spans[c.chunk_id][:2] != (c.ordinal, c.ordinal)
    ]
    if not wanted:
        return {}
    values = ", ".join(["(%s, %s, %s, %s)"] * len(wanted))
    params: list[Any] = [v for row in wanted for v in (row[0], row[1], row[2] + 1, row[3] - row[2])]
    sql = (
        f"SELECT w.cid, substr(s.text, w.first, w.length) FROM (VALUES {values}) "
        "AS w(cid, sid, first, length) JOIN collections_app_source s ON s.id = w.sid"
    )
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return {str(cid): str(text or "") for cid, text in cur.fetchall()}
