"""Building, refreshing and removing a collection's summary tree.

Nodes are ``Chunk`` rows of kind ``summary``: one per section holding at least
two passages, one per document of at least two passages (built from its
section summaries, RAPTOR-style, and from the passages of sections too small
to have one). Each is embedded and indexed like a passage, so retrieval finds
it, and lists its ``members``: the passages it summarises, through which it is
cited (a citation always points at the document's own text).

A source's nodes carry the fingerprint of the passages they were built from;
re-ingesting a changed source replaces its chunks (summaries included), and
the next update builds the nodes of every source whose fingerprint changed.
Turning the tree off removes every node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from collections_app.embedding import Embedder
from collections_app.ingestion.summary_tree.summarizers import (
    Summarizer,
    SummaryInput,
    summarizer_for,
)
from collections_app.models import Chunk, Collection, Source

# Summary nodes sort after any passage of their source.
SUMMARY_ORDINAL_BASE = 1_000_000
# A section needs this many passages to get its own node (one passage is its own summary).
MIN_SECTION_PASSAGES = 2
# Bump when the tree's shape or texts change: every node is then rebuilt.
TREE_VERSION = 1


@dataclass
class SummaryTreeReport:
    """What an update did: documents (re)built, nodes written and removed, warnings."""

    documents: int = 0
    nodes: int = 0
    removed: int = 0
    summarizer: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.nodes or self.removed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "nodes": self.nodes,
            "removed": self.removed,
            "summarizer": self.summarizer,
            "warnings": list(self.warnings),
        }


def summary_tree_remove(*, collection: Collection) -> int:
    """Delete every summary node of ``collection``; return how many."""
    deleted, _ = Chunk.objects.filter(collection=collection, kind=Chunk.Kind.SUMMARY).delete()
    return deleted


def summary_tree_update(
    *,
    collection: Collection,
    embedder: Embedder,
    progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], None] | None = None,
) -> SummaryTreeReport:
    """Bring the collection's summary tree in line with its passages and its setting.

    Off: every node is removed. On: the nodes of each document whose passages
    changed since they were built are rebuilt; unchanged documents cost nothing.
    ``progress`` is told each document done; ``should_stop`` may raise to stop
    between documents (the documents finished are kept).
    """
    report = SummaryTreeReport()
    if not collection.summary_tree:
        report.removed = summary_tree_remove(collection=collection)
        return report
    name = str(settings.RAG.get("ingestion", {}).get("summarizer") or "auto")
    summarizer = summarizer_for(embedder, name)
    report.summarizer = summarizer.name
    built = dict(
        Chunk.objects.filter(collection=collection, kind=Chunk.Kind.SUMMARY)
        .order_by()
        .values_list("source_id", "metadata__fingerprint")
    )
    sources = list(
        Source.objects.filter(collection=collection, chunk_count__gt=0)
        .exclude(status__in=[Source.Status.QUARANTINED, Source.Status.REJECTED])
        .only("id", "title", "location", "content_hash")
    )
    # Nodes of sources that no longer have passages (removed sources take theirs along).
    stale = Chunk.objects.filter(collection=collection, kind=Chunk.Kind.SUMMARY).exclude(
        source_id__in=[s.pk for s in sources]
    )
    report.removed += stale.delete()[0]
    for done, source in enumerate(sources, start=1):
        if should_stop is not None:
            should_stop()
        passages = list(
            Chunk.objects.filter(source=source, kind=Chunk.Kind.PASSAGE)
            .order_by("ordinal")
            .only(
                "id",
                "ordinal",
                "text",
                "char_start",
                "char_end",
                "page",
                "section_path",
                "embedding",
            )
        )
        fingerprint = _fingerprint(passages, summarizer.name)
        if built.get(source.pk) == fingerprint:
            continue
        nodes = _source_nodes(
            collection=collection,
            source=source,
            passages=passages,
            summarizer=summarizer,
            embedder=embedder,
            fingerprint=fingerprint,
            report=report,
        )
        with transaction.atomic():
            report.removed += Chunk.objects.filter(source=source, kind=Chunk.Kind.SUMMARY).delete()[
                0
            ]
            # Two runs of one collection may build the same nodes (same ids) at once.
            Chunk.objects.bulk_create(nodes, ignore_conflicts=True)
        report.documents += 1
        report.nodes += len(nodes)
        if progress is not None:
            progress(f"summary tree: {done} of {len(sources)} documents")
    return report


def _fingerprint(passages: Sequence[Chunk], summarizer: str) -> str:
    key = "\x00".join([str(TREE_VERSION), summarizer, *(p.pk for p in passages)])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass
class _Node:
    level: str
    section: tuple[str, ...]
    members: list[Chunk]
    text: str = ""


def _source_nodes(
    *,
    collection: Collection,
    source: Source,
    passages: list[Chunk],
    summarizer: Summarizer,
    embedder: Embedder,
    fingerprint: str,
    report: SummaryTreeReport,
) -> list[Chunk]:
    """The summary chunks of one document: its sections' nodes, then the document's."""
    if len(passages) < 2 or any(p.embedding is None for p in passages):
        return []
    matrix = _unit(np.asarray([np.asarray(p.embedding, dtype=np.float32) for p in passages]))
    row = {p.pk: i for i, p in enumerate(passages)}
    title = source.title or source.location.rsplit("/", 1)[-1]
    sections: dict[tuple[str, ...], list[Chunk]] = {}
    for p in passages:
        sections.setdefault(tuple(p.section_path or ()), []).append(p)
    nodes: list[_Node] = []
    if len(sections) > 1:
        for path, members in sections.items():
            if path and len(members) >= MIN_SECTION_PASSAGES:
                nodes.append(_Node("section", path, members))
    for node in nodes:
        rows = [row[m.pk] for m in node.members]
        node.text = _summarize(
            summarizer,
            SummaryInput(
                title=title,
                section=node.section,
                level="section",
                texts=[m.text for m in node.members],
                vectors=matrix[rows],
                centre=_centre(matrix[rows]),
            ),
            report,
        )
    # The document's node reads its sections' summaries and the passages of the
    # sections too small to have one.
    summarised = {m.pk for n in nodes for m in n.members}
    children = [(n.text, _centre(matrix[[row[m.pk] for m in n.members]])) for n in nodes]
    children += [(p.text, matrix[row[p.pk]]) for p in passages if p.pk not in summarised]
    document = _Node("document", (), passages)
    document.text = _summarize(
        summarizer,
        SummaryInput(
            title=title,
            section=(),
            level="document",
            texts=[text for text, _ in children],
            vectors=_unit(np.asarray([v for _, v in children])),
            centre=_centre(matrix),
        ),
        report,
    )
    nodes = [n for n in [*nodes, document] if n.text.strip()]
    headers = [_header(title, n.section) for n in nodes]
    texts = [header + node.text for header, node in zip(headers, nodes, strict=True)]
    if not texts:
        return []
    embedded = _unit(np.asarray(embedder.encode(texts)))
    location = f"{collection.pk}:{source.location}"
    return [
        Chunk(
            id=hashlib.sha256(
                f"summary\x00{location}\x00{fingerprint}\x00{index}".encode()
            ).hexdigest()[:32],
            collection=collection,
            source=source,
            source_hash=source.content_hash,
            ordinal=SUMMARY_ORDINAL_BASE + index,
            text=node.text,
            char_start=min(m.char_start for m in node.members),
            char_end=max(m.char_end for m in node.members),
            page=node.members[0].page,
            section_path=list(node.section),
            token_count=len(node.text.split()),
            metadata={
                "level": node.level,
                "fingerprint": fingerprint,
                "summarizer": summarizer.name,
            },
            header=header,
            embedding=vector.tolist(),
            kind=Chunk.Kind.SUMMARY,
            members=[m.pk for m in node.members],
        )
        for index, (node, header, vector) in enumerate(zip(nodes, headers, embedded, strict=True))
    ]


def _summarize(summarizer: Summarizer, node: SummaryInput, report: SummaryTreeReport) -> str:
    try:
        return summarizer.summarize(node).strip()
    except Exception as exc:
        # One node's failure (the chat model erring) must not stop the tree: that
        # node gets the offline summary instead.
        fallback = getattr(summarizer, "fallback", None)
        report.warnings.append(
            f"{node.level} summary of {' > '.join(node.section) or node.title!r} "
            f"({summarizer.name}) failed: {exc}"
            + ("; centroid sentences used instead" if fallback is not None else "")
        )
        return fallback.summarize(node).strip() if fallback is not None else ""


def _header(title: str, section: tuple[str, ...]) -> str:
    return " > ".join([title, *section]) + "\n"


def _centre(matrix: np.ndarray) -> np.ndarray:
    mean = matrix.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm else mean


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
