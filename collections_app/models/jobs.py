"""Ingestion runs: a job's progress row, and the parts a large job is split into."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from collections_app.models.collection import Collection


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
