"""What every chunking strategy shares: options, token budget, and turning spans into drafts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from collections_app.embedding import Embedder
from collections_app.ingestion.chunking.document_structure import Block, DocumentStructure
from collections_app.ingestion.chunking.pieces import Piece
from collections_app.ingestion.chunking.tokens import TokenCounter
from collections_app.ingestion.types import (
    ChunkDraft,
    IngestionError,
    LoadedDocument,
    UnknownChunker,
)
from ragsite.registry import Registry


class InvalidChunkingOptions(IngestionError):
    """A chunking option is unknown or has a value the strategy cannot use."""


@dataclass(frozen=True)
class Option:
    """One option of a strategy: its default and the values it accepts."""

    default: float
    help: str
    # The key in settings.RAG["ingestion"] whose value replaces ``default``.
    setting: str | None = None
    minimum: float = 0
    maximum: float | None = None
    integer: bool = True


CHUNK_TOKENS = Option(
    200,
    "token budget of a chunk (capped at what the model reads)",
    setting="chunk_tokens",
    minimum=8,
)
OVERLAP_TOKENS = Option(
    0, "tokens a chunk repeats from the one before", setting="chunk_overlap_tokens"
)


@dataclass
class ChunkSpan:
    """A chunk before it becomes a draft: pieces in order, plus strategy metadata."""

    pieces: list[Piece]
    metadata: dict[str, object]
    prefix: str = ""
    prefix_tokens: int = 0

    @property
    def start(self) -> int:
        return self.pieces[0].start

    @property
    def end(self) -> int:
        return self.pieces[-1].end

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.pieces)


class Chunker(ABC):
    """A named chunking strategy with resolved options.

    Subclasses set ``name``, ``options_spec`` and implement ``spans``; the
    base class validates options, bounds the budget by what the embedding
    model reads, and turns spans into ``ChunkDraft`` objects.
    """

    name: ClassVar[str]
    # Bumped when a change to the algorithm changes its output, so that
    # manifests comparing fingerprints re-chunk sources.
    version: ClassVar[int] = 1
    options_spec: ClassVar[Mapping[str, Option]] = {"chunk_tokens": CHUNK_TOKENS}

    def __init__(self, *, embedder: Embedder, options: Mapping[str, Any] | None = None):
        self.embedder = embedder
        self.options = self._resolve(options or {})
        self.given = frozenset(options or {})
        self.counter = TokenCounter(embedder)
        # The model silently drops tokens past max_tokens, so the budget never exceeds it.
        self.limit = min(int(self.options["chunk_tokens"]), int(embedder.max_tokens))
        self.validate()

    def validate(self) -> None:
        """Check combinations of option values; raise InvalidChunkingOptions."""
        overlap = self.options.get("chunk_overlap_tokens", 0)
        if overlap >= self.limit:
            raise InvalidChunkingOptions(
                f"chunking option 'chunk_overlap_tokens' ({overlap}) must be smaller than "
                f"the chunk budget ({self.limit} tokens)"
            )

    def settings_fingerprint(self) -> dict[str, Any]:
        """The strategy and its resolved options; equal fingerprints chunk alike."""
        return {"strategy": self.name, "version": self.version, "options": dict(self.options)}

    def chunk(self, doc: LoadedDocument) -> list[ChunkDraft]:
        """Cut ``doc`` into chunk drafts with offsets, pages and section paths."""
        if not doc.text.strip():
            return []
        structure = DocumentStructure.parse(doc)
        drafts: list[ChunkDraft] = []
        for segment in structure.segments:
            if not segment.blocks:
                continue
            for span in self.spans(structure, segment.blocks):
                if span.tokens <= 0:
                    continue  # nothing the model would read (zero-width characters)
                body = doc.text[span.start : span.end]
                metadata: dict[str, object] = {"strategy": self.name, **span.metadata}
                text = body
                if span.prefix:
                    text = f"{span.prefix}\n\n{body}"
                    metadata["text_offset"] = len(span.prefix) + 2
                drafts.append(
                    ChunkDraft(
                        text=text,
                        ordinal=len(drafts),
                        char_start=span.start,
                        char_end=span.end,
                        page=segment.page,
                        section_path=structure.section_path_at(span.start),
                        token_count=span.tokens + span.prefix_tokens,
                        metadata=metadata,
                    )
                )
        return drafts

    @abstractmethod
    def spans(self, structure: DocumentStructure, blocks: Sequence[Block]) -> list[ChunkSpan]:
        """The chunks of one page's (or the whole text's) blocks, in order."""

    def _resolve(self, options: Mapping[str, Any]) -> dict[str, Any]:
        from django.conf import settings

        known = sorted(self.options_spec)
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InvalidChunkingOptions(
                f"unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(k) for k in unknown)} for chunking strategy {self.name!r}; "
                f"known: {', '.join(known)}"
            )
        configured = settings.RAG.get("ingestion", {})
        resolved: dict[str, Any] = {}
        for key in known:
            spec = self.options_spec[key]
            if key in options:
                value = options[key]
            elif spec.setting and spec.setting in configured:
                value = configured[spec.setting]
            else:
                value = spec.default
            resolved[key] = self._check(key, spec, value)
        return resolved

    def _check(self, key: str, spec: Option, value: Any) -> float:
        kind = "a whole number" if spec.integer else "a number"
        if isinstance(value, bool):
            raise InvalidChunkingOptions(f"chunking option {key!r} must be {kind}, not {value!r}")
        if not isinstance(value, int | float):
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise InvalidChunkingOptions(
                    f"chunking option {key!r} must be {kind}, not {value!r}"
                ) from None
        if spec.integer:
            if value != int(value):
                raise InvalidChunkingOptions(f"chunking option {key!r} must be {kind}, not {value}")
            value = int(value)
        if value < spec.minimum or (spec.maximum is not None and value > spec.maximum):
            upper = f" and at most {spec.maximum:g}" if spec.maximum is not None else ""
            raise InvalidChunkingOptions(
                f"chunking option {key!r} must be at least {spec.minimum:g}{upper}, not {value}"
            )
        return value


def _unknown(name: str, known: list[str]) -> UnknownChunker:
    return UnknownChunker(f"unknown chunking strategy {name!r}; known: {', '.join(known)}")


CHUNKERS: Registry[type[Chunker]] = Registry("chunking strategy", unknown=_unknown)
"""Strategy classes by name; each registers itself where it is defined."""
