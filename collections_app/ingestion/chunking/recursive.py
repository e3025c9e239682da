"""``recursive``: sections, then paragraphs, then sentences, packed up to the budget."""

from __future__ import annotations

from collections.abc import Sequence

from collections_app.ingestion.chunking.base import (
    CHUNK_TOKENS,
    CHUNKERS,
    OVERLAP_TOKENS,
    Chunker,
    ChunkSpan,
)
from collections_app.ingestion.chunking.document_structure import Block, DocumentStructure
from collections_app.ingestion.chunking.pieces import Piece, block_pieces, fit, measure, pack


@CHUNKERS.register("recursive")
class RecursiveChunker(Chunker):
    """The default strategy: keep the largest structural unit that fits the budget.

    A page (or the whole text) that fits is one chunk. Otherwise it is cut at
    its highest-level headings, and neighbouring sections that fit together
    are packed into one chunk; a section still too large is cut at its next
    heading level, and so on. Text without further headings is packed from
    paragraphs, and a paragraph over the budget from its sentences (then
    lines, then runs of words). ``chunk_overlap_tokens`` repeats the last
    pieces of a chunk at the start of the next where paragraphs are packed.
    """

    name = "recursive"
    options_spec = {"chunk_tokens": CHUNK_TOKENS, "chunk_overlap_tokens": OVERLAP_TOKENS}

    def spans(self, structure: DocumentStructure, blocks: Sequence[Block]) -> list[ChunkSpan]:
        text = structure.text
        pieces = block_pieces(blocks)
        for piece in pieces:
            piece.limit = self.limit
        index = measure(text, pieces, self.counter)
        # Every block over the budget is cut the same way wherever it ends
        # up, so cut them all at once.
        fitted = fit(text, pieces, self.counter, index)
        groups = self._split(text, pieces, fitted, list(range(len(pieces))))
        return [ChunkSpan(pieces=group, metadata={}) for group in groups]

    def _split(
        self, text: str, pieces: list[Piece], fitted: list[list[Piece]], indices: list[int]
    ) -> list[list[Piece]]:
        if sum(pieces[i].tokens for i in indices) <= self.limit:
            return [[pieces[i] for i in indices]]
        levels = [pieces[i].level for i in indices[1:] if pieces[i].kind == "heading"]
        if not levels:
            leaf = [p for i in indices for p in fitted[i]]
            return pack(
                text, leaf, self.limit, overlap_tokens=int(self.options["chunk_overlap_tokens"])
            )
        top = min(levels)
        sections: list[list[int]] = [[indices[0]]]
        for i in indices[1:]:
            if pieces[i].kind == "heading" and pieces[i].level == top:
                sections.append([])
            sections[-1].append(i)
        out: list[list[Piece]] = []
        packed: list[int] = []
        packed_tokens = 0
        for section in sections:
            tokens = sum(pieces[i].tokens for i in section)
            if tokens > self.limit:
                parts = self._split(text, pieces, fitted, section)
                if packed:
                    lead = [pieces[i] for i in packed]
                    if packed_tokens + sum(p.tokens for p in parts[0]) <= self.limit:
                        # A heading (or short section) just before a large
                        # section opens that section's first chunk rather
                        # than standing alone.
                        parts[0] = lead + parts[0]
                    else:
                        out.append(lead)
                packed, packed_tokens = [], 0
                out.extend(parts)
            elif packed and packed_tokens + tokens <= self.limit:
                packed.extend(section)
                packed_tokens += tokens
            else:
                if packed:
                    out.append([pieces[i] for i in packed])
                packed, packed_tokens = list(section), tokens
        if packed:
            out.append([pieces[i] for i in packed])
        return out
