"""``sentence``: whole sentences packed up to the budget, with sentences of overlap."""

from __future__ import annotations

from collections.abc import Sequence

from collections_app.ingestion.chunking.base import (
    CHUNK_TOKENS,
    CHUNKERS,
    Chunker,
    ChunkSpan,
    Option,
)
from collections_app.ingestion.chunking.document_structure import Block, DocumentStructure
from collections_app.ingestion.chunking.pieces import pack, sentence_units


@CHUNKERS.register("sentence")
class SentenceChunker(Chunker):
    """Sentences (list items split into theirs, code and tables into lines) packed
    greedily; each chunk after the first repeats the last ``overlap_sentences``
    sentences of the one before, as far as the budget allows."""

    name = "sentence"
    options_spec = {
        "chunk_tokens": CHUNK_TOKENS,
        "overlap_sentences": Option(
            1, "sentences a chunk repeats from the one before", minimum=0, maximum=50
        ),
    }

    def spans(self, structure: DocumentStructure, blocks: Sequence[Block]) -> list[ChunkSpan]:
        text = structure.text
        units = sentence_units(text, blocks, self.counter, self.limit)
        overlap = int(self.options["overlap_sentences"])
        groups = pack(text, units, self.limit, overlap_pieces=overlap)
        return [ChunkSpan(pieces=group, metadata={}) for group in groups]
