"""Batches by token length: sort, size each batch by a token budget, pad, pipeline.

Encoding a batch costs about its rows times its longest passage (padding included),
so a batch of one long passage and 31 short ones pays for 32 long ones.
Passages are tokenized once, sorted longest first within a window and cut into
batches whose rows times padded length stays within a token budget (short passages
travel in larger batches). Callers put the vectors back in input order with
each batch's ``indices``.

``prefetched`` runs the tokenizing side on a thread of its own feeding a small
queue, so the model never waits for the tokenizer (the Rust tokenizer releases
the GIL while it works).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

# Passages tokenized at once before their batches are planned: large enough that
# sorting finds passages of like length, small enough that the first batch
# reaches the model soon and memory stays bounded.
WINDOW = 4096


@dataclass(frozen=True)
class TokenBatch:
    """Rows of one batch, padded to the batch's longest passage."""

    # Positions of the rows in the caller's list of texts.
    indices: np.ndarray
    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.indices)


def plan_batches(lengths: Sequence[int], *, max_tokens: int, max_rows: int) -> list[np.ndarray]:
    """Indices into ``lengths``, longest first, in batches of at most ``max_tokens``.

    A batch's cost is its rows times its longest length; a passage longer than
    the whole budget still gets a batch of its own.
    """
    sizes = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-sizes, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        longest = max(int(sizes[order[start]]), 1)
        rows = max(1, min(max_rows, max_tokens // longest))
        batches.append(order[start : start + rows])
        start += rows
    return batches


def pad_batch(encodings: Sequence[Any], indices: np.ndarray, *, pad_id: int) -> TokenBatch:
    """One batch of Rust tokenizer encodings as padded int64 arrays."""
    rows = [encodings[i] for i in indices]
    width = max(len(e.ids) for e in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(rows), width), dtype=np.int64)
    token_type_ids = np.zeros((len(rows), width), dtype=np.int64)
    for r, e in enumerate(rows):
        n = len(e.ids)
        input_ids[r, :n] = e.ids
        attention_mask[r, :n] = 1
        token_type_ids[r, :n] = e.type_ids
    return TokenBatch(indices, input_ids, attention_mask, token_type_ids)


def length_batches(
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_tokens: int,
    max_rows: int,
    pad_id: int,
    window: int = WINDOW,
) -> Iterator[TokenBatch]:
    """Token batches of ``texts``, sorted by length within each window of passages.

    ``tokenizer`` is a ``tokenizers.Tokenizer`` with truncation at the model's
    sequence length and no padding; ``indices`` are positions in ``texts``.
    """
    for offset in range(0, len(texts), window):
        part = list(texts[offset : offset + window])
        encodings = tokenizer.encode_batch(part)
        lengths = [len(e.ids) for e in encodings]
        for indices in plan_batches(lengths, max_tokens=max_tokens, max_rows=max_rows):
            batch = pad_batch(encodings, indices, pad_id=pad_id)
            yield TokenBatch(
                batch.indices + offset,
                batch.input_ids,
                batch.attention_mask,
                batch.token_type_ids,
            )


def prefetched(items: Iterator[T], *, depth: int = 4) -> Iterator[T]:
    """``items``, produced on a thread of its own up to ``depth`` ahead of the consumer.

    An exception in the producer is raised in the consumer; a consumer that
    stops early (or fails) stops the producer before this generator returns.
    """
    slots: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
        except BaseException as exc:
            put((False, exc))
            return
        put((False, None))

    producer = threading.Thread(target=produce, name="embedding-tokenizer", daemon=True)
    producer.start()
    try:
        while True:
            more, item = slots.get()
            if not more:
                if item is not None:
                    raise item
                return
            yield item
    finally:
        stop.set()
        producer.join()
