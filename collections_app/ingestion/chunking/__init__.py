"""Chunking strategies: one registry (``CHUNKERS``) from name to chunker class.

Every strategy bounds chunks in the embedding model's own tokens (all-MiniLM-L6-v2
reads 254 wordpieces after [CLS]/[SEP] and silently drops the rest), keeps exact
character offsets into ``LoadedDocument.text``, the page, the section path and
the token count of every chunk, never joins text from two pages, and gives the
same chunks for the same input.

    chunker = get_chunker("recursive", options={"chunk_tokens": 180}, embedder=get_embedder())
    drafts = chunker.chunk(doc)
    fingerprint = chunker.settings_fingerprint()  # compared by the manifest
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from collections_app.embedding import Embedder
from collections_app.ingestion.chunking.base import CHUNKERS, Chunker, InvalidChunkingOptions

# Each strategy module registers its chunker in CHUNKERS when imported.
from collections_app.ingestion.chunking.fixed import FixedChunker
from collections_app.ingestion.chunking.recursive import RecursiveChunker
from collections_app.ingestion.chunking.semantic import SemanticChunker
from collections_app.ingestion.chunking.sentence import SentenceChunker
from collections_app.ingestion.chunking.structural import StructuralChunker
from collections_app.ingestion.types import UnknownChunker

__all__ = [
    "CHUNKERS",
    "Chunker",
    "FixedChunker",
    "InvalidChunkingOptions",
    "RecursiveChunker",
    "SemanticChunker",
    "SentenceChunker",
    "StructuralChunker",
    "UnknownChunker",
    "chunk_id",
    "get_chunker",
]


def get_chunker(
    name: str, *, options: Mapping[str, Any] | None = None, embedder: Embedder
) -> Chunker:
    """The chunker called ``name`` with ``options`` over settings.RAG["ingestion"] defaults.

    Raises UnknownChunker (listing the known names) for an unknown name and
    InvalidChunkingOptions for an unknown option or a value out of range.
    """
    return CHUNKERS.get(name)(embedder=embedder, options=options)


def chunk_id(*, location: str, content_hash: str, ordinal: int) -> str:
    """A deterministic chunk id: the same source version and position, the same id.

    32 hex digits of a SHA-256 (128 bits: collisions are out of reach for any
    corpus), short enough for the 64-character primary key.
    """
    key = f"{location}\x00{content_hash}\x00{ordinal}".encode()
    return hashlib.sha256(key).hexdigest()[:32]
