"""The vectors of a passage's readable units, computed once and stored with the passage.

An extractive answer scores every unit of its passages (sentences, list items,
table rows) by the cosine between the question's vector and the unit's, the
unit read with its document's title and section. Embedding those units while
a question waits was most of an answer's CPU; the units of a chunk and the
text embedded for each follow from the chunk's text and its document's title
alone, so they are embedded once per chunk and stored on it
(``Chunk.unit_vectors``). When is set by ``RAG["ingestion"]["unit_vectors"]``:

- ``after`` (the default): an ingestion run first stores and indexes its
  passages, which are searchable from then on at the raw model's pace, then
  embeds their units before it ends (about as much model time again as
  the passages); an answer that reads a passage before then embeds them itself;
- ``first-use``: never during ingestion; the first answer that reads a passage
  embeds its units and stores them (``unit_vectors_load(fill=...)``), so a
  unit is still embedded once per site, not per answer nor per process;
- ``ingestion``: beside the passages, before they are stored (the passages
  become searchable only once their units are embedded too).

What the answering side embeds for a chunk is its business: it registers a
reader in ``UNIT_READERS`` (this app imports no other). Each stored vector is
keyed by a digest of the embedding profile and the exact text embedded, so a
reader that now reads a unit otherwise, a renamed document or another model
simply finds no stored vector for that text and the answer embeds it then;
a stored vector is never used for any text but its own.

A blob: ``b"UV"``, a version byte, the dtype's code (``f``: float32), the
dimensions (uint16) and the count (uint32), then ``count`` 8-byte keys, then
``count x dimensions`` values. Float32, as the model returns them: stored as
float16 (half the bytes), the cosines moved by ~1e-5, enough to swap two
nearly tied sentences in one of the 134 golden cases; as float32 every golden
answer is the same as when the sentences are embedded while the question waits.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from collections_app.ingestion.types import EmbeddingProfile
from ragsite.registry import Registry

_MAGIC = b"UV\x01"
_HEADER = struct.Struct("<3scHI")  # magic + version, dtype code, dimensions, count
KEY_BYTES = 8
STORED_DTYPE = np.dtype(np.float32)
WHEN = ("after", "first-use", "ingestion")


class UnitReader(Protocol):
    """The texts embedded for the units of a passage of ``text`` from the document ``title``."""

    def __call__(self, text: str, *, title: str, location: str) -> list[str]: ...


UNIT_READERS: Registry[UnitReader] = Registry("unit reader")


@dataclass(frozen=True)
class ChunkUnits:
    """One chunk as its units are read: its text and its document's title and location."""

    text: str
    title: str
    location: str


def unit_texts(chunk: ChunkUnits) -> list[str]:
    """Every registered reader's texts for ``chunk``, each once, in order."""
    texts: dict[str, None] = {}
    for _, reader in UNIT_READERS.items():
        texts.update(dict.fromkeys(reader(chunk.text, title=chunk.title, location=chunk.location)))
    return list(texts)


def unit_key(profile: EmbeddingProfile, text: str) -> bytes:
    """The key of ``text``'s vector under ``profile`` (another model: another key)."""
    digest = hashlib.blake2b(digest_size=KEY_BYTES)
    digest.update(f"{profile.provider}\0{profile.model}\0{profile.dimensions}\0".encode())
    digest.update(text.encode())
    return digest.digest()


def unit_vectors_pack(
    profile: EmbeddingProfile, texts: Sequence[str], vectors: np.ndarray
) -> bytes:
    """``texts``' vectors (rows of ``vectors``, in order) as one blob."""
    if len(texts) != len(vectors):
        raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
    dims = int(profile.dimensions)
    values = np.ascontiguousarray(vectors, dtype=STORED_DTYPE).reshape(len(texts), dims)
    header = _HEADER.pack(_MAGIC, STORED_DTYPE.char.encode(), dims, len(texts))
    keys = b"".join(unit_key(profile, text) for text in texts)
    return header + keys + values.tobytes()


def unit_vectors_unpack(blob: bytes | memoryview | None) -> tuple[list[bytes], np.ndarray]:
    """The keys and the float32 vectors of a blob (none, or one of an unknown layout: none)."""
    data = bytes(blob or b"")
    if len(data) < _HEADER.size or not data.startswith(_MAGIC):
        return [], np.zeros((0, 0), np.float32)
    _, code, dims, count = _HEADER.unpack_from(data)
    dtype = np.dtype(code.decode())
    start = _HEADER.size + count * KEY_BYTES
    keys = [
        data[_HEADER.size + i * KEY_BYTES : _HEADER.size + (i + 1) * KEY_BYTES]
        for i in range(count)
    ]
    values = np.frombuffer(data, dtype=dtype, count=count * dims, offset=start)
    return keys, values.reshape(count, dims).astype(np.float32)


