"""What a collection holds: its sources, their retrievable chunks, and the manifest.

A source is one document (a server path, a URL or an upload); its chunks are the
passages retrieval searches, with their embeddings and full-text vectors; a manifest
entry records what each source was last ingested from, and with which settings.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import VectorField

from collections_app.models.collection import Collection
from collections_app.search_index import TEXT_SEARCH_CONFIG


def source_upload_path(instance: Source, filename: str) -> str:
    """Where an uploaded file is stored: a folder per collection, ``uploads/<collection id>/``.

    Keeps each collection's files apart on disk, so a collection's folder holds
    nothing of another one's (and goes with it).
    """
    return f"uploads/{int(instance.collection_id)}/{filename}"


class Source(models.Model):
    """One document of a collection: a file path, a URL or an uploaded file."""

    class Origin(models.TextChoices):
        PATH = "path", "Server path"
        URL = "url", "Web URL"
        UPLOAD = "upload", "Upload"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        INGESTING = "ingesting", "Ingesting"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"
        QUARANTINED = "quarantined", "Quarantined"
        REJECTED = "rejected", "Rejected by reviewer"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="sources")
    location = models.TextField(help_text="Absolute path, URL, or upload:<name>")
    origin = models.CharField(max_length=10, choices=Origin.choices)
    # The glob / directory the source was listed from; re-listing it removes
    # the sources that no longer match.
    origin_pattern = models.TextField(blank=True)
    file = models.FileField(upload_to=source_upload_path, max_length=300, blank=True)
    kind = models.CharField(max_length=20, blank=True)
    mime = models.CharField(max_length=100, blank=True)
    title = models.CharField(max_length=500, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    size_bytes = models.BigIntegerField(default=0)
    text_chars = models.BigIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0)
    # The extracted text the chunk offsets point into.
    text = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    ingested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["location"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "location"], name="uniq_source_location")
        ]

    def __str__(self) -> str:
        return self.location

    @property
    def display_name(self) -> str:
        """The title, else the file name (an upload's as uploaded), else the location."""
        name = self.location.removeprefix("upload:").rsplit("/", 1)[-1]
        return self.title or name or self.location


class _ChunkManager(models.Manager["Chunk"]):
    """Chunks without their unit vectors, which only the extractive answer reads (by name)."""

    def get_queryset(self) -> models.QuerySet[Chunk]:
        return super().get_queryset().defer("unit_vectors")


class Chunk(models.Model):
    """A retrievable passage with its embedding and full-text vector.

    A ``summary`` chunk is a node of the collection's summary tree: the summary
    of a section or a document, retrievable like a passage but never shown as
    one; it is cited through ``members``, the passages it summarises.
    """

    class Kind(models.TextChoices):
        PASSAGE = "passage", "Passage"
        SUMMARY = "summary", "Summary"

    # Deterministic: hash of source location + content hash + ordinal.
    id = models.CharField(max_length=64, primary_key=True)
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="chunks")
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="chunks")
    # The source content hash this chunk was cut from (old and new versions of a
    # changed source coexist for a moment).
    source_hash = models.CharField(max_length=64)
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    page = models.PositiveIntegerField(null=True, blank=True)
    section_path = models.JSONField(default=list, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    # Contextual header embedded before ``text`` (RAG["ingestion"]["chunk_header"]:
    # document title and section path); never part of ``text``, so citations and
    # highlights keep pointing at the document's own words.
    header = models.TextField(blank=True, default="", db_default="")
    kind = models.CharField(
        max_length=10, choices=Kind.choices, default=Kind.PASSAGE, db_default=Kind.PASSAGE
    )
    # A summary's member passages (chunk ids, document order); empty for a passage.
    # db_default: rows written by raw SQL (benchmarks, tests) are passages.
    members = models.JSONField(default=list, blank=True, db_default=[])
    # No fixed dimension: each collection gets its own partial HNSW index over
    # embedding::vector(d) (collections_app.search_index.ddl), so collections of
    # different dimensions all stay index-backed.
    embedding = VectorField(null=True, blank=True)
    # The vectors of the units an extractive answer scores (its sentences, list
    # items and rows, read with their title and section), computed with the
    # passage at ingestion and keyed by the embedding profile and the exact text
    # embedded (collections_app.embedding.unit_vectors); null for a chunk
    # written without them (before they existed, a summary), whose units are
    # embedded when an answer needs them.
    unit_vectors = models.BinaryField(null=True, blank=True, editable=False)
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config=TEXT_SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = _ChunkManager()

    class Meta:
        ordering = ["source_id", "ordinal"]
        indexes = [
            GinIndex(fields=["search_vector"], name="chunk_search_vector_gin"),
            models.Index(fields=["collection", "source"], name="chunk_collection_source"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}#{self.ordinal}"


class ManifestEntry(models.Model):
    """What one source location of a collection was last ingested from, and with which settings.

    One row per source, written as soon as that source is stored, so a run that
    stops half-way keeps what it finished and concurrent runs on one collection
    never overwrite each other's entries. A malformed entry only means that
    source is ingested again, never a crash.
    """

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="manifest_entries"
    )
    location = models.TextField()
    content_hash = models.CharField(max_length=64)
    # The chunker's settings fingerprint and the embedding profile.
    chunker = models.JSONField(default=dict)
    embedding = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "location"], name="uniq_manifest_entry_location"
            )
        ]
        verbose_name_plural = "manifest entries"

    def __str__(self) -> str:
        return f"{self.location} ({self.content_hash[:12]})"
