"""The ingestion pipeline: load → validate → chunk → embed → upsert, per source.

Every source is fault-isolated: an error in one gives it a failed status with
the reason and the run goes on. Embedding is batched across sources so the
model sees full batches even when documents are small.

What a run finishes is kept as it goes: each source's chunks, its manifest
entry and the collection's index version are committed together, one source
at a time. A run that stops (a killed worker, a lost database) is resumed by
running it again: the sources it finished are unchanged and cost nothing. A
lost database stops the run instead of failing every remaining source, since
none of them is at fault.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import InterfaceError, OperationalError, connection, transaction

from collections_app.embedding import Embedder, get_embedder
from collections_app.embedding.unit_vectors import (
    ChunkUnits,
    unit_vectors_compute,
    unit_vectors_when,
)
from collections_app.ingestion import storage
from collections_app.ingestion.chunking import CHUNKERS
from collections_app.ingestion.fetch import fetch_url, read_path
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.manifest import Manifest, manifest_load
from collections_app.ingestion.quarantine import quarantine_policy_apply
from collections_app.ingestion.report import IngestionReport, SourceOutcome
from collections_app.ingestion.storage import (
    chunks_drop_other_dimensions,
    chunks_replace,
    document_from_source,
)
from collections_app.ingestion.summary_tree import summary_tree_update
from collections_app.ingestion.types import (
    ChunkDraft,
    EmbeddingProfileDrift,
    IngestionError,
    LoadedDocument,
    RawSource,
)
from collections_app.ingestion.validators import validate_document
from collections_app.models import Chunk, Collection, IngestionJob, Provenance, Source
from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure

logger = logging.getLogger(__name__)

# Database failures that stop the whole run (the server is gone or the
# connection broke): no source is at fault, and the run is resumed later.
DATABASE_LOST = (OperationalError, InterfaceError)

# Chunks embedded between two progress reports while a large source is embedded.
EMBED_PROGRESS_CHUNKS = 128

# Told what changed: the run (its report and running figures) and a message.
ProgressCallback = Callable[["IngestionRun", str], None]
# (bytes this run has read, chunks it has cut) -> why they pass a quota, or "".
QuotaCheck = Callable[[int, int], str]
# A server path -> why it may not be read, or "".
PathPolicy = Callable[[str], str]


class RunInterrupted(Exception):
    """The run was asked to stop between two sources; what it finished is kept."""


@dataclass
class WorkItem:
    """One source to (re)ingest: a location, or an existing Source row (uploads)."""

    location: str
    origin: str
    origin_pattern: str = ""
    source: Source | None = None


@dataclass
class _Pending:
    source: Source
    doc: LoadedDocument
    drafts: list[ChunkDraft]
    content_hash: str
    outcome: SourceOutcome


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
    flush_chunks: int = 256
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
        self.units_at_ingestion = unit_vectors_when() == "ingestion"
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
        self._pending: list[_Pending] = []
        self._changed = False
        # The collection's index version after this run's last change.
        self._version = 0
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
            self._check_stop()
            self._process(item)
            if sum(len(p.drafts) for p in self._pending) >= self.flush_chunks:
                self._flush()
        self._flush()
        seen = {item.location for item in items}
        for pattern in relisted_patterns:
            self._remove_vanished(pattern, seen)
        self._finish()
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
                with self._stage("chunk"):
                    doc = document_from_source(source)
                    drafts = self.chunker.chunk(doc)
                if not drafts:
                    raise IngestionError("no chunks were produced from the stored text")
                self._pending.append(_Pending(source, doc, drafts, content_hash, outcome))
            except IngestionError as exc:
                self._fail(source, outcome, str(exc))
        self._flush()
        self._finish()
        self.report.total_seconds = time.perf_counter() - started
        return self.report

    def _process(self, item: WorkItem) -> None:
        outcome = SourceOutcome(location=item.location, status="pending")
        self.report.sources.append(outcome)
        source = item.source
        try:
            with self._stage("load"):
                raw = self._read(item)
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
                    self._unchanged_outcome(outcome, source)
                    self._notify(f"unchanged {item.location}")
                    return
                self._check_quota(more_bytes=len(raw.data))
                self.bytes_loaded += len(raw.data)
                self._provenance(source, raw, content_hash)
                doc = load_document(raw, limits=self.limits)
            outcome.kind = doc.kind
            outcome.warnings = list(doc.warnings)
            self._store_document(source, raw, doc, content_hash)
            if not self.skip_validation:
                with self._stage("validate"):
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
                    self._notify(f"quarantined {item.location}")
                    return
            with self._stage("chunk"):
                drafts = self.chunker.chunk(doc)
            if not drafts:
                raise IngestionError("no chunks were produced from the extracted text")
            self._check_quota(more_chunks=len(drafts))
            self.chunks_admitted += len(drafts)
            self._pending.append(_Pending(source, doc, drafts, content_hash, outcome))
        except IngestionError as exc:
            self._fail(source, outcome, str(exc))
        except DATABASE_LOST:
            raise
        except Exception as exc:  # one bad source never stops the others
            logger.exception("unexpected error ingesting %s", item.location)
            self._fail(source, outcome, f"unexpected error: {type(exc).__name__}: {exc}")

    def _read(self, item: WorkItem) -> RawSource:
        if item.origin == Source.Origin.URL:
            return fetch_url(item.location, limits=self.limits)
        if item.origin == Source.Origin.PATH and self.path_policy is not None:
            refusal = self.path_policy(item.location)
            if refusal:
                raise IngestionError(refusal)
            # Read what the check resolved (symlinks, ..), not the name again.
            return read_path(Path(item.location).resolve(), limits=self.limits)
        if item.origin == Source.Origin.UPLOAD:
            assert item.source is not None
            if not item.source.file:
                raise IngestionError("the uploaded file is missing")
            with item.source.file.open("rb") as fh:
                data = fh.read(self.limits.max_file_bytes + 1)
            # The name the person uploaded, not the storage's de-duplicated one
            # ("report_x7Kp2.pdf"): it is the title of last resort and a format hint.
            name = item.location.removeprefix("upload:") or Path(item.source.file.name).name
            raw = RawSource(location=item.location, origin="upload", data=data, filename=name)
            return raw
        return read_path(Path(item.location), limits=self.limits)

    def _unchanged(self, source: Source, content_hash: str) -> bool:
        if self.reindex or source.status not in {Source.Status.READY, Source.Status.QUARANTINED}:
            return False
        return self.manifest.is_unchanged(
            source.location,
            content_hash=content_hash,
            chunker=self.fingerprint,
            embedding=self.profile,
        )

    def _unchanged_outcome(self, outcome: SourceOutcome, source: Source) -> None:
        earlier = self.carried.get(outcome.location)
        if earlier is not None and earlier.status in {"ingested", "quarantined"}:
            # Finished by an earlier attempt of this job: its outcome stands.
            outcome.status = earlier.status
            outcome.reason = earlier.reason
            outcome.chunks_written = earlier.chunks_written
            outcome.embeddings_computed = earlier.embeddings_computed
            outcome.verdict = earlier.verdict
            outcome.signals = list(earlier.signals)
            outcome.warnings = list(earlier.warnings)
            outcome.kind = earlier.kind or source.kind
            return
        outcome.status = "unchanged"
        outcome.kind = source.kind
        if source.status == Source.Status.QUARANTINED:
            outcome.reason = "unchanged; still awaiting review in the quarantine"

    def _check_quota(self, *, more_bytes: int = 0, more_chunks: int = 0) -> None:
        if self.quota is None:
            return
        refusal = self.quota(self.bytes_loaded + more_bytes, self.chunks_admitted + more_chunks)
        if refusal:
            raise IngestionError(refusal)

    def _check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise RunInterrupted("the run was asked to stop")

    def _provenance(self, source: Source, raw: RawSource, content_hash: str) -> None:
        Provenance.objects.create(
            collection=self.collection,
            source=source,
            job=self.job,
            location=source.location,
            origin=source.origin,
            final_url=raw.final_url,
            http_status=raw.http_status,
            content_hash=content_hash,
            size_bytes=len(raw.data),
            mime=raw.declared_mime,
            submitted_by=self.user if getattr(self.user, "is_authenticated", False) else None,
        )

    def _store_document(
        self, source: Source, raw: RawSource, doc: LoadedDocument, content_hash: str
    ) -> None:
        source.kind = doc.kind
        source.mime = doc.mime
        source.title = doc.title[:500]
        source.size_bytes = len(raw.data)
        source.text_chars = len(doc.text)
        source.text = doc.text
        source.metadata = {
            **doc.metadata,
            "pages": [[p.number, p.char_start, p.char_end, p.has_text] for p in doc.pages],
            "warnings": doc.warnings,
            "pending_hash": content_hash,
        }
        source.status = Source.Status.INGESTING
        source.error = ""
        source.save()

    # --- embed + upsert -----------------------------------------------------------
    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        # The model reads each chunk with its contextual header (title, section path).
        texts = [d.embedded_text for p in pending for d in p.drafts]
        try:
            vectors = self._embed(texts, pending)
            unit_vectors = self._embed_units(pending)
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
                with self._stage("upsert"):
                    self._upsert(p, rows, units)
            except DATABASE_LOST:
                raise
            except Exception as exc:
                logger.exception("storing chunks of %s failed", p.source.location)
                self._fail(p.source, p.outcome, f"storing chunks failed: {exc}")
                continue
            p.outcome.status = "ingested"
            p.outcome.chunks_written = len(p.drafts)
            p.outcome.embeddings_computed = len(p.drafts)
            self._notify(f"ingested {p.source.location}")

    def _embed(self, texts: list[str], pending: list[_Pending]) -> Any:
        """Embed ``texts`` in steps, reporting progress (and heeding a stop) between them.

        The steps take the passages longest first (characters stand in for
        tokens), so each step holds passages of like length and the embedder,
        which sorts by tokens within a call, pads little; vectors come back in
        the order of ``texts``.
        """
        import numpy as np

        if len(texts) <= EMBED_PROGRESS_CHUNKS:
            with self._stage("embed"):
                return self.embedder.encode(texts)
        names = ", ".join(p.source.display_name for p in pending[:3])
        if len(pending) > 3:
            names += f" and {len(pending) - 3} more"
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        parts = []
        for start in range(0, len(texts), EMBED_PROGRESS_CHUNKS):
            self._check_stop()
            step = order[start : start + EMBED_PROGRESS_CHUNKS]
            with self._stage("embed"):
                parts.append(self.embedder.encode([texts[i] for i in step]))
            self.embedded_in_flush = min(len(texts), start + EMBED_PROGRESS_CHUNKS)
            self._notify(f"embedding {names}: {self.embedded_in_flush} of {len(texts)} passages")
        vectors = np.empty_like(parts[0], shape=(len(texts), parts[0].shape[1]))
        vectors[order] = np.concatenate(parts)
        return vectors

    def _embed_units(self, pending: list[_Pending]) -> list[bytes | None]:
        """Per chunk of ``pending`` (in order), its units' vectors for extractive answers.

        With ``RAG["ingestion"]["unit_vectors"]`` = ``ingestion``, embedded now,
        with the passages, so that no answer embeds them while a question waits
        (``collections_app.embedding.unit_vectors``); in steps of
        ``EMBED_PROGRESS_CHUNKS`` chunks, heeding a stop between them. By
        default (``first-use``) none: the first answer that reads a passage
        embeds and stores them.
        """
        if not self.units_at_ingestion:
            return [None] * sum(len(p.drafts) for p in pending)
        chunks = [
            ChunkUnits(text=d.text, title=p.source.title, location=p.source.location)
            for p in pending
            for d in p.drafts
        ]
        blobs: list[bytes | None] = []
        for start in range(0, len(chunks), EMBED_PROGRESS_CHUNKS):
            if start:
                self._check_stop()
            with self._stage("embed"):
                blobs += unit_vectors_compute(
                    self.embedder, chunks[start : start + EMBED_PROGRESS_CHUNKS]
                )
        return blobs

    def _upsert(self, p: _Pending, vectors: Any, unit_vectors: list[bytes | None]) -> None:
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
            self._index_changed()

    # --- removal, failure, finish ---------------------------------------------------
    def _remove_vanished(self, pattern: str, seen: set[str]) -> None:
        vanished = Source.objects.filter(
            collection=self.collection, origin_pattern=pattern
        ).exclude(location__in=seen)
        for source in vanished:
            self.report.sources.append(
                SourceOutcome(
                    location=source.location,
                    status="removed",
                    reason=f"no longer matched by {pattern}",
                    kind=source.kind,
                    source_id=source.pk,
                )
            )
            with transaction.atomic():
                self.manifest.forget(source.location)
                source.delete()
                self._index_changed()

    def _forget_chunks(self, source: Source) -> None:
        deleted, _ = Chunk.objects.filter(source=source).delete()
        if deleted:
            self._index_changed()
        Source.objects.filter(pk=source.pk).update(chunk_count=0)

    def _index_changed(self) -> None:
        """Bump the collection's index version (caches key on it) as part of the change."""
        with connection.cursor() as cur:
            cur.execute(
                "UPDATE collections_app_collection SET index_version = index_version + 1 "
                "WHERE id = %s RETURNING index_version",
                [self.collection.pk],
            )
            row = cur.fetchone()
        self._changed = True
        if row is not None:
            self._version = max(self._version, int(row[0]))

    def _fail(self, source: Source | None, outcome: SourceOutcome, reason: str) -> None:
        outcome.status = "failed"
        outcome.reason = reason
        if source is not None and source.pk:
            # Chunks of an earlier good version stay searchable; the error is shown.
            Source.objects.filter(pk=source.pk).update(
                status=Source.Status.FAILED if not source.chunk_count else Source.Status.READY,
                error=reason,
            )
        self._notify(f"failed {outcome.location}")

    def _finish(self) -> None:
        update: dict[str, Any] = {}
        if self.collection.embedding_profile != self.profile and (
            self._changed or not self.collection.embedding_model
        ):
            update.update(
                embedding_provider=self.profile["provider"],
                embedding_model=self.profile["model"],
                embedding_dimensions=self.profile["dimensions"],
            )
        if self.chunking and self.chunking != self.collection.chunking_strategy:
            update["chunking_strategy"] = self.chunking
        if update:
            for key, value in update.items():
                setattr(self.collection, key, value)
            self.collection.save(update_fields=[*update, "updated_at"])
        self._summary_tree()
        self.collection.refresh_from_db(fields=["index_version"])
        if self._changed or self.reindex:
            if self.reindex:
                # Only a reindex can change the model, hence the vector size.
                self._drop_stale_dimensions()
            vector_index_ensure(
                collection_id=self.collection.pk, dimensions=int(self.profile["dimensions"])
            )
            # Skipped when a concurrent run's refresh already covered this run's changes.
            collection_term_stats_refresh(collection=self.collection, covering=self._version)
            if self.report.chunks_written >= storage.ANALYZE_AFTER_CHUNKS:
                storage.chunk_statistics_refresh()
        self.report.index_version = self.collection.index_version

    def _summary_tree(self) -> None:
        """The run's last step: the summary tree follows the passages (built, rebuilt, removed)."""
        # Read again: the setting may have been switched while the run went on.
        self.collection.refresh_from_db(fields=["summary_tree"])
        timer: AbstractContextManager[Any] = (
            self._stage("summary_tree") if self.collection.summary_tree else nullcontext()
        )
        with timer:
            tree = summary_tree_update(
                collection=self.collection,
                embedder=self.embedder,
                progress=lambda message: self._notify(message),
                should_stop=self._check_stop,
            )
        if tree.changed:
            self.report.summary_tree = tree.as_dict()
            self._index_changed()

    def _drop_stale_dimensions(self) -> None:
        removed = chunks_drop_other_dimensions(
            collection=self.collection, dimensions=int(self.profile["dimensions"])
        )
        if removed:
            self.report.warnings.append(
                f"{removed} source(s) could not be re-embedded with the new model and "
                "were removed from the index until they are ingested again"
            )

    # --- helpers ------------------------------------------------------------------------
    def _stage(self, name: str) -> _StageTimer:
        return _StageTimer(self.report.stage_seconds, name)

    def _notify(self, message: str) -> None:
        if self.progress is not None:
            self.progress(self, message)


class _StageTimer:
    def __init__(self, totals: dict[str, float], name: str):
        self.totals, self.name = totals, name

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.totals[self.name] = (
            self.totals.get(self.name, 0.0) + time.perf_counter() - self.started
        )
