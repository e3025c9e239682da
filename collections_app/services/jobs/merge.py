"""A split job's end: its parts' reports merged into one, the removals, the final status."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from django.utils import timezone

from collections_app.ingestion.manifest import Manifest
from collections_app.ingestion.pipeline.finish import source_remove, sources_vanished
from collections_app.ingestion.report import STAGES, IngestionReport, SourceOutcome
from collections_app.models import Collection, IngestionJob, IngestionPart
from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure
from collections_app.services.collection import collection_index_bump


def split_job_finish(*, job_id: int) -> None:
    """Finish a split job whose parts all ended: merged report, removals, final status.

    Safe to call twice: the steps before the final write change nothing the
    second time, and the final status is written only over ``running``.
    """
    job = IngestionJob.objects.select_related("collection").get(pk=job_id)
    if job.status != IngestionJob.Status.RUNNING:
        return
    parts = list(job.parts.order_by("index"))
    interim = job.report or {}
    report = IngestionReport(collection=job.collection.slug)
    report.sources = [_outcome(s) for s in interim.get("sources", []) if s.get("part") is None]
    for part in parts:
        data = part.report or {}
        report.sources += [_outcome(s) for s in data.get("sources", [])]
        for stage in STAGES:
            report.stage_seconds[stage] += float(data.get("stage_seconds", {}).get(stage, 0.0))
        report.chunking = report.chunking or str(data.get("chunking") or "")
        report.embedding_profile = report.embedding_profile or data.get("embedding_profile") or {}
        for warning in data.get("warnings", []):
            if warning not in report.warnings:
                report.warnings.append(warning)
        if part.status == IngestionPart.Status.FAILED:
            report.warnings.append(f"part {part.index + 1} failed: {part.error}")
    seen = {item["location"] for part in parts for item in part.items}
    removed = _vanished_remove(job.collection, interim.get("relisted_patterns", []), seen)
    report.sources += removed
    # A worker that died mid-part never refreshed what it had stored.
    interrupted = any(p.attempts > 1 or p.status == IngestionPart.Status.FAILED for p in parts)
    if (removed or interrupted) and job.collection.embedding_dimensions:
        vector_index_ensure(
            collection_id=job.collection.pk, dimensions=int(job.collection.embedding_dimensions)
        )
        collection_term_stats_refresh(collection=job.collection)
    job.collection.refresh_from_db(fields=["index_version"])
    report.index_version = job.collection.index_version
    started = job.started_at or job.created_at
    report.total_seconds = (timezone.now() - started).total_seconds()
    every_part_failed = all(p.status == IngestionPart.Status.FAILED for p in parts)
    status = (
        IngestionJob.Status.FAILED
        if every_part_failed
        else IngestionJob.Status.PARTIAL
        if report.sources_failed
        else IngestionJob.Status.SUCCEEDED
    )
    IngestionJob.objects.filter(pk=job.pk, status=IngestionJob.Status.RUNNING).update(
        status=status,
        error=f"every part failed; the first: {parts[0].error}"[:2000] if every_part_failed else "",
        report=report.as_dict(),
        sources_total=report.sources_seen,
        sources_done=report.sources_finished,
        sources_failed=report.sources_failed,
        chunks_written=report.chunks_written,
        embeddings_computed=report.embeddings_computed,
        parts_done=sum(1 for p in parts if p.status == IngestionPart.Status.DONE),
        parts_failed=sum(1 for p in parts if p.status == IngestionPart.Status.FAILED),
        finished_at=timezone.now(),
        current="",
        worker="",
        bytes_reserved=0,
    )


def _outcome(entry: dict[str, Any]) -> SourceOutcome:
    names = {f.name for f in fields(SourceOutcome)}
    return SourceOutcome(**{k: v for k, v in entry.items() if k in names})


def _vanished_remove(
    collection: Collection, patterns: list[str], seen: set[str]
) -> list[SourceOutcome]:
    """Remove the sources a re-listed pattern no longer matches (as an unsplit run does)."""
    manifest = Manifest({}, collection_id=int(collection.pk))
    removed = []
    for pattern in patterns:
        for source in sources_vanished(collection, pattern=pattern, seen=seen):
            removed.append(
                source_remove(
                    source,
                    pattern=pattern,
                    manifest=manifest,
                    bump=lambda: collection_index_bump(collection_id=int(collection.pk)),
                )
            )
    return removed
