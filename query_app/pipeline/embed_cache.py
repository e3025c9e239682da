"""Question embeddings: a bounded cache per process, and micro-batches of concurrent questions.

Retrieval embeds every probe (the question, or its variants) with the
collection's model. The same questions recur (the FAQ of a site, a page
re-asked, evaluation runs), so their vectors are kept in a least-recently-used
cache of ``RAG_QUESTION_CACHE_ENTRIES`` entries (0 turns it off) keyed by the
embedding profile (provider, model, dimensions) and the exact text: a
collection reindexed with another model asks for vectors under another profile
and never gets the old model's. ``question_cache_clear`` empties it.

The extractive answer's sentences have their vectors stored with their chunks
(``collections_app.embedding.unit_vectors``): ``cached_encoder`` reads them,
stores those of a passage read for the first time, and embeds only the rest.

The misses of threads that embed at the same time are encoded together: the
first caller runs the model on everything waiting (up to ``MAX_BATCH_TEXTS``
texts), and while it does, later callers queue; when it is done, the first of
them leads the next batch. A caller alone pays no wait, and each gets back the
vectors of its own texts in its own order.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collections_app.embedding import SMALL_BATCH, Embedder
from collections_app.embedding.unit_vectors import unit_key, unit_vectors_load

# One model call at most this many texts: the embedder encodes batches this small
# on one thread, the cheapest way for a handful of short questions.
MAX_BATCH_TEXTS = SMALL_BATCH
DEFAULT_ENTRIES = 4096


def _cache_size() -> int:
    from django.conf import settings

    limits = getattr(settings, "RAG", {}).get("query_limits", {})
    return int(limits.get("question_cache_entries", DEFAULT_ENTRIES))


class VectorLRU:
    """At most ``size`` vectors by key, the least recently used dropped first (thread-safe)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, ...]) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return vector

    def put(self, key: tuple[str, ...], vector: np.ndarray) -> None:
        if self.size <= 0:
            return
        # Read-only: a caller that changed its copy would change everyone's.
        vector = np.array(vector, dtype=np.float32)
        vector.setflags(write=False)
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Request:
    texts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    vectors: np.ndarray | None = None
    error: BaseException | None = None
    lead: bool = False  # woken to run the next batch, not served


class MicroBatcher:
    """Concurrent ``encode`` calls served by as few model calls as they fit in.

    No timer: a caller that finds the model idle encodes at once (its batch is
    whatever is waiting, itself first); callers arriving meanwhile wait for the
    next batch, which the first of them runs.
    """

    def __init__(
        self, encode: Callable[[Sequence[str]], np.ndarray], *, max_texts: int = MAX_BATCH_TEXTS
    ):
        self._encode = encode
        self.max_texts = max_texts
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._busy = False
        self.batches = 0  # model calls made
        self.requests = 0  # encode calls served

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        request = _Request(list(texts))
        with self._lock:
            self._pending.append(request)
            lead = not self._busy
            self._busy = True
        if not lead:
            request.done.wait()
            if not request.lead:
                return self._result(request)
        self._run_batch()
        return self._result(request)

    def waiting(self) -> int:
        """Callers queued for the next batch."""
        with self._lock:
            return len(self._pending)

    def _result(self, request: _Request) -> np.ndarray:
        if request.error is not None:
            raise request.error
        assert request.vectors is not None
        return request.vectors

    def _run_batch(self) -> None:
        with self._lock:
            # The leader's own request is first; then as many as fit.
            batch: list[_Request] = []
            count = 0
            while self._pending and (
                not batch or count + len(self._pending[0].texts) <= self.max_texts
            ):
                count += len(self._pending[0].texts)
                batch.append(self._pending.pop(0))
        try:
            unique = list(dict.fromkeys(t for r in batch for t in r.texts))
            encoded = np.asarray(self._encode(unique), dtype=np.float32)
            row = {text: i for i, text in enumerate(unique)}
            for r in batch:
                r.vectors = encoded[[row[t] for t in r.texts]].reshape(len(r.texts), -1)
        except BaseException as exc:  # every caller of the batch sees the failure
            for r in batch:
                r.error = exc
        finally:
            with self._lock:
                self.batches += 1
                self.requests += len(batch)
                if self._pending:
                    successor = self._pending[0]
                    successor.lead = True
                    successor.done.set()
                else:
                    self._busy = False
            for r in batch:
                if not r.lead:
                    r.done.set()


_cache: VectorLRU | None = None
_batchers: dict[int, MicroBatcher] = {}
_setup_lock = threading.Lock()


def question_cache() -> VectorLRU:
    """This process's question-vector cache (sized from the settings on first use)."""
    global _cache
    with _setup_lock:
        if _cache is None:
            _cache = VectorLRU(_cache_size())
        return _cache


