"""Where each version of a source's content came from, and content held back for review."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from collections_app.models.collection import Collection
from collections_app.models.documents import Source
from collections_app.models.jobs import IngestionJob


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
