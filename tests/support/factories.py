"""Collections with real chunks, written straight through the ORM.

Chunks are embedded with the project's embedder (all-MiniLM-L6-v2, loaded
once per process), the collection records that embedding profile, gets its
partial HNSW index and fresh term statistics: exactly the state ingestion
leaves behind, without depending on the ingestion pipeline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import factory
import numpy as np
from django.contrib.auth.models import AbstractBaseUser

from collections_app.embedding import get_embedder
from collections_app.models import Chunk, Collection, CollectionMembership, Source
from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure

_VECTORS: dict[str, np.ndarray] = {}


class CollectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Collection

    name = factory.Sequence(lambda n: f"Collection {n}")
    slug = factory.Sequence(lambda n: f"collection-{n}")


class SourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Source

    collection = factory.SubFactory(CollectionFactory)
    location = factory.Sequence(lambda n: f"/docs/doc-{n}.md")
    origin = Source.Origin.PATH
    kind = "markdown"
    status = Source.Status.READY


@dataclass
class Doc:
    """One source and the passages it is cut into."""

    location: str
    chunks: Sequence[str]
    title: str = ""
    pages: Sequence[int | None] = field(default_factory=list)


def embed(texts: Sequence[str]) -> list[np.ndarray]:
    """Embeddings of ``texts`` (memoised: the same text is embedded once per process)."""
    missing = [t for t in dict.fromkeys(texts) if t not in _VECTORS]
    if missing:
        for text, vector in zip(missing, get_embedder().encode(missing), strict=True):
            _VECTORS[text] = vector
    return [_VECTORS[t] for t in texts]


def indexed_collection(
    docs: Iterable[Doc | str],
    *,
    slug: str | None = None,
    members: dict[AbstractBaseUser, str] | None = None,
    embed_chunks: bool = True,
    index_version: int = 1,
) -> Collection:
    """A collection holding ``docs`` (a plain string is a one-chunk source), ready to query."""
    collection = CollectionFactory(**({"slug": slug, "name": slug} if slug else {}))
    chunks_add(collection, docs, embed_chunks=embed_chunks)
    Collection.objects.filter(pk=collection.pk).update(index_version=index_version)
    collection.refresh_from_db()
    for user, role in (members or {}).items():
        CollectionMembership.objects.create(collection=collection, user=user, role=role)
    return collection


def chunks_add(
    collection: Collection, docs: Iterable[Doc | str], *, embed_chunks: bool = True
) -> None:
    """Write the docs' sources and chunks, then refresh the index and term statistics."""
    docs = [
        d if isinstance(d, Doc) else Doc(location=f"/docs/{_digest(d)[:8]}.md", chunks=[d])
        for d in docs
    ]
    texts = [text for doc in docs for text in doc.chunks]
    vectors = iter(embed(texts)) if embed_chunks else None
    rows: list[Chunk] = []
    for doc in docs:
        body = "\n\n".join(doc.chunks)
        source = SourceFactory(
            collection=collection,
            location=doc.location,
            title=doc.title,
            text=body,
            content_hash=_digest(body),
            chunk_count=len(doc.chunks),
        )
        offset = 0
        for ordinal, text in enumerate(doc.chunks):
            page = doc.pages[ordinal] if ordinal < len(doc.pages) else None
            rows.append(
                Chunk(
                    id=_digest(f"{doc.location}|{source.content_hash}|{ordinal}")[:40],
                    collection=collection,
                    source=source,
                    source_hash=source.content_hash,
                    ordinal=ordinal,
                    text=text,
                    char_start=offset,
                    char_end=offset + len(text),
                    page=page,
                    token_count=len(text.split()),
                    embedding=next(vectors).tolist() if vectors is not None else None,
                )
            )
            offset += len(text) + 2
    if embed_chunks:
        profile = get_embedder().profile
        collection.embedding_provider = profile.provider
        collection.embedding_model = profile.model
        collection.embedding_dimensions = profile.dimensions
        collection.save(
            update_fields=["embedding_provider", "embedding_model", "embedding_dimensions"]
        )
        # The index first: the rows are then indexed as they are written.
        vector_index_ensure(collection_id=collection.pk, dimensions=profile.dimensions)
    Chunk.objects.bulk_create(rows)
    collection_term_stats_refresh(collection=collection)


def chunks_replace(collection: Collection, docs: Iterable[Doc | str]) -> None:
    """Re-ingestion in miniature: new chunks replace the old and index_version is bumped."""
    Source.objects.filter(collection=collection).delete()
    chunks_add(collection, docs)
    Collection.objects.filter(pk=collection.pk).update(index_version=collection.index_version + 1)
    collection.refresh_from_db()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
