"""Route suspicious or rejected content to the quarantine queue."""

from __future__ import annotations

from django.conf import settings

from collections_app.ingestion.report import names_with_counts
from collections_app.ingestion.types import ValidationResult
from collections_app.models import IngestionJob, Provenance, QuarantineItem, Source


def quarantine_policy_apply(
    *, source: Source, result: ValidationResult, content_hash: str, job: IngestionJob | None
) -> str:
    """Record a quarantine item when needed; return why the content is held ("" = index it).

    Rejected content is never indexed until a reviewer approves it. Suspicious
    content is held or indexed per ``RAG["ingestion"]["suspicious_policy"]``.
    A reviewer's decision on the same content (same hash) is final.
    """
    if result.verdict == "clean":
        return ""
    decided = (
        QuarantineItem.objects.filter(source=source, content_hash=content_hash)
        .exclude(review_status=QuarantineItem.ReviewStatus.PENDING)
        .order_by("-reviewed_at")
        .first()
    )
    if decided is not None:
        if decided.review_status == QuarantineItem.ReviewStatus.APPROVED:
            return ""
        Source.objects.filter(pk=source.pk).update(status=Source.Status.REJECTED)
        source.status = Source.Status.REJECTED
        return f"rejected by a reviewer: {decided.reason}"
    policy = settings.RAG["ingestion"].get("suspicious_policy", "hold")
    index_anyway = result.verdict == "suspicious" and policy == "index"
    item = QuarantineItem.objects.filter(
        source=source, content_hash=content_hash, review_status=QuarantineItem.ReviewStatus.PENDING
    ).first()
    if item is None:
        provenance = (
            Provenance.objects.filter(source=source, content_hash=content_hash)
            .order_by("-pk")
            .first()
        )
        QuarantineItem.objects.create(
            collection=source.collection,
            source=source,
            provenance=provenance,
            content_hash=content_hash,
            verdict=result.verdict,
            signals=[s.as_dict() for s in result.signals],
            excerpt=result.excerpt or source.text[:400],
            indexed=index_anyway,
        )
    if index_anyway:
        return ""
    Source.objects.filter(pk=source.pk).update(status=Source.Status.QUARANTINED)
    source.status = Source.Status.QUARANTINED
    names = names_with_counts(s.name for s in result.signals) or "unspecified"
    return f"{result.verdict}: held for review ({names})"
