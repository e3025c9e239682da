"""``structural``: headings start chunks; tables, code and lists stay whole."""

from __future__ import annotations

from collections.abc import Sequence

from collections_app.ingestion.chunking.base import CHUNK_TOKENS, CHUNKERS, Chunker, ChunkSpan
from collections_app.ingestion.chunking.document_structure import (
    ATOMIC_KINDS,
    Block,
    DocumentStructure,
)
from collections_app.ingestion.chunking.pieces import Piece, block_pieces, fit, measure, pack

SECTION_SEPARATOR = " > "


@CHUNKERS.register("structural")
class StructuralChunker(Chunker):
    """Chunks follow the document's structure.

    Every heading starts a new chunk, and blocks of one section are packed up
    to the budget. Tables, fenced code and lists are never split; one larger
    than the budget becomes chunks of its own, cut at line boundaries only as
    a last resort (metadata ``oversized_block``). Each chunk's text starts
    with its section path ("Guide > Install > Linux") so that the embedding
    knows where the passage sits; the path is left out when it would take
    more than half the budget. The chunk's offsets cover the source span
    only; ``metadata["text_offset"]`` is where that span starts in the text.
    """

    name = "structural"
    options_spec = {"chunk_tokens": CHUNK_TOKENS}

    def spans(self, structure: DocumentStructure, blocks: Sequence[Block]) -> list[ChunkSpan]:
        text = structure.text
        pieces = block_pieces(blocks)
        sections: list[list[Piece]] = []
        for piece in pieces:
            if not sections or piece.kind == "heading":
                sections.append([])
            sections[-1].append(piece)
        prefixes = [
            SECTION_SEPARATOR.join(structure.section_path_at(section[0].start))
            for section in sections
        ]
        unique = sorted({p for p in prefixes if p})
        prefix_tokens = dict(zip(unique, self.counter.count_many(unique), strict=True))
        for number, section in enumerate(sections):
            tokens = prefix_tokens.get(prefixes[number], 0)
            if tokens > self.limit // 2:
                prefixes[number] = ""
                tokens = 0
            for piece in section:
                piece.limit = self.limit - tokens
        token_index = measure(text, pieces, self.counter)
        for piece in pieces:
            if piece.kind in ATOMIC_KINDS and piece.tokens > piece.limit:
                # Last resort: cut straight at lines, never at sentences.
                piece.oversized = True
                piece.kind = "lines"
        fitted = fit(text, pieces, self.counter, token_index)
        by_origin = {piece.origin: group for piece, group in zip(pieces, fitted, strict=True)}
        spans: list[ChunkSpan] = []
        for section, prefix in zip(sections, prefixes, strict=True):
            units = [q for piece in section for q in by_origin[piece.origin]]
            tokens = prefix_tokens.get(prefix, 0) if prefix else 0
            for group in pack(text, units, self.limit - tokens):
                metadata: dict[str, object] = {}
                if group[0].oversized:
                    metadata["oversized_block"] = True
                spans.append(
                    ChunkSpan(pieces=group, metadata=metadata, prefix=prefix, prefix_tokens=tokens)
                )
        return spans
