"""Token counting in the embedding model's own tokens, fast enough for the hot path.

Chunk budgets are in the model's wordpieces, so every piece of text a chunker
weighs is tokenised — once: pieces are counted in one batched call of the
model's fast (Rust) tokenizer and chunk sizes are sums of piece counts. Sums
are exact when pieces meet at whitespace or punctuation, because WordPiece
pre-tokenisation splits there anyway; chunkers only join pieces at such
junctions (see ``joinable``). Embedders without a fast tokenizer fall back to
``Embedder.count_tokens`` per piece.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import unicodedata
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collections_app.embedding import Embedder

_WORD = re.compile(r"\S+")
_SPACE = re.compile(r"\s")
_PRIVATE_TOKENIZERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _is_punctuation(ch: str) -> bool:
    # The same test BERT's pre-tokeniser uses to split punctuation off words.
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def joinable(text: str, left_end: int, right_start: int) -> bool:
    """Whether two pieces meeting here can share a chunk with additive token counts."""
    if right_start > left_end:
        return True  # pieces are stripped, so a gap is whitespace
    if left_end <= 0 or right_start >= len(text):
        return True
    return _is_punctuation(text[left_end - 1]) or _is_punctuation(text[right_start])


@dataclass(frozen=True)
class Window:
    """Characters [start, end) holding ``tokens`` tokens."""

    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class TokenIndex:
    """Where the tokens of some spans of a text lie, so sub-spans are counted by lookup.

    With a fast tokenizer a unit is one token; without one, a unit is a word
    weighted by its token count.
    """

    starts: np.ndarray
    ends: np.ndarray
    cum: np.ndarray  # cum[i]: tokens before unit i; one longer than starts
    breakable: np.ndarray  # a cut before unit i falls on whitespace

    def count_spans(self, spans: Sequence[tuple[int, int]]) -> list[int]:
        """Tokens inside each span; exact for spans cut at whitespace or punctuation."""
        if not spans:
            return []
        bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        lo = np.searchsorted(self.starts, bounds[:, 0], side="left")
        hi = np.searchsorted(self.starts, bounds[:, 1], side="left")
        return (self.cum[hi] - self.cum[lo]).tolist()

    def merged(self, other: TokenIndex) -> TokenIndex:
        """One index over the (disjoint) spans of both."""
        if len(other.starts) == 0:
            return self
        if len(self.starts) == 0:
            return other
        order = np.argsort(np.concatenate([self.starts, other.starts]), kind="stable")
        weights = np.concatenate([np.diff(self.cum), np.diff(other.cum)])[order]
        return TokenIndex(
            starts=np.concatenate([self.starts, other.starts])[order],
            ends=np.concatenate([self.ends, other.ends])[order],
            cum=np.concatenate([[0], np.cumsum(weights)]),
            breakable=np.concatenate([self.breakable, other.breakable])[order],
        )

    def unit_range(self, start: int, end: int) -> tuple[int, int]:
        """Indices [lo, hi) of the units that start inside [start, end)."""
        lo = int(np.searchsorted(self.starts, start, side="left"))
        hi = int(np.searchsorted(self.starts, end, side="left"))
        return lo, hi


def clean_cut(text: str, pos: int) -> bool:
    """Whether cutting the text at ``pos`` leaves every token on one side intact."""
    if pos <= 0 or pos >= len(text):
        return True
    left, right = text[pos - 1], text[pos]
    return left.isspace() or right.isspace() or _is_punctuation(left) or _is_punctuation(right)


class TokenCounter:
    """Counts and cuts text in the tokens of one embedder's model."""

    def __init__(self, embedder: Embedder):
        self._embedder = embedder
        self._fast = _private_fast_tokenizer(embedder)
        self._word_counts: dict[str, int] = {}

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` (no special tokens), in one batch."""
        if not texts:
            return []
        if self._fast is None:
            return [self._embedder.count_tokens(t) for t in texts]
        parts: list[str] = []
        owners: list[int] = []
        for number, text in enumerate(texts):
            for s, e in _slices(text, 0, len(text)):
                parts.append(text[s:e])
                owners.append(number)
        counts = [0] * len(texts)
        for owner, enc in zip(
            owners, self._fast.encode_batch(parts, add_special_tokens=False), strict=True
        ):
            counts[owner] += len(enc)
        return counts

    def count(self, text: str) -> int:
        """Token count of one text."""
        return self.count_many([text])[0]

    def index(self, text: str, spans: Sequence[tuple[int, int]]) -> TokenIndex:
        """Token positions of ``spans`` (ordered, disjoint, separated by whitespace)."""
        if self._fast is not None:
            slices = [piece for s, e in spans for piece in _slices(text, s, e)]
            encodings = self._fast.encode_batch(
                [text[s:e] for s, e in slices], add_special_tokens=False
            )
            starts_parts, ends_parts = [], []
            for (span_start, _), enc in zip(slices, encodings, strict=True):
                if len(enc) == 0:
                    continue
                flat = itertools.chain.from_iterable(enc.offsets)
                offsets = np.fromiter(flat, dtype=np.int64, count=2 * len(enc)).reshape(-1, 2)
                offsets += span_start
                starts_parts.append(offsets[:, 0])
                ends_parts.append(offsets[:, 1])
            if not starts_parts:
                return _empty_index()
            starts = np.concatenate(starts_parts)
            ends = np.concatenate(ends_parts)
            weights = np.ones(len(starts), dtype=np.int64)
            breakable = np.ones(len(starts), dtype=bool)
            breakable[1:] = starts[1:] > ends[:-1]
        else:
            words = [m.span() for s, e in spans for m in _WORD.finditer(text, s, e)]
            if not words:
                return _empty_index()
            starts = np.array([w[0] for w in words], dtype=np.int64)
            ends = np.array([w[1] for w in words], dtype=np.int64)
            weights = np.array([self._word_tokens(text[s:e]) for s, e in words], dtype=np.int64)
            breakable = np.ones(len(starts), dtype=bool)
        cum = np.concatenate([[0], np.cumsum(weights)])
        return TokenIndex(starts=starts, ends=ends, cum=cum, breakable=breakable)

    def windows(
        self,
        text: str,
        index: TokenIndex,
        *,
        start: int,
        end: int,
        size: int,
        overlap: int = 0,
    ) -> list[Window]:
        """Deterministic windows of at most ``size`` tokens over [start, end) of ``text``.

        Windows end at word boundaries; a word longer than ``size`` tokens is
        cut inside, and such windows are recounted so that they still fit.
        Consecutive windows share about ``overlap`` tokens.
        """
        lo, hi = index.unit_range(start, end)
        if hi <= lo:
            return []
        # Views of this range only: a document has one index and many ranges.
        starts, ends = index.starts[lo:hi], index.ends[lo:hi]
        cum = index.cum[lo : hi + 1]
        breakable = index.breakable[lo:hi].copy()
        breakable[0] = True  # the start of the range is a boundary already
        break_at = np.flatnonzero(breakable)
        n = hi - lo
        out: list[Window] = []
        b = 0
        previous_end = 0
        while b < n:
            e = int(np.searchsorted(cum, cum[b] + size, side="right")) - 1
            e = min(max(e, b + 1), n)
            if e < n and not breakable[e]:
                # Back to the last word boundary, unless that would end this
                # window where the last one ended (a run of text without
                # whitespace longer than a window): then cut inside the run.
                k = int(break_at[np.searchsorted(break_at, e, side="right") - 1])
                if k > max(b, previous_end):
                    e = k
            while True:
                w_start, w_end = int(starts[b]), int(ends[e - 1])
                tokens = int(cum[e] - cum[b])
                if breakable[b] and (e == n or breakable[e]) and tokens <= size:
                    out.append(Window(w_start, w_end, tokens))
                    break
                # A cut inside a word: count what the model would see.
                tokens = self.count(text[w_start:w_end])
                if tokens <= size:
                    out.append(Window(w_start, w_end, tokens))
                    break
                if e - b > 1:
                    e = max(b + 1, e - max(1, tokens - size))
                    continue
                # One unit heavier than the budget: a long word without a fast
                # tokenizer to cut it by; halve it by characters until it fits.
                out.extend(self._split_chars(text, w_start, w_end, size))
                break
            if e >= n:
                break
            previous_end = e
            nb = e
            if overlap > 0:
                nb = max(int(np.searchsorted(cum, cum[e] - overlap, side="left")), b + 1)
                later = break_at[np.searchsorted(break_at, nb, side="left") :]
                if len(later) and later[0] < e:
                    nb = int(later[0])  # start the overlap at a word boundary
            b = nb
        return out

    def _split_chars(self, text: str, start: int, end: int, size: int) -> list[Window]:
        tokens = self.count(text[start:end])
        if tokens <= size or end - start <= 1:
            return [Window(start, end, tokens)]
        middle = (start + end) // 2
        return self._split_chars(text, start, middle, size) + self._split_chars(
            text, middle, end, size
        )

    def _word_tokens(self, word: str) -> int:
        count = self._word_counts.get(word)
        if count is None:
            count = self._word_counts[word] = self._embedder.count_tokens(word)
        return count


# The Rust tokenizer parallelises across the texts of a batch, and a single
# long text is slower per character than many short ones; long texts are
# tokenised in slices cut at whitespace, which WordPiece splits at anyway.
_SLICE_CHARS = 4096


def _slices(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) cut at whitespace into slices of about _SLICE_CHARS characters."""
    if end - start <= _SLICE_CHARS:
        return [(start, end)]
    out = []
    pos = start
    while end - pos > _SLICE_CHARS:
        limit = pos + _SLICE_CHARS
        cut = text.rfind("\n", pos + 1, limit)
        if cut < 0:
            cut = text.rfind(" ", pos + 1, limit)
        if cut < 0:
            # No whitespace in a whole slice: cut at the next whitespace instead.
            match = _SPACE.search(text, limit, end)
            if match is None:
                break
            cut = match.start()
        out.append((pos, cut))
        pos = cut
    out.append((pos, end))
    return out


def _empty_index() -> TokenIndex:
    empty = np.zeros(0, dtype=np.int64)
    return TokenIndex(
        starts=empty, ends=empty, cum=np.zeros(1, dtype=np.int64), breakable=np.zeros(0, bool)
    )


def _private_fast_tokenizer(embedder: Embedder) -> Any | None:
    """A private copy of the embedder's Rust tokenizer, or None when it has none.

    A copy, because the transformers wrapper leaves truncation switched on in
    the shared Rust tokenizer after every encode; counts from it would stop at
    the model's sequence length.
    """
    tokenizer = getattr(embedder, "tokenizer", None)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(tokenizer, "is_fast", False):
        return None
    try:
        cached = _PRIVATE_TOKENIZERS.get(embedder)
    except TypeError:  # an embedder that cannot be weakly referenced
        cached = None
    if cached is not None:
        return cached
    from tokenizers import Tokenizer

    private = Tokenizer.from_str(backend.to_str())
    private.no_truncation()
    private.no_padding()
    with contextlib.suppress(TypeError):  # an embedder that cannot be weakly referenced
        _PRIVATE_TOKENIZERS[embedder] = private
    return private
