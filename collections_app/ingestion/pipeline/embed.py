"""Embedding one flush of a run: its passages in steps of like length, reporting
progress and heeding a stop between steps, and their units' vectors when
ingestion embeds those with them; or, at the end of the run, the units of every
passage it wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np

from collections_app.embedding import SteppedEmbedder
from collections_app.embedding.unit_vectors import (
    ChunkUnits,
    unit_vectors_compute,
    unit_vectors_fill,
)
from collections_app.ingestion.pipeline.work import DATABASE_LOST, PendingSource, RunInterrupted
from collections_app.models import Chunk

if TYPE_CHECKING:
    from collections_app.ingestion.pipeline.run import IngestionRun

logger = logging.getLogger(__name__)

# Chunks embedded between two progress reports while a large source is embedded.
EMBED_PROGRESS_CHUNKS = 128


def passages_embed(run: IngestionRun, texts: list[str], pending: list[PendingSource]) -> Any:
    """Embed ``texts`` in steps, reporting progress (and heeding a stop) between them;
    vectors come back in the order of ``texts``."""
    if len(texts) <= EMBED_PROGRESS_CHUNKS:
        with run.stage("embed"):
            return run.embedder.encode(texts)
    names = ", ".join(p.source.display_name for p in pending[:3])
    if len(pending) > 3:
        names += f" and {len(pending) - 3} more"

    def embedded(done: int) -> None:
        run.embedded_in_flush = done
        run.notify(f"embedding {names}: {done} of {len(texts)} passages")

    return encode_in_steps(run, texts, size=EMBED_PROGRESS_CHUNKS, stage="embed", after=embedded)


def _steps(run: IngestionRun, texts: Sequence[str], size: int) -> list[np.ndarray]:
    """Positions in ``texts`` in groups of about ``size``: at the embedder's own batch
    boundaries when it can say where they fall, else in equal steps, longest first
    (characters standing in for tokens)."""
    if isinstance(run.embedder, SteppedEmbedder):
        return run.embedder.steps(texts, size)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    # Steps of equal size, at most ``size``: a short last step (300 passages in steps
    # of 128 would end with 44) would be taken for a question's small batch by the
    # embedder and run on one thread (SMALL_BATCH).
    size = -(-len(texts) // -(-len(texts) // size)) if texts else size
    return [np.asarray(order[start : start + size]) for start in range(0, len(texts), size)]


def encode_in_steps(
    run: IngestionRun,
    texts: Sequence[str],
    *,
    size: int,
    stage: str | None,
    after: Callable[[int], None],
) -> Any:
    """``texts`` embedded by the run's model in steps of about ``size`` texts (see
    ``_steps``), a stop heeded before each step and ``after`` told how many are done
    after it (each encode timed as ``stage``, when named); the vectors in the order
    of ``texts``."""
    steps = _steps(run, texts, size)
    parts = []
    done = 0
    for step in steps:
        run.check_stop()
        with run.stage(stage) if stage else nullcontext():
            parts.append(run.embedder.encode([texts[i] for i in step]))
        done += len(step)
        after(done)
    vectors = np.empty_like(parts[0], shape=(len(texts), parts[0].shape[1]))
    vectors[np.concatenate(steps)] = np.concatenate(parts)
    return vectors


def units_embed(run: IngestionRun, pending: list[PendingSource]) -> list[bytes | None]:
    """Per chunk of ``pending`` (in order), its units' vectors for extractive answers.

    With ``RAG["ingestion"]["unit_vectors"]`` = ``ingestion``, embedded now,
    with the passages, so that no answer embeds them while a question waits
    (``collections_app.embedding.unit_vectors``); in steps of
    ``EMBED_PROGRESS_CHUNKS`` chunks, heeding a stop between them. Otherwise
    none: ``units_after`` embeds them at the end of the run (``after``, the
    default), or the first answer that reads a passage does (``first-use``).
    """
    if run.units_when != "ingestion":
        return [None] * sum(len(p.drafts) for p in pending)
    chunks = [
        ChunkUnits(text=d.text, title=p.source.title, location=p.source.location)
        for p in pending
        for d in p.drafts
    ]
    blobs: list[bytes | None] = []
    for start in range(0, len(chunks), EMBED_PROGRESS_CHUNKS):
        if start:
            run.check_stop()
        with run.stage("embed"):
            blobs += unit_vectors_compute(
                run.embedder, chunks[start : start + EMBED_PROGRESS_CHUNKS]
            )
    return blobs


def units_after(run: IngestionRun) -> None:
    """With ``unit_vectors`` = ``after`` (the default): the units of the passages the
    run wrote, once every one of them is stored and indexed.

    The passages are searchable from the moment they are stored; this is the
    run's last step, reported as the stage ``units`` and in progress messages.
    The units of up to ``UNITS_GROUP_CHUNKS`` passages are embedded together,
    in steps of about ``UNITS_STEP_TEXTS`` cut at the model's own batch
    boundaries (so batches pad as little as in one call), with a stop heeded
    between steps. A passage
    an answer has read in the meantime has its units already (the answer stored
    them) and is skipped; a run stopped here leaves the rest to the answers
    that read them. So does a failure here, which the sources, all ingested by
    now, do not share: it is logged and is a warning of the run.
    """
    if run.units_when != "after" or not run.sources_written:
        return
    rows = (
        Chunk.objects.filter(
            source_id__in=run.sources_written,
            kind=Chunk.Kind.PASSAGE,
            unit_vectors__isnull=True,
        )
        .order_by("source_id", "ordinal")
        .values_list("pk", "text", "source__title", "source__location")
    )
    pending = [
        (pk, ChunkUnits(text=text, title=title, location=location))
        for pk, text, title, location in rows
    ]
    for start in range(0, len(pending), UNITS_GROUP_CHUNKS):
        group = pending[start : start + UNITS_GROUP_CHUNKS]
        stepped = _SteppedEncoder(run, first=start + 1, last=start + len(group), total=len(pending))
        try:
            with run.stage("units"):
                unit_vectors_fill(stepped, group)
        except (RunInterrupted, *DATABASE_LOST):
            raise
        except Exception as exc:
            logger.exception("embedding the units of the run's passages failed")
            run.report.warnings.append(
                f"the sentences of {len(pending) - start} passages were not embedded for "
                f"extractive answers ({exc}); answers embed them when they first read them"
            )
            return


# Passages whose units are embedded together, and units per step within them.
UNITS_GROUP_CHUNKS = 2048
UNITS_STEP_TEXTS = 1024


class _SteppedEncoder:
    """The run's embedder for one group of ``units_after`` (passages ``first`` to
    ``last`` of ``total``): in steps (``encode_in_steps``), heeding a stop and
    reporting progress between them; vectors back in the order asked."""

    def __init__(self, run: IngestionRun, *, first: int, last: int, total: int) -> None:
        self.run = run
        self.profile = run.embedder.profile
        whole = first == 1 and last == total
        self.passages = f"{total} passages" if whole else f"passages {first} to {last} of {total}"

    def encode(self, texts: Sequence[str]) -> Any:
        def embedded(done: int) -> None:
            self.run.notify(
                f"preparing extractive answers: {done} of {len(texts)} sentences of "
                f"{self.passages} embedded"
            )

        # The units stage is timed around the whole group (units_after).
        return encode_in_steps(self.run, texts, size=UNITS_STEP_TEXTS, stage=None, after=embedded)
