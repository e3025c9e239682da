"""One ingestion run over one collection (:class:`IngestionRun`): each source is
loaded, validated and chunked in turn, and embedded and stored in flushes of
many sources; the package's docstring tells how a run keeps what it finished.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from collections_app.embedding import Embedder, get_embedder
from collections_app.embedding.unit_vectors import unit_vectors_when
from collections_app.ingestion.chunking import CHUNKERS
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.manifest import Manifest, manifest_load
from collections_app.ingestion.pipeline.embed import passages_embed, units_after, units_embed
from collections_app.ingestion.pipeline.finish import run_finish, vanished_remove
from collections_app.ingestion.pipeline.sources import (
    provenance_record,
    source_document_store,
    source_read,
    unchanged_outcome_fill,
)
from collections_app.ingestion.pipeline.work import (
    DATABASE_LOST,
    IndexVersion,
    PathPolicy,
    PendingSource,
    ProgressCallback,
    QuotaCheck,
    RunInterrupted,
    StageTimer,
    WorkItem,
)
from collections_app.ingestion.quarantine import quarantine_policy_apply
from collections_app.ingestion.report import IngestionReport, SourceOutcome
from collections_app.ingestion.storage import chunks_replace, document_from_source
from collections_app.ingestion.types import EmbeddingProfileDrift, IngestionError
from collections_app.ingestion.validators import validate_document
from collections_app.models import Chunk, Collection, IngestionJob, Source

logger = logging.getLogger(__name__)


@dataclass
class IngestionRun:
    """State of one run over one collection."""

    collection: Collection
    chunking: str | None = None
    reindex: bool = False
    user: Any = None
    job: IngestionJob | None = None
    progress: ProgressCallback | None = None
    # Documents whose validation a reviewer already settled (quarantine approval).
    skip_validation: bool = False
    # Passages gathered before they are embedded and stored together. A flush is
    # sorted by length and batched as a whole: on 1,521 PostgreSQL-manual passages,
    # flushes of 256 padded to 7 % more tokens than one batch plan for all, 512 to 4 %.
    flush_chunks: int = 512
    # Per-user budgets (None: no limit), consulted before a source costs anything.
    quota: QuotaCheck | None = None
    # Which server paths may be read (None: any, for the local operator's CLI).
    path_policy: PathPolicy | None = None
    # Asked between sources and embedding batches; True stops the run (RunInterrupted).
    should_stop: Callable[[], bool] | None = None
    # Outcomes of an earlier, interrupted attempt of the same job, by location:
    # a source it finished is unchanged now but keeps its outcome in the report.
    carried: dict[str, SourceOutcome] = field(default_factory=dict)
    report: IngestionReport = field(init=False)

    def __post_init__(self) -> None:
        self.report = IngestionReport(collection=self.collection.slug, reindex=self.reindex)
        self.limits = IngestionLimits.from_settings()
        self.units_when = unit_vectors_when()
        # Sources whose chunks this run wrote (their units follow, see units_after).
        self.sources_written: list[int] = []
        self.embedder: Embedder = get_embedder(self.collection.embedding_config)
        self._check_profile()
        name = self.chunking or self.collection.chunking_strategy
        # The collection's options belong to its own strategy; another one
        # named for this run starts from that strategy's defaults.
        options = (
            self.collection.chunking_options if name == self.collection.chunking_strategy else {}
        )
        self.chunker = CHUNKERS.get(name)(embedder=self.embedder, options=options)
        self.report.chunking = name
        self.fingerprint = self.chunker.settings_fingerprint()
        self.profile: dict[str, Any] = self.embedder.profile.as_dict()
        self.report.embedding_profile = self.profile
        self.manifest: Manifest = manifest_load(collection=self.collection)
        if not self.manifest.trusted:
            self.report.warnings.append(
                f"manifest unusable for {self.manifest.unusable} source(s) "
                f"({self.manifest.problem}): they are ingested again"
            )
        self._pending: list[PendingSource] = []
        self.index = IndexVersion(collection_id=self.collection.pk)
        # Running figures the progress callback and the quota read.
        self.bytes_loaded = 0
        self.chunks_admitted = 0
        self.embedded_in_flush = 0

    def _check_profile(self) -> None:
        recorded = self.collection.embedding_profile
        active = self.embedder.profile.as_dict()
        if recorded and recorded != active and not self.reindex:
            raise EmbeddingProfileDrift(
                f"collection {self.collection.slug!r} was embedded with {recorded['model']} "
                f"({recorded['dimensions']} dims, {recorded['provider']}) but the active model is "
                f"{active['model']} ({active['dimensions']} dims, {active['provider']}); "
                "run again with --reindex to re-embed every source"
            )

    # --- the run ---------------------------------------------------------------
    def run(
        self, items: Iterable[WorkItem], *, relisted_patterns: Iterable[str] = ()
    ) -> IngestionReport:
        """Ingest every item, remove vanished sources, and return the report."""
        started = time.perf_counter()
        items = list(items)
        for item in items:
            self.check_stop()
            self._process(item)
            if sum(len(p.drafts) for p in self._pending) >= self.flush_chunks:
                self._flush()
        self._flush()
        seen = {item.location for item in items}
        for pattern in relisted_patterns:
            vanished_remove(self, pattern=pattern, seen=seen)
        run_finish(self)
        units_after(self)
        self.report.total_seconds = time.perf_counter() - started
        return self.report

    def run_stored(self, sources: Iterable[Source]) -> IngestionReport:
        """Index sources from their stored text, without re-reading or re-validating.

        Used when a reviewer approves quarantined content: what is indexed is
        exactly what the reviewer saw.
        """
        started = time.perf_counter()
        for source in sources:
            outcome = SourceOutcome(location=source.location, status="pending", kind=source.kind)
            outcome.source_id = source.pk
            self.report.sources.append(outcome)
            content_hash = source.metadata.get("pending_hash") or source.content_hash
            try:
                with self.stage("chunk"):
                    doc = document_from_source(source)
                    drafts = self.chunker.chunk(doc)
                if not drafts:
                    raise IngestionError("no chunks were produced from the stored text")
                self._pending.append(PendingSource(source, doc, drafts, content_hash, outcome))
            except IngestionError as exc:
                self._fail(source, outcome, str(exc))
        self._flush()
        run_finish(self)
        units_after(self)
        self.report.total_seconds = time.perf_counter() - started
        return self.report

    def _process(self, item: WorkItem) -> None:
        outcome = SourceOutcome(location=item.location, status="pending")
        self.report.sources.append(outcome)
        source = item.source
        try:
            with self.stage("load"):
                raw = source_read(item, limits=self.limits, path_policy=self.path_policy)
                content_hash = hashlib.sha256(raw.data).hexdigest()
                if source is None:
                    source, _ = Source.objects.get_or_create(
                        collection=self.collection,
                        location=item.location,
                        defaults={"origin": item.origin, "origin_pattern": item.origin_pattern},
                    )
                outcome.source_id = source.pk
                if item.origin_pattern and source.origin_pattern != item.origin_pattern:
                    source.origin_pattern = item.origin_pattern
                if self._unchanged(source, content_hash):
                    unchanged_outcome_fill(outcome, source=source, carried=self.carried)
                    self.notify(f"unchanged {item.location}")
                    return
                self._check_quota(more_bytes=len(raw.data))
                self.bytes_loaded += len(raw.data)
                provenance_record(
                    collection=self.collection,
                    source=source,
                    job=self.job,
                    user=self.user,
                    raw=raw,
                    content_hash=content_hash,
                )
                doc = load_document(raw, limits=self.limits)
            outcome.kind = doc.kind
            outcome.warnings = list(doc.warnings)
            source_document_store(source=source, raw=raw, doc=doc, content_hash=content_hash)
            if not self.skip_validation:
                with self.stage("validate"):
                    result = validate_document(doc, limits=self.limits)
                if result.errors:
                    raise IngestionError("; ".join(result.errors))
                outcome.verdict = result.verdict
                outcome.signals = [s.name for s in result.signals]
                held = quarantine_policy_apply(
                    source=source, result=result, content_hash=content_hash, job=self.job
                )
                if held:
                    outcome.status = "quarantined"
                    outcome.reason = held
                    with transaction.atomic():
                        self._forget_chunks(source)
                        self.manifest.record(
                            item.location,
                            content_hash=content_hash,
                            chunker=self.fingerprint,
                            embedding=self.profile,
                        )
                    self.notify(f"quarantined {item.location}")
                    return
            with self.stage("chunk"):
                drafts = self.chunker.chunk(doc)
            if not drafts:
                raise IngestionError("no chunks were produced from the extracted text")
            self._check_quota(more_chunks=len(drafts))
            self.chunks_admitted += len(drafts)
            self._pending.append(PendingSource(source, doc, drafts, content_hash, outcome))
        except IngestionError as exc:
            self._fail(source, outcome, str(exc))
        except DATABASE_LOST:
            raise
        except Exception as exc:  # one bad source never stops the others
            logger.exception("unexpected error ingesting %s", item.location)
            self._fail(source, outcome, f"unexpected error: {type(exc).__name__}: {exc}")

    def _unchanged(self, source: Source, content_hash: str) -> bool:
        if self.reindex or source.status not in {Source.Status.READY, Source.Status.QUARANTINED}:
            return False
        return self.manifest.is_unchanged(
            source.location,
            content_hash=content_hash,
            chunker=self.fingerprint,
            embedding=self.profile,
        )

    def _check_quota(self, *, more_bytes: int = 0, more_chunks: int = 0) -> None:
        if self.quota is None:
            return
        refusal = self.quota(self.bytes_loaded + more_bytes, self.chunks_admitted + more_chunks)
        if refusal:
            raise IngestionError(refusal)

    def check_stop(self) -> None:
        """Raise RunInterrupted if the run was asked to stop (``should_stop``)."""
        if self.should_stop is not None and self.should_stop():
            raise RunInterrupted("the run was asked to stop")

    # --- embed + upsert -----------------------------------------------------------
    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        # The model reads each chunk with its contextual header (title, section path).
        texts = [d.embedded_text for p in pending for d in p.drafts]
        try:
            vectors = passages_embed(self, texts, pending)
            unit_vectors = units_embed(self, pending)
        except (RunInterrupted, *DATABASE_LOST):
            raise
        except Exception as exc:
            logger.exception("embedding failed")
            for p in pending:
                self._fail(p.source, p.outcome, f"embedding failed: {exc}")
            return
        finally:
            self.embedded_in_flush = 0
        offset = 0
        for p in pending:
            rows = vectors[offset : offset + len(p.drafts)]
            units = unit_vectors[offset : offset + len(p.drafts)]
            offset += len(p.drafts)
            try:
                with self.stage("upsert"):
                    self._upsert(p, rows, units)
            except DATABASE_LOST:
                raise
            except Exception as exc:
                logger.exception("storing chunks of %s failed", p.source.location)
                self._fail(p.source, p.outcome, f"storing chunks failed: {exc}")
                continue
            p.outcome.status = "ingested"
            self.sources_written.append(p.source.pk)
            p.outcome.chunks_written = len(p.drafts)
            p.outcome.embeddings_computed = len(p.drafts)
            self.notify(f"ingested {p.source.location}")

    def _upsert(self, p: PendingSource, vectors: Any, unit_vectors: list[bytes | None]) -> None:
        # The chunks, the manifest entry and the index version commit together:
        # a run stopped after this point never redoes this source.
        with transaction.atomic():
            chunks_replace(
                collection=self.collection,
                source=p.source,
                content_hash=p.content_hash,
                drafts=p.drafts,
                vectors=vectors,
                unit_vectors=unit_vectors,
            )
            self.manifest.record(
                p.source.location,
                content_hash=p.content_hash,
                chunker=self.fingerprint,
                embedding=self.profile,
            )
            self.index.bump()

    # --- quarantine, failure ---------------------------------------------------------
    def _forget_chunks(self, source: Source) -> None:
        deleted, _ = Chunk.objects.filter(source=source).delete()
        if deleted:
            self.index.bump()
        Source.objects.filter(pk=source.pk).update(chunk_count=0)

    def _fail(self, source: Source | None, outcome: SourceOutcome, reason: str) -> None:
        outcome.status = "failed"
        outcome.reason = reason
        if source is not None and source.pk:
            # Chunks of an earlier good version stay searchable; the error is shown.
            Source.objects.filter(pk=source.pk).update(
                status=Source.Status.FAILED if not source.chunk_count else Source.Status.READY,
                error=reason,
            )
        self.notify(f"failed {outcome.location}")

    # --- helpers ------------------------------------------------------------------------
    def stage(self, name: str) -> StageTimer:
        """Time what runs inside ``with`` as the report's stage ``name``."""
        return StageTimer(self.report.stage_seconds, name)

    def notify(self, message: str) -> None:
        """Tell the progress callback, if any, what just happened."""
        if self.progress is not None:
            self.progress(self, message)