class _Encoder(Protocol):
    profile: EmbeddingProfile

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def unit_vectors_compute(embedder: _Encoder, chunks: Sequence[ChunkUnits]) -> list[bytes | None]:
    """Per chunk, the blob of its units' vectors (None: no reader, or no unit).

    All the chunks' unit texts are encoded in one call (the embedder sorts them by
    length and batches them by tokens); a text repeated across chunks once.
    """
    per_chunk = [unit_texts(chunk) for chunk in chunks]
    unique = list(dict.fromkeys(text for texts in per_chunk for text in texts))
    if not unique:
        return [None] * len(chunks)
    vectors = embedder.encode(unique)
    row = {text: i for i, text in enumerate(unique)}
    return [
        unit_vectors_pack(embedder.profile, texts, vectors[[row[t] for t in texts]])
        if texts
        else None
        for texts in per_chunk
    ]


def unit_vectors_when() -> str:
    """``RAG["ingestion"]["unit_vectors"]``: when a passage's units are embedded (see above)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    when = str(settings.RAG["ingestion"].get("unit_vectors", WHEN[0]))
    if when not in WHEN:
        raise ImproperlyConfigured(
            f"RAG_UNIT_VECTORS is {when!r}; it must be one of {', '.join(WHEN)}"
        )
    return when


def unit_vectors_load(*, chunk_ids: Iterable[str], fill: _Encoder) -> dict[bytes, np.ndarray]:
    """The unit vectors of these chunks, by key.

    A passage stored without them has its units embedded now with ``fill`` (the
    collection's embedder) and stored on it, so that the next answer finds
    them (a summary node has no units of its own to store). Only those are
    read with their text and document; the others give their vectors alone.
    """
    found: dict[bytes, np.ndarray] = {}
    for keys, vectors in unit_vectors_by_chunk(chunk_ids=chunk_ids, fill=fill).values():
        found.update(zip(keys, vectors, strict=True))
    return found


def unit_vectors_by_chunk(
    *, chunk_ids: Iterable[str], fill: _Encoder
) -> dict[str, tuple[list[bytes], np.ndarray]]:
    """Per chunk id, the keys and vectors of its units (as ``unit_vectors_load``
    reads them, passages stored without them filled now); a chunk without
    units (a summary node, an empty passage) is left out."""
    from collections_app.models import Chunk

    ids = list(dict.fromkeys(chunk_ids))
    if not ids:
        return {}
    found: dict[str, tuple[list[bytes], np.ndarray]] = {}
    missing: list[str] = []
    for pk, kind, blob in (
        Chunk.objects.filter(pk__in=ids).order_by().values_list("pk", "kind", "unit_vectors")
    ):
        if blob is not None:
            found[pk] = unit_vectors_unpack(blob)
        elif kind == Chunk.Kind.PASSAGE:
            missing.append(pk)
    if missing:
        rows = Chunk.objects.filter(pk__in=missing).values_list(
            "pk", "text", "source__title", "source__location"
        )
        passages = [
            (pk, ChunkUnits(text=text, title=title, location=location))
            for pk, text, title, location in rows
        ]
        for pk, made in unit_vectors_fill(fill, passages).items():
            found[pk] = unit_vectors_unpack(made)
    return {pk: units for pk, units in found.items() if len(units[0])}


def unit_vectors_fill(
    encoder: _Encoder, passages: Sequence[tuple[str, ChunkUnits]]
) -> dict[str, bytes]:
    """Embed the units of ``passages`` (chunk id, how its units are read) and store
    them on each chunk that has none yet; the blobs made, by chunk id."""
    from collections_app.models import Chunk

    made: dict[str, bytes] = {}
    blobs = unit_vectors_compute(encoder, [units for _, units in passages])
    for (pk, _), blob in zip(passages, blobs, strict=True):
        if blob is None:
            continue
        # Only where none is stored yet: a concurrent answer stored the same.
        Chunk.objects.filter(pk=pk, unit_vectors__isnull=True).update(unit_vectors=blob)
        made[pk] = blob
    return made
