"""Who writes a summary node: the chat model when one is configured, else centroid sentences.

A summarizer is made per run by a factory taking the collection's embedder;
a factory returns None when it cannot work here (no chat model configured),
and the next one in :data:`PREFERENCE` is tried. The chat summarizer is
registered by query_app (which owns the chat client), so this app imports no
other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from collections_app.embedding import Embedder
from ragsite.registry import Registry


@dataclass(frozen=True)
class SummaryInput:
    """What one node summarises: texts (passages or child summaries) and their vectors."""

    title: str  # the document's title
    section: tuple[str, ...]  # the section path; () for the whole document
    level: str  # section | document
    texts: Sequence[str]
    vectors: np.ndarray  # one row per text, unit length
    centre: np.ndarray  # unit mean of the node's passages' vectors


class Summarizer(Protocol):
    name: str

    def summarize(self, node: SummaryInput) -> str:
        """The node's summary text ("" when there is nothing to say)."""
        ...


SummarizerFactory = Callable[[Embedder], "Summarizer | None"]
SUMMARIZERS: Registry[SummarizerFactory] = Registry("summarizer")
# "auto" tries these in order.
PREFERENCE = ("chat", "centroid")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
# Texts nearest the centre whose sentences are candidates, and at most this many
# sentences encoded per node: the offline tree costs a bounded share of ingestion.
NEAREST_TEXTS = 3
MAX_CANDIDATE_SENTENCES = 24
MIN_WORDS = 5


def sentences_of(text: str) -> list[str]:
    """The sentences of ``text`` (a plain split on end punctuation), whitespace flattened."""
    flat = " ".join(text.split())
    return [s.strip() for s in _SENTENCE_END.split(flat) if s.strip()]


class CentroidSummarizer:
    """Offline: the sentences closest to the node's mean embedding, in text order.

    Candidate sentences come from the texts nearest the mean (the passages, or
    for a document the summaries of its sections), so only a few dozen short
    sentences are encoded per node.
    """

    name = "centroid"

    def __init__(self, embedder: Embedder, *, sentences: dict[str, int] | None = None):
        self.embedder = embedder
        self.sentences = sentences or {"section": 2, "document": 3}

    def summarize(self, node: SummaryInput) -> str:
        if not node.texts:
            return ""
        nearest = np.argsort(-(node.vectors @ node.centre))[:NEAREST_TEXTS]
        candidates: list[tuple[int, int, str]] = []  # (text index, position, sentence)
        for index in sorted(int(i) for i in nearest):
            for position, sentence in enumerate(sentences_of(node.texts[index])):
                if len(sentence.split()) >= MIN_WORDS:
                    candidates.append((index, position, sentence))
        candidates = candidates[:MAX_CANDIDATE_SENTENCES]
        if not candidates:
            return " ".join(node.texts[int(nearest[0])].split())[:600]
        vectors = _unit(self.embedder.encode([c[2] for c in candidates]))
        best = np.argsort(-(vectors @ node.centre))[: self.sentences.get(node.level, 2)]
        chosen = sorted(candidates[int(i)] for i in best)
        return " ".join(dict.fromkeys(sentence for _, _, sentence in chosen))


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


SUMMARIZERS.add("centroid", CentroidSummarizer)


def summarizer_for(embedder: Embedder, name: str = "auto") -> Summarizer:
    """The summarizer named ``name``, or for "auto" the first of PREFERENCE that can work."""
    if name != "auto":
        made = SUMMARIZERS.get(name)(embedder)
        if made is None:
            raise ValueError(f"the {name!r} summarizer cannot work here (is it configured?)")
        return made
    for candidate in PREFERENCE:
        if candidate in SUMMARIZERS:
            made = SUMMARIZERS.get(candidate)(embedder)
            if made is not None:
                return made
    return CentroidSummarizer(embedder)
