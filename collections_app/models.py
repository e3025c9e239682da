"""The corpus: collections, their sources, chunks, manifest, quarantine and jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import VectorField

from collections_app.search_index import TEXT_SEARCH_CONFIG


class Collection(models.Model):
    """A named set of documents sharing one embedding profile and chunking defaults."""

    class Purpose(models.TextChoices):
        WORKSPACE = "workspace", "Workspace"
        # Built by the evaluation harness from a golden dataset's corpus: kept out
        # of the pickers, lists and quarantine queue people work with.
        EVALUATION = "evaluation", "Evaluation"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    purpose = models.CharField(
        max_length=20, choices=Purpose.choices, default=Purpose.WORKSPACE, db_index=True
    )
    # The embedding profile recorded on first ingestion; a different active
    # profile fails ingestion loudly unless the run is a reindex.
    embedding_provider = models.CharField(max_length=100, blank=True)
    embedding_model = models.CharField(max_length=500, blank=True)
    embedding_dimensions = models.PositiveIntegerField(null=True, blank=True)
    # Optional per-collection overrides of settings.RAG["embedding"] (e.g. another
    # model); the active profile is that configuration's model.
    embedding_config = models.JSONField(default=dict, blank=True)
    chunking_strategy = models.CharField(max_length=50, default="recursive")
    chunking_options = models.JSONField(default=dict, blank=True)
    # Bumped by every ingestion that changes chunks; caches key on it.
    index_version = models.PositiveIntegerField(default=0)
    # {"chunks": int, "avg_lexemes": float} for BM25 length normalisation;
    # refreshed with TermStat.
    keyword_stats = models.JSONField(default=dict, blank=True)
    # Build a summary tree (section and document summaries stored as retrievable
    # summary chunks, collections_app/ingestion/summary_tree/) after each ingestion.
    summary_tree = models.BooleanField(default=False)
    # Corrective and adaptive answers may search the web once the collection's own
    # evidence stays insufficient, for requests that ask (query_app/pipeline/web/).
    # Nothing found there is ever stored here.
    web_fallback = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_evaluation(self) -> bool:
        return self.purpose == self.Purpose.EVALUATION

    @property
    def embedding_profile(self) -> dict[str, object] | None:
        if not self.embedding_model:
            return None
        return {
            "provider": self.embedding_provider,
            "model": self.embedding_model,
            "dimensions": self.embedding_dimensions,
        }


class CollectionMembership(models.Model):
    """Per-collection permission of one user: read < write < admin."""

    class Role(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write"
        ADMIN = "admin", "Admin"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="collection_memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.READ)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "user"], name="uniq_membership")
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} {self.collection}"


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


class IngestionJob(models.Model):
    """One ingestion run; its progress is polled by pages and the API."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        PARTIAL = "partial", "Finished with failures"
        FAILED = "failed", "Failed"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # What was asked: {"locations": [...], "source_ids": [...], "chunking": ..., "reindex": ...}
    request = models.JSONField(default=dict, blank=True)
    sources_total = models.PositiveIntegerField(default=0)
    sources_done = models.PositiveIntegerField(default=0)
    sources_failed = models.PositiveIntegerField(default=0)
    chunks_written = models.PositiveIntegerField(default=0)
    embeddings_computed = models.PositiveIntegerField(default=0)
    current = models.TextField(blank=True, help_text="What the job is working on now")
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # Idempotency key for form double-submits and API retries.
    request_key = models.CharField(max_length=64, blank=True, db_index=True)
    # Bytes of the sources this job read (unchanged ones excluded), and the bytes
    # of its uploads not read yet: together they count against the daily quota.
    bytes_ingested = models.BigIntegerField(default=0)
    bytes_reserved = models.BigIntegerField(default=0)
    # The process running the job ("host:pid") and its last sign of life; a job
    # whose heartbeat stops is resumed (or failed, after ``attempts`` tries).
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # A large job is split into parts that many workers share (0: run whole).
    parts_total = models.PositiveIntegerField(default=0)
    parts_done = models.PositiveIntegerField(default=0)
    parts_failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the current attempt started (a resumed job starts again).
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Workers look for queued jobs, and for running ones whose worker stopped.
            models.Index(fields=["status", "created_at"], name="job_status_created"),
            models.Index(fields=["created_by", "created_at"], name="job_user_created"),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.PARTIAL, self.Status.FAILED}

    @property
    def percent(self) -> int:
        if not self.sources_total:
            return 100 if self.is_finished else 0
        return min(100, round(100 * self.sources_done / self.sources_total))


class IngestionPart(models.Model):
    """A slice of a job's sources, claimed and run by any worker; its job adds the parts up."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    job = models.ForeignKey(IngestionJob, on_delete=models.CASCADE, related_name="parts")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # [{"location", "origin", "origin_pattern", "source_id"}, ...]
    items = models.JSONField(default=list)
    sources_done = models.PositiveIntegerField(default=0)
    sources_failed = models.PositiveIntegerField(default=0)
    chunks_written = models.PositiveIntegerField(default=0)
    embeddings_computed = models.PositiveIntegerField(default=0)
    bytes_ingested = models.BigIntegerField(default=0)
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [
            models.UniqueConstraint(fields=["job", "index"], name="part_job_index_unique")
        ]
        indexes = [models.Index(fields=["status", "job"], name="part_status_job")]

    def __str__(self) -> str:
        return f"part {self.index} of job {self.job_id} ({self.status})"


class Provenance(models.Model):
    """Where one version of a source's content came from, when and from whom."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="provenance")
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.SET_NULL, related_name="provenance"
    )
    job = models.ForeignKey(
        IngestionJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="provenance"
    )
    location = models.TextField()
    origin = models.CharField(max_length=10, choices=Source.Origin.choices)
    final_url = models.TextField(blank=True)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    mime = models.CharField(max_length=100, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    retrieved_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-retrieved_at"]
        verbose_name_plural = "provenance"

    def __str__(self) -> str:
        return f"{self.location} @ {self.retrieved_at:%Y-%m-%d %H:%M}"


class QuarantineItem(models.Model):
    """Content held back because it looks like a prompt-injection attempt."""

    class Verdict(models.TextChoices):
        SUSPICIOUS = "suspicious", "Suspicious"
        REJECTED = "rejected", "Rejected"

    class ReviewStatus(models.TextChoices):
        PENDING = "pending", "Pending review"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="quarantine")
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="quarantine_items")
    provenance = models.ForeignKey(
        Provenance, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    content_hash = models.CharField(max_length=64)
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    # [{"name": ..., "detail": ..., "excerpt": ..., "start": int, "end": int}]
    signals = models.JSONField(default=list)
    excerpt = models.TextField(blank=True)
    # True when the content was indexed anyway (suspicious_policy = "index").
    indexed = models.BooleanField(default=False)
    review_status = models.CharField(
        max_length=10, choices=ReviewStatus.choices, default=ReviewStatus.PENDING
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.verdict}: {self.source}"


class TermStat(models.Model):
    """Document frequency of one lexeme in one collection (for BM25-style IDF).

    Refreshed from the chunks' tsvectors after every ingestion that changed
    chunks (``collections_app.search_index.collection_term_stats_refresh``).
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="term_stats")
    lexeme = models.TextField()
    ndoc = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "lexeme"], name="uniq_term_stat")
        ]

    def __str__(self) -> str:
        return f"{self.lexeme}: {self.ndoc}"
