"""Pieces of text with token counts: cutting them down to a budget and packing them.

A piece is a stripped span of the document text (a block, a list item, a
sentence, a line, a run of words) with its token count. Chunkers build
pieces from the document's blocks, ``fit`` cuts the ones over the budget
into finer pieces (block → items/sentences → lines → words), and ``pack``
joins consecutive pieces greedily into chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from collections_app.ingestion.chunking.document_structure import Block, line_spans
from collections_app.ingestion.chunking.sentence_split import sentence_spans
from collections_app.ingestion.chunking.tokens import TokenCounter, TokenIndex, clean_cut, joinable


@dataclass
class Piece:
    """Characters [start, end) of the text, stripped, holding ``tokens`` tokens."""

    start: int
    end: int
    kind: str
    tokens: int = -1
    level: int = 0  # heading level, for headings
    items: tuple[tuple[int, int], ...] = ()  # list items, for lists
    limit: int = 0  # the budget this piece must fit
    # Cut out of a table, code block or list larger than the budget.
    oversized: bool = False
    origin: int = -1  # index of the block the piece came from


# How each kind of piece is cut when it is over its budget; None: by tokens.
_FINER: dict[str, str | None] = {
    "list": "item",
    "item": "sentence",
    "paragraph": "sentence",
    "blockquote": "sentence",
    "html": "sentence",
    "sentence": "line",
    "code": "line",
    "table": "line",
    "hr": "line",
    "lines": "line",
    "heading": None,
    "line": None,
    "words": None,
}


def block_pieces(blocks: Sequence[Block]) -> list[Piece]:
    """One uncounted piece per block."""
    return [
        Piece(
            start=b.start,
            end=b.end,
            kind=b.kind,
            level=b.level,
            items=b.items,
            origin=i,
        )
        for i, b in enumerate(blocks)
    ]


def count(text: str, pieces: Sequence[Piece], counter: TokenCounter) -> None:
    """Fill in the token count of every piece that lacks one, in one batch."""
    todo = [p for p in pieces if p.tokens < 0]
    for piece, tokens in zip(
        todo, counter.count_many([text[p.start : p.end] for p in todo]), strict=True
    ):
        piece.tokens = tokens


def measure(text: str, pieces: Sequence[Piece], counter: TokenCounter) -> TokenIndex:
    """Count every piece in one batch; the index holds the long ones' tokens.

    Pieces long enough to be over their limit (more than three characters
    per token of it) are tokenised with offsets, so that ``fit`` can count
    their sentences and lines by lookup instead of tokenising them again.
    """
    long = [p for p in pieces if p.end - p.start > 3 * p.limit]
    index = counter.index(text, [(p.start, p.end) for p in long])
    for piece, tokens in zip(
        long, index.count_spans([(p.start, p.end) for p in long]), strict=True
    ):
        piece.tokens = tokens
    count(text, pieces, counter)
    return index


def split(text: str, piece: Piece, kind: str) -> list[Piece]:
    """Uncounted sub-pieces of ``piece`` of the given finer ``kind``."""
    if kind == "item" and len(piece.items) > 1:
        spans = list(piece.items)
    elif kind in ("item", "sentence"):
        spans = sentence_spans(text, piece.start, piece.end)
        kind = "sentence"
    else:
        spans = line_spans(text, piece.start, piece.end)
        kind = "line"
    return [
        Piece(
            start=s,
            end=e,
            kind=kind,
            limit=piece.limit,
            oversized=piece.oversized,
            origin=piece.origin,
        )
        for s, e in spans
    ]


def fit(
    text: str, pieces: Sequence[Piece], counter: TokenCounter, index: TokenIndex | None = None
) -> list[list[Piece]]:
    """For each counted piece, counted pieces that each fit its ``limit``, in order.

    Pieces over their limit are cut at the next finer boundary, level by
    level; what is still over after lines is cut into runs of whole words.
    The pieces over the limit are tokenised once, with offsets (``index``
    from ``measure`` may hold some already), and every finer piece is counted
    by looking its span up in that index.
    """
    result: list[list[Piece]] = [[p] for p in pieces]
    over = [p for p in pieces if p.tokens > p.limit]
    if not over:
        return result
    known = index if index is not None else counter.index(text, [])
    indexed = known.count_spans([(p.start, p.end) for p in over])
    missing = [(p.start, p.end) for p, n in zip(over, indexed, strict=True) if n != p.tokens]
    index = known.merged(counter.index(text, missing))
    while True:
        fresh: list[Piece] = []
        changed = False
        for position, group in enumerate(result):
            if all(p.tokens <= p.limit for p in group):
                continue
            regrouped: list[Piece] = []
            for piece in group:
                finer = _FINER.get(piece.kind)
                if piece.tokens <= piece.limit or finer is None:
                    regrouped.append(piece)
                    continue
                subs = split(text, piece, finer)
                changed = True
                if len(subs) == 1 and (subs[0].start, subs[0].end) == (piece.start, piece.end):
                    regrouped.append(replace(piece, kind=subs[0].kind))
                else:
                    regrouped.extend(subs)
                    fresh.extend(subs)
            result[position] = regrouped
        _count_in(text, fresh, index, counter)
        if not changed:
            break
    for position, group in enumerate(result):
        if any(p.tokens > p.limit for p in group):
            result[position] = [q for p in group for q in _cut_by_tokens(text, p, index, counter)]
    return result


def _count_in(text: str, pieces: list[Piece], index: TokenIndex, counter: TokenCounter) -> None:
    clean = [p for p in pieces if clean_cut(text, p.start) and clean_cut(text, p.end)]
    for piece, tokens in zip(
        clean, index.count_spans([(p.start, p.end) for p in clean]), strict=True
    ):
        piece.tokens = tokens
    # A cut inside a word (rare) changes how both sides tokenise: count afresh.
    count(text, [p for p in pieces if p.tokens < 0], counter)


def _cut_by_tokens(
    text: str, piece: Piece, index: TokenIndex, counter: TokenCounter
) -> list[Piece]:
    if piece.tokens <= piece.limit:
        return [piece]
    windows = counter.windows(text, index, start=piece.start, end=piece.end, size=piece.limit)
    return [
        Piece(
            start=w.start,
            end=w.end,
            kind="words",
            tokens=w.tokens,
            limit=piece.limit,
            oversized=piece.oversized,
            origin=piece.origin,
        )
        for w in windows
    ]


def can_join(text: str, left: Piece, right: Piece) -> bool:
    """Whether ``right`` may follow ``left`` inside one chunk."""
    if (left.oversized or right.oversized) and not (
        left.oversized and right.oversized and left.origin == right.origin
    ):
        # An atomic block too big for the budget is a chunk of its own.
        return False
    return joinable(text, left.end, right.start)


def pack(
    text: str,
    pieces: Sequence[Piece],
    limit: int,
    *,
    overlap_tokens: int = 0,
    overlap_pieces: int = 0,
) -> list[list[Piece]]:
    """Join consecutive pieces greedily into groups of at most ``limit`` tokens.

    With an overlap, each group after the first starts with the last pieces
    of the group before: at most ``overlap_pieces`` pieces, or pieces of at
    most ``overlap_tokens`` tokens in all.
    """
    groups: list[list[Piece]] = []
    n = len(pieces)
    i = 0
    while i < n:
        j = i + 1
        total = pieces[i].tokens
        while (
            j < n and total + pieces[j].tokens <= limit and can_join(text, pieces[j - 1], pieces[j])
        ):
            total += pieces[j].tokens
            j += 1
        groups.append(list(pieces[i:j]))
        if j >= n:
            break
        k = j
        # Overlap only where the budget ended the group, not a hard boundary.
        if (overlap_tokens or overlap_pieces) and can_join(text, pieces[j - 1], pieces[j]):
            carried = 0
            while k - 1 > i:
                candidate = pieces[k - 1]
                if overlap_pieces and j - (k - 1) > overlap_pieces:
                    break
                if overlap_tokens and carried + candidate.tokens > overlap_tokens:
                    break
                # The next group must still take in the piece that did not fit.
                if carried + candidate.tokens + pieces[j].tokens > limit:
                    break
                if not can_join(text, candidate, pieces[k]):
                    break
                carried += candidate.tokens
                k -= 1
        i = k
    return groups


def sentence_units(
    text: str,
    blocks: Sequence[Block],
    counter: TokenCounter,
    limit: int,
    *,
    whole_kinds: frozenset[str] = frozenset(),
) -> list[Piece]:
    """Counted sentence-sized pieces of ``blocks`` that each fit ``limit``.

    Prose is cut into sentences (list items first), code and tables into
    lines unless their kind is in ``whole_kinds``; headings stay whole.
    """
    units: list[Piece] = []
    for piece in block_pieces(blocks):
        piece.limit = limit
        if piece.kind == "heading" or piece.kind in whole_kinds:
            units.append(piece)
        elif piece.kind == "list" and len(piece.items) > 1:
            for item in split(text, piece, "item"):
                units.extend(split(text, item, "sentence"))
        else:
            units.extend(split(text, piece, _FINER.get(piece.kind) or "line"))
    count(text, units, counter)
    return [q for group in fit(text, units, counter) for q in group]
