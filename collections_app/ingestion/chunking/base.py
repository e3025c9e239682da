"""What every chunking strategy shares: options, token budget, and turning spans into drafts."""

from __future__ import annotations

import re
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
# Characters per token of budget that a chunk may hold at most (unless
# ``RAG["ingestion"]["chunk_max_chars"]`` says otherwise). Prose averages 4-5
# characters per wordpiece; a "word" longer than the tokenizer reads is one [UNK]
# however long it is, so without a bound in characters 10 MB of "x" is one chunk.
CHARS_PER_TOKEN_BOUND = 8
# Most characters of a contextual chunk header: with the 200-token budget it
# keeps header + chunk inside all-MiniLM-L6-v2's 256-token window.
HEADER_MAX_CHARS = 160
_HEADER_SEPARATORS = re.compile(r"^(?:\s*>\s*)+|(?:\s*>\s*)+$")


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
        self.max_chars_setting = _max_chars_setting()
        self.max_chars = self.max_chars_setting or CHARS_PER_TOKEN_BOUND * self.limit
        self.header_template = _header_template_setting()
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
        fingerprint: dict[str, Any] = {
            "strategy": self.name,
            "version": self.version,
            "options": dict(self.options),
        }
        if self.max_chars_setting:
            # The default bound follows the token budget, which is in the options.
            fingerprint["max_chars"] = self.max_chars_setting
        if self.header_template:
            # What is embedded changes with the header: every source is embedded again.
            fingerprint["header"] = self.header_template
        return fingerprint

    def header(self, *, title: str, section_path: Sequence[str], text: str) -> str:
        """The contextual header of a chunk, from the configured template ("" when none).

        A title or section the chunk already starts with (the document's first
        lines, a section's heading) is left out, and an empty part is dropped with its ``>``
        separator; the header is at most ``HEADER_MAX_CHARS`` characters.
        """
        if not self.header_template:
            return ""
        # A part the chunk itself starts with (its first heading or line) adds nothing.
        lead = " ".join(text.lstrip().lstrip("#").split())
        title = " ".join(title.split())
        section = " > ".join(" ".join(s.split()) for s in section_path if s.strip())
        if section == title or lead.startswith(section):
            section = ""
        if lead.startswith(title):
            title = ""
        if not title and not section:
            return ""
        lines = [
            _HEADER_SEPARATORS.sub("", line).strip()
            for line in self.header_template.format_map({"title": title, "section": section})
            .replace("\\n", "\n")
            .split("\n")
        ]
        body = "\n".join(line for line in lines if line)[:HEADER_MAX_CHARS].strip()
        return f"{body}\n" if body else ""

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
                prefix, prefix_tokens = span.prefix, span.prefix_tokens
                if len(prefix) > self.max_chars // 2:
                    prefix, prefix_tokens = "", 0
                room = self.max_chars - (len(prefix) + 2 if prefix else 0)
                for start, end, tokens in self._within_chars(doc.text, span, room):
                    body = doc.text[start:end]
                    metadata: dict[str, object] = {"strategy": self.name, **span.metadata}
                    text = body
                    if prefix:
                        text = f"{prefix}\n\n{body}"
                        metadata["text_offset"] = len(prefix) + 2
                    section_path = structure.section_path_at(start)
                    drafts.append(
                        ChunkDraft(
                            text=text,
                            header=self.header(
                                title=doc.title, section_path=section_path, text=text
                            ),
                            ordinal=len(drafts),
                            char_start=start,
                            char_end=end,
                            page=segment.page,
                            section_path=section_path,
                            token_count=tokens + prefix_tokens,
                            metadata=metadata,
                        )
                    )
        return drafts

    def _within_chars(self, text: str, span: ChunkSpan, room: int) -> list[tuple[int, int, int]]:
        """``(start, end, tokens)`` of ``span``, cut so that no part exceeds ``room`` characters.

        Cuts fall on the last whitespace of the second half of each window, else exactly
        at the bound (a run without whitespace); the parts are stripped, so offsets stay
        exact, and recounted in the model's tokens.
        """
        if span.end - span.start <= room:
            return [(span.start, span.end, span.tokens)]
        parts: list[tuple[int, int]] = []
        position = span.start
        while position < span.end:
            while position < span.end and text[position].isspace():
                position += 1
            if position >= span.end:
                break
            stop = min(position + room, span.end)
            if stop < span.end:
                cut = max(
                    text.rfind(" ", position + room // 2, stop),
                    text.rfind("\n", position + room // 2, stop),
                )
                if cut > position:
                    stop = cut
            end = stop
            while end > position and text[end - 1].isspace():
                end -= 1
            if end > position:
                parts.append((position, end))
            position = stop
        counts = self.counter.count_many([text[start:end] for start, end in parts])
        return [
            (start, end, tokens)
            for (start, end), tokens in zip(parts, counts, strict=True)
            if tokens > 0
        ]

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


def _max_chars_setting() -> int:
    """``RAG["ingestion"]["chunk_max_chars"]``, or 0: derive the bound from the budget."""
    from django.conf import settings

    value = settings.RAG.get("ingestion", {}).get("chunk_max_chars") or 0
    try:
        chars = int(value)
    except (TypeError, ValueError):
        raise InvalidChunkingOptions(
            f"RAG_CHUNK_MAX_CHARS must be a whole number of characters, not {value!r}"
        ) from None
    if chars and chars < 64:
        raise InvalidChunkingOptions(f"RAG_CHUNK_MAX_CHARS must be at least 64, not {chars}")
    return max(chars, 0)


def _unknown(name: str, known: list[str]) -> UnknownChunker:
    return UnknownChunker(f"unknown chunking strategy {name!r}; known: {', '.join(known)}")


CHUNKERS: Registry[type[Chunker]] = Registry("chunking strategy", unknown=_unknown)
"""Strategy classes by name; each registers itself where it is defined."""


def _header_template_setting() -> str:
    """``RAG["ingestion"]["chunk_header"]``, checked: only {title} and {section} are known."""
    from django.conf import settings

    template = str(settings.RAG.get("ingestion", {}).get("chunk_header") or "")
    try:
        template.format_map({"title": "", "section": ""})
    except (KeyError, ValueError, IndexError) as exc:
        raise InvalidChunkingOptions(
            f"RAG['ingestion']['chunk_header'] {template!r} is not a valid template "
            f"({exc!r}); it may name {{title}} and {{section}}"
        ) from None
    return template