def question_cache_clear() -> None:
    """Forget every cached question vector (and the size, read again on next use)."""
    global _cache
    with _setup_lock:
        _cache = None


def _batcher(embedder: Embedder) -> MicroBatcher:
    with _setup_lock:
        batcher = _batchers.get(id(embedder))
        if batcher is None or batcher._encode != embedder.encode:
            batcher = _batchers[id(embedder)] = MicroBatcher(embedder.encode)
        return batcher


_serials: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_next_serial = itertools.count(1)


def profile_key(embedder: Embedder) -> tuple[str, str, str, str]:
    """The embedding profile a vector belongs to, and which loaded model made it.

    The profile names the vector space; the serial tells apart two models
    loaded under one name (a model directory replaced, settings changed), so
    vectors never outlive the model that made them.
    """
    p = embedder.profile
    with _setup_lock:
        serial = _serials.get(embedder)
        if serial is None:
            serial = _serials[embedder] = next(_next_serial)
    return (p.provider, p.model, str(p.dimensions), str(serial))


@dataclass(frozen=True)
class QuestionVectors:
    vectors: np.ndarray  # one row per text, in order
    cached: int  # how many rows came from the cache


def question_vectors(embedder: Embedder, texts: Sequence[str]) -> QuestionVectors:
    """The vectors of ``texts`` under ``embedder``'s profile: cached, or encoded in a micro-batch."""
    cache = question_cache()
    prefix = profile_key(embedder)
    found: dict[str, np.ndarray] = {}
    for text in dict.fromkeys(texts):
        vector = cache.get((*prefix, text))
        if vector is not None:
            found[text] = vector
    cached = sum(1 for t in texts if t in found)
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        encoded = _batcher(embedder).encode(missing)
        for text, vector in zip(missing, encoded, strict=True):
            cache.put((*prefix, text), vector)
            found[text] = vector
    if not texts:
        return QuestionVectors(np.zeros((0, embedder.profile.dimensions), np.float32), 0)
    return QuestionVectors(np.vstack([found[t] for t in texts]), cached)


class _BatchedEncoder:
    """``embedder`` as ``unit_vectors_load`` fills with it: through the micro-batcher, counted."""

    def __init__(self, embedder: Embedder) -> None:
        self.profile = embedder.profile
        self._batcher = _batcher(embedder)
        self.encoded = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded += len(texts)
        return self._batcher.encode(list(texts))


class CachedEncoder:
    """``embedder.encode`` that takes the vectors already made from where they are kept.

    For the extractive answer's scoring, which embeds the question with the
    candidate sentences: the question's vector comes from retrieval's cache,
    and a sentence's from the vectors stored with its chunk (``chunk_ids``:
    the passages'; read once, on the first call that needs them; a passage
    without them has its units embedded then and stored). Only the rest (web
    pages, a sentence read otherwise than the stored units) reaches the model
    on a later call, through the micro-batcher. Sentences are not added to the
    question cache (their scorer keeps its own). ``stored`` counts the texts
    served from stored vectors, ``encoded`` every text the model embedded.
    """

    def __init__(self, embedder: Embedder, *, chunk_ids: Sequence[str] = ()) -> None:
        self.embedder = embedder
        self.chunk_ids = [c for c in chunk_ids if c]
        self._cache = question_cache()
        self._prefix = profile_key(embedder)
        self._units: dict[bytes, np.ndarray] | None = None
        self.stored = 0
        self.encoded = 0

    def _stored_vector(self, text: str) -> np.ndarray | None:
        if not self.chunk_ids:
            return None
        if self._units is None:
            # A passage without stored units gets them now, through the
            # micro-batcher, and keeps them for the next answer.
            filler = _BatchedEncoder(self.embedder)
            self._units = unit_vectors_load(chunk_ids=self.chunk_ids, fill=filler)
            self.encoded += filler.encoded
        return self._units.get(unit_key(self.embedder.profile, text))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        found: dict[str, np.ndarray] = {}
        for text in dict.fromkeys(texts):
            vector = self._cache.get((*self._prefix, text))
            if vector is None and (vector := self._stored_vector(text)) is not None:
                self.stored += 1
            if vector is not None:
                found[text] = vector
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, _batcher(self.embedder).encode(missing), strict=True))
            self.encoded += len(missing)
        if not texts:
            return np.zeros((0, self.embedder.profile.dimensions), np.float32)
        return np.vstack([found[t] for t in texts])


def cached_encoder(embedder: Embedder, *, chunk_ids: Sequence[str] = ()) -> CachedEncoder:
    """An encoder for the extractive answer over the passages ``chunk_ids`` (see ``CachedEncoder``)."""
    return CachedEncoder(embedder, chunk_ids=chunk_ids)
