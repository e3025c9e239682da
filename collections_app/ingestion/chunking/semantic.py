"""``semantic``: split where the meaning of adjacent sentences drifts apart."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from collections_app.ingestion.chunking.base import (
    CHUNK_TOKENS,
    CHUNKERS,
    Chunker,
    ChunkSpan,
    InvalidChunkingOptions,
    Option,
)
from collections_app.ingestion.chunking.document_structure import Block, DocumentStructure
from collections_app.ingestion.chunking.pieces import Piece, can_join, sentence_units


@CHUNKERS.register("semantic")
class SemanticChunker(Chunker):
    """Boundaries where adjacent sentences are least alike.

    Every sentence (code blocks and tables whole) is embedded with the
    collection's model; where the cosine similarity of two neighbours falls
    below the ``breakpoint_percentile``-th percentile of all neighbour
    similarities in the document, a chunk ends. Chunks over ``chunk_tokens``
    are cut again at their weakest link; chunks under ``min_tokens`` join the
    neighbour they fit with. Embedding every sentence costs about as much as
    embedding the document once more.
    """

    name = "semantic"
    options_spec = {
        "chunk_tokens": CHUNK_TOKENS,
        "min_tokens": Option(48, "chunks smaller than this join a neighbour", minimum=1),
        "breakpoint_percentile": Option(
            10,
            "neighbour similarities below this percentile end a chunk",
            minimum=0,
            maximum=100,
            integer=False,
        ),
    }

    def validate(self) -> None:
        if "min_tokens" not in self.given:
            # The default must suit small budgets too.
            self.options["min_tokens"] = min(self.options["min_tokens"], self.limit // 4)
        if self.options["min_tokens"] >= self.limit:
            raise InvalidChunkingOptions(
                f"chunking option 'min_tokens' ({self.options['min_tokens']}) must be smaller "
                f"than the chunk budget ({self.limit} tokens)"
            )

    def spans(self, structure: DocumentStructure, blocks: Sequence[Block]) -> list[ChunkSpan]:
        text = structure.text
        units = sentence_units(
            text, blocks, self.counter, self.limit, whole_kinds=frozenset({"code", "table"})
        )
        if len(units) < 2:
            return [ChunkSpan(pieces=units, metadata={})] if units else []
        vectors = self.embedder.encode([text[u.start : u.end] for u in units])
        similarity = np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
        # A junction where pieces cannot share a chunk is a boundary whatever its meaning.
        forced = np.array([not can_join(text, a, b) for a, b in itertools.pairwise(units)])
        free = similarity[~forced]
        threshold = (
            float(np.percentile(free, self.options["breakpoint_percentile"])) if len(free) else 0
        )
        cuts = forced | (similarity < threshold)
        groups: list[list[int]] = [[0]]
        for index in range(1, len(units)):
            if cuts[index - 1]:
                groups.append([])
            groups[-1].append(index)
        groups = [part for group in groups for part in self._bound(units, similarity, group)]
        merged = self._merge_small(units, forced, groups)
        return [ChunkSpan(pieces=[units[i] for i in group], metadata={}) for group in merged]

    def _bound(
        self, units: list[Piece], similarity: np.ndarray, group: list[int]
    ) -> list[list[int]]:
        """Cut ``group`` at its least similar junction until every part fits the budget."""
        if sum(units[i].tokens for i in group) <= self.limit or len(group) < 2:
            return [group]
        junctions = similarity[group[0] : group[-1]]
        cut = int(np.argmin(junctions)) + 1
        return self._bound(units, similarity, group[:cut]) + self._bound(
            units, similarity, group[cut:]
        )

    def _merge_small(
        self, units: list[Piece], forced: np.ndarray, groups: list[list[int]]
    ) -> list[list[int]]:
        minimum = int(self.options["min_tokens"])
        merged: list[list[int]] = []
        sizes: list[int] = []
        for group in groups:
            tokens = sum(units[i].tokens for i in group)
            if (
                merged
                and (sizes[-1] < minimum or tokens < minimum)
                and sizes[-1] + tokens <= self.limit
                and not forced[group[0] - 1]
            ):
                merged[-1].extend(group)
                sizes[-1] += tokens
            else:
                merged.append(list(group))
                sizes.append(tokens)
        return merged
