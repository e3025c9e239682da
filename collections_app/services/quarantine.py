"""Quarantine review: approve (index exactly what the reviewer saw) or reject with a reason."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.utils import timezone

from collections_app.ingestion.pipeline import IngestionRun
from collections_app.ingestion.report import IngestionReport
from collections_app.ingestion.types import IngestionError
from collections_app.models import QuarantineItem, Source
from collections_app.services.collection import collection_index_bump


class ReviewError(Exception):
    """A quarantine decision is incomplete (e.g. a rejection without a reason)."""


@dataclass
class ReviewOutcome:
    """The result of one quarantine decision."""

    item: QuarantineItem
    error: str = ""
    report: IngestionReport | None = None


def quarantine_approve(*, item: QuarantineItem, reviewer: User) -> IngestionReport:
    """Approve quarantined content and index exactly what the reviewer saw."""
    _verdict_record(item, reviewer=reviewer, status=QuarantineItem.ReviewStatus.APPROVED, reason="")
    source = item.source
    run = IngestionRun(collection=item.collection, user=reviewer, skip_validation=True)
    report = run.run_stored([source])
    from collections_app.ingestion.manifest import manifest_load

    if report.sources and report.sources[0].status == "ingested":
        manifest_load(collection=item.collection).record(
            source.location,
            content_hash=item.content_hash,
            chunker=run.fingerprint,
            embedding=run.profile,
        )
    return report


def quarantine_reject(*, item: QuarantineItem, reviewer: User, reason: str) -> None:
    """Reject quarantined content (a reason is required); it stays out of the index."""
    if not reason.strip():
        raise ReviewError("a rejection needs a reason")
    _verdict_record(
        item, reviewer=reviewer, status=QuarantineItem.ReviewStatus.REJECTED, reason=reason.strip()
    )
    from collections_app.models import Chunk

    deleted, _ = Chunk.objects.filter(source=item.source).delete()
    Source.objects.filter(pk=item.source_id).update(status=Source.Status.REJECTED, chunk_count=0)
    if deleted:
        collection_index_bump(collection_id=item.collection_id)


def _verdict_record(item: QuarantineItem, *, reviewer: User, status: str, reason: str) -> None:
    if item.review_status != QuarantineItem.ReviewStatus.PENDING:
        raise ReviewError(f"this item was already {item.review_status} by {item.reviewer}")
    item.review_status = status
    item.reviewer = reviewer
    item.reviewed_at = timezone.now()
    item.reason = reason
    item.save()


def quarantine_review(
    *,
    items: Iterable[QuarantineItem],
    reviewer: User,
    decision: str,
    reason: str = "",
) -> list[ReviewOutcome]:
    """Approve (index) or reject (with ``reason``) each item; one failure never stops the rest."""
    if decision not in {"approve", "reject"}:
        raise ReviewError(f"unknown decision {decision!r}; known: approve, reject")
    outcomes = []
    for item in items:
        outcome = ReviewOutcome(item=item)
        try:
            if decision == "approve":
                outcome.report = quarantine_approve(item=item, reviewer=reviewer)
                failed = [s for s in outcome.report.sources if s.status == "failed"]
                if failed:
                    outcome.error = f"approved, but indexing failed: {failed[0].reason}"
            else:
                quarantine_reject(item=item, reviewer=reviewer, reason=reason)
        except (ReviewError, IngestionError) as exc:
            outcome.error = str(exc)
        outcomes.append(outcome)
    return outcomes
