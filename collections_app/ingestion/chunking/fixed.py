"""``fixed``: deterministic windows of N tokens with overlap."""

from __future__ import annotations

from collections.abc import Sequence

from collections_app.ingestion.chunking.base import (
    CHUNK_TOKENS,
    CHUNKERS,
    OVERLAP_TOKENS,
    Chunker,
    ChunkSpan,
)
from collections_app.ingestion.chunking.document_structure import (
    Block,
    DocumentStructure,
    line_spans,
)
from collections_app.ingestion.chunking.pieces import Piece


@CHUNKERS.register("fixed")
class FixedChunker(Chunker):
    """Windows of ``chunk_tokens`` tokens, each starting ``chunk_tokens -
    chunk_overlap_tokens`` tokens after the one before, blind to structure.

    Windows end between words (so a window may hold a few tokens less than
    the budget) and restart at every page, so that a chunk cites one page.
    """

    name = "fixed"
    options_spec = {"chunk_tokens": CHUNK_TOKENS, "chunk_overlap_tokens": OVERLAP_TOKENS}

    def spans(self, structure: DocumentStructure, blocks: Sequence[Block]) -> list[ChunkSpan]:
        text = structure.text
        lines = [span for b in blocks for span in line_spans(text, b.start, b.end)]
        windows = self.counter.windows(
            text,
            self.counter.index(text, lines),
            start=blocks[0].start,
            end=blocks[-1].end,
            size=self.limit,
            overlap=int(self.options["chunk_overlap_tokens"]),
        )
        return [
            ChunkSpan(
                pieces=[Piece(start=w.start, end=w.end, kind="window", tokens=w.tokens)],
                metadata={},
            )
            for w in windows
        ]
