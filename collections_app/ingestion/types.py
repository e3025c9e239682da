"""Data passed between the ingestion stages: load → validate → chunk → embed → upsert."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


class IngestionError(Exception):
    """Base class: a source could not be ingested; the message is shown to the user."""


class SourceLoadError(IngestionError):
    """The source could not be read or parsed (corrupt, encrypted, empty, ...)."""


class SourceTooLarge(IngestionError):
    """The source exceeds a size, page or decompression limit."""


class UnsupportedSourceType(IngestionError):
    """The content is of a type no loader handles (e.g. a binary file named .txt)."""


class UrlRefused(IngestionError):
    """A URL was refused before or during fetching (private address, scheme, redirects)."""


class UrlFetchError(IngestionError):
    """A URL could not be fetched (timeout, HTTP error, connection refused)."""


class UnknownChunker(IngestionError):
    """No chunking strategy has that name; the message lists the known ones."""


class EmbeddingProfileDrift(IngestionError):
    """The active embedding profile differs from the one the collection records."""


@dataclass(frozen=True)
class PageSpan:
    """Characters [char_start, char_end) of the document text come from page ``number`` (1-based)."""

    number: int
    char_start: int
    char_end: int
    has_text: bool = True


@dataclass
class RawSource:
    """Bytes of one source with what is known about where they came from."""

    location: str
    origin: Literal["path", "url", "upload"]
    data: bytes
    filename: str = ""
    # Set by the URL fetcher.
    final_url: str = ""
    http_status: int | None = None
    declared_mime: str = ""


@dataclass
class LoadedDocument:
    """A source turned into text.

    ``text`` is normalised, Markdown-flavoured text: headings as ``#`` lines,
    lists as ``-`` items, tables as ``|`` rows, code fenced with ``````` — so
    that every chunker can find the structure without knowing the format.
    Chunk offsets point into this text.
    """

    text: str
    kind: str  # text | markdown | csv | html | pdf | docx
    mime: str
    title: str = ""
    metadata: dict[str, object] = field(default_factory=dict)
    pages: list[PageSpan] = field(default_factory=list)
    # Content removed because a reader would not see it (hidden HTML elements,
    # comments, white-on-white text); the injection validator inspects it.
    hidden_texts: list[str] = field(default_factory=list)
    # Non-fatal problems, e.g. "page 3 has no text layer".
    warnings: list[str] = field(default_factory=list)
    # Uncompressed size of archive members / PDF streams when known.
    decompressed_bytes: int | None = None


@dataclass(frozen=True)
class Signal:
    """One reason content looks hostile or broken."""

    name: str  # e.g. "instruction-override", "role-marker", "hidden-text"
    detail: str
    excerpt: str = ""
    start: int | None = None  # offsets into LoadedDocument.text when the signal is visible
    end: int | None = None
    weight: float = 1.0

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "detail": self.detail,
            "excerpt": self.excerpt,
            "start": self.start,
            "end": self.end,
            "weight": self.weight,
        }


@dataclass
class ValidationResult:
    verdict: Literal["clean", "suspicious", "rejected"]
    signals: list[Signal] = field(default_factory=list)
    # Problems that make the source unusable (empty extraction, ...): the source fails.
    errors: list[str] = field(default_factory=list)

    @property
    def excerpt(self) -> str:
        return next((s.excerpt for s in self.signals if s.excerpt), "")


@dataclass
class ChunkDraft:
    """A chunk before embedding."""

    text: str
    ordinal: int
    char_start: int
    char_end: int
    page: int | None = None
    section_path: list[str] = field(default_factory=list)
    token_count: int = 0
    metadata: dict[str, object] = field(default_factory=dict)
    # Contextual header (document title, section path) embedded before ``text``
    # but stored apart from it, so offsets and citations stay on the text.
    header: str = ""

    @property
    def embedded_text(self) -> str:
        """What the embedding model reads: the header, then the chunk's text."""
        return f"{self.header}{self.text}" if self.header else self.text


@dataclass(frozen=True)
class EmbeddingProfile:
    provider: str
    model: str
    dimensions: int

    def as_dict(self) -> dict[str, object]:
        return {"provider": self.provider, "model": self.model, "dimensions": self.dimensions}
