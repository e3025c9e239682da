"""The corpus side of a run: one collection per dataset, ingested incrementally.

The collection is named after the dataset (``eval-<name>``) and belongs to the
harness: its purpose is "evaluation", so it stays out of the workspace. Before each run the dataset's files are ingested with the ordinary
incremental ingestion (unchanged files cost nothing), and sources that are no
longer part of the corpus are removed, so the collection always holds exactly
the dataset. Sources that fail or are quarantined do not stop the run; they are
listed in the run's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.utils.text import slugify

from collections_app.models import Collection, QuarantineItem, Source
from collections_app.services import (
    collection_create,
    collection_ingest,
    quarantine_approve,
    source_remove,
)
from eval_app.harness.types import EvalError

COLLECTION_PREFIX = "eval-"
# Workspace collections holding eval-<name>, eval-<name>-2, ... before giving up.
MAX_SLUG_TRIES = 20


def eval_principal() -> User:
    """The identity the harness answers with: full read access to its own collections.

    An unsaved user object (never stored, never able to log in): evaluation reads
    only the collection the harness itself built for the dataset.
    """
    user_model = get_user_model()
    return user_model(username="ragsite-eval", is_superuser=True, is_active=True)


def eval_collection_slug(dataset_name: str) -> str:
    """``eval-<dataset name>``, slugified (at most 100 characters)."""
    return (COLLECTION_PREFIX + (slugify(dataset_name) or "dataset"))[:100]


@dataclass
class CorpusSummary:
    """What the ingestion before a run did, with the sources a user must know about."""

    collection: str
    files: int
    report: dict[str, Any] = field(default_factory=dict)
    failed: list[dict[str, str]] = field(default_factory=list)
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    approved: list[str] = field(default_factory=list)  # held, then approved for the run

    def as_dict(self) -> dict[str, Any]:
        counts = {
            key: self.report.get(key)
            for key in (
                "sources_seen",
                "sources_unchanged",
                "sources_ingested",
                "sources_failed",
                "sources_quarantined",
                "chunks_written",
                "embeddings_computed",
                "total_seconds",
                "warnings",
            )
        }
        return {
            "collection": self.collection,
            "files": self.files,
            **counts,
            "failed": self.failed,
            "quarantined": self.quarantined,
            "approved": self.approved,
            "removed": self.removed,
        }


def eval_collection_get_or_create(*, dataset_name: str, description: str = "") -> Collection:
    """The dataset's evaluation collection, created on first use.

    It is created with the evaluation purpose, which keeps it out of the
    workspace (collection list, Ask picker, quarantine queue). A workspace
    collection that happens to hold the slug is never touched: the harness takes
    the next free ``eval-<name>-<n>`` instead.
    """
    base = eval_collection_slug(dataset_name)
    taken = {
        slug: purpose
        for slug, purpose in Collection.objects.filter(slug__startswith=base).values_list(
            "slug", "purpose"
        )
    }
    for n in range(1, MAX_SLUG_TRIES + 1):
        suffix = "" if n == 1 else f"-{n}"
        slug = base[: 100 - len(suffix)] + suffix
        if taken.get(slug) == Collection.Purpose.EVALUATION:
            return Collection.objects.get(slug=slug)
        if slug not in taken:
            return collection_create(
                name=f"Evaluation: {dataset_name}"[:200],
                slug=slug,
                description=description or f"Corpus of the evaluation dataset {dataset_name}",
                purpose=Collection.Purpose.EVALUATION,
            )
    raise EvalError(
        f"no free collection slug for dataset {dataset_name!r}: {base} and the next "
        f"{MAX_SLUG_TRIES - 1} are workspace collections"
    )


def corpus_sync(
    *, collection: Collection, files: Sequence[Path], approve_quarantined: bool = False
) -> CorpusSummary:
    """Ingest ``files`` into ``collection`` incrementally and drop sources not among them.

    Raises only for run-level problems (e.g. the collection was indexed with another
    embedding model); a file that fails or is quarantined is listed in the summary.
    """
    locations = [str(Path(path).absolute()) for path in files]
    wanted = set(locations)
    removed: list[str] = []
    for source in collection.sources.exclude(location__in=wanted):
        removed.append(source.location)
        source_remove(source=source)
    report = collection_ingest(collection=collection, locations=locations)
    approved = _quarantine_approve_all(collection) if approve_quarantined else []
    data = report.as_dict()
    failed = [
        {"location": s.location, "reason": s.reason} for s in report.sources if s.status == "failed"
    ]
    quarantined = [
        {"location": s.location, "verdict": s.verdict, "signals": list(s.signals)}
        for s in report.sources
        if s.status == "quarantined" and s.location not in approved
    ]
    # Sources held from an earlier run stay out of the index; list them too.
    seen = {q["location"] for q in quarantined}
    for source in collection.sources.filter(
        status__in=[Source.Status.QUARANTINED, Source.Status.REJECTED], location__in=wanted
    ):
        if source.location not in seen:
            quarantined.append(
                {"location": source.location, "verdict": source.status, "signals": []}
            )
    return CorpusSummary(
        collection=collection.slug,
        files=len(locations),
        report=data,
        failed=failed,
        quarantined=quarantined,
        removed=removed,
        approved=approved,
    )


def _eval_reviewer() -> User:
    """The stored identity the approvals are recorded under: it can never log in."""
    user_model = get_user_model()
    reviewer, created = user_model.objects.get_or_create(
        username="ragsite-eval", defaults={"is_active": False}
    )
    if created:
        reviewer.set_unusable_password()
        reviewer.save(update_fields=["password"])
    return reviewer


def _quarantine_approve_all(collection: Collection) -> list[str]:
    """Approve, as the evaluation user, every pending item of the collection's quarantine.

    Only for a dataset that asks for it (``quarantine: approve``): its cases test
    that answers resist the instructions planted in those documents.
    """
    approved = []
    reviewer = _eval_reviewer()
    pending = QuarantineItem.objects.filter(
        collection=collection, review_status=QuarantineItem.ReviewStatus.PENDING
    ).select_related("source")
    for item in pending:
        quarantine_approve(item=item, reviewer=reviewer)
        approved.append(item.source.location)
    return approved
