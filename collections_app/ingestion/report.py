"""The ingestion report: what happened to every source, with per-stage times."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Literal

SourceStatus = Literal["pending", "ingested", "unchanged", "failed", "quarantined", "removed"]
STAGES = ("load", "validate", "chunk", "embed", "upsert", "units")


def names_with_counts(names: Iterable[str]) -> str:
    """Each name once; a repeated name is followed by a times sign and its count.

    Names keep the order they were first found in.
    """
    counts = Counter(names)
    times = "\N{MULTIPLICATION SIGN}"
    return ", ".join(name if n == 1 else f"{name} {times}{n}" for name, n in counts.items())


@dataclass
class SourceOutcome:
    location: str
    status: SourceStatus
    reason: str = ""
    kind: str = ""
    source_id: int | None = None
    chunks_written: int = 0
    embeddings_computed: int = 0
    verdict: str = ""
    signals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class IngestionReport:
    collection: str
    sources: list[SourceOutcome] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    total_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    reindex: bool = False
    chunking: str = ""
    embedding_profile: dict[str, object] = field(default_factory=dict)
    index_version: int = 0
    # What the summary tree step did (documents, nodes, removed), when it changed anything.
    summary_tree: dict[str, object] = field(default_factory=dict)

    def _count(self, status: SourceStatus) -> int:
        return sum(1 for s in self.sources if s.status == status)

    @property
    def sources_seen(self) -> int:
        return sum(1 for s in self.sources if s.status != "removed")

    @property
    def sources_finished(self) -> int:
        return sum(1 for s in self.sources if s.status not in {"pending", "removed"})

    @property
    def sources_failed(self) -> int:
        return self._count("failed")

    @property
    def chunks_written(self) -> int:
        return sum(s.chunks_written for s in self.sources)

    @property
    def embeddings_computed(self) -> int:
        return sum(s.embeddings_computed for s in self.sources)

    def as_dict(self) -> dict[str, object]:
        return {
            "collection": self.collection,
            "sources_seen": self.sources_seen,
            "sources_unchanged": self._count("unchanged"),
            "sources_ingested": self._count("ingested"),
            "sources_failed": self.sources_failed,
            "sources_quarantined": self._count("quarantined"),
            "sources_removed": self._count("removed"),
            "chunks_written": self.chunks_written,
            "embeddings_computed": self.embeddings_computed,
            "stage_seconds": {k: round(v, 4) for k, v in self.stage_seconds.items()},
            "total_seconds": round(self.total_seconds, 4),
            "reindex": self.reindex,
            "chunking": self.chunking,
            "embedding_profile": self.embedding_profile,
            "index_version": self.index_version,
            "warnings": list(self.warnings),
            "sources": [asdict(s) for s in self.sources],
            **({"summary_tree": dict(self.summary_tree)} if self.summary_tree else {}),
        }

    def as_text(self) -> str:
        d = self.as_dict()
        lines = [
            f"Collection {self.collection}: {d['sources_seen']} seen, "
            f"{d['sources_ingested']} ingested, {d['sources_unchanged']} unchanged, "
            f"{d['sources_failed']} failed, {d['sources_quarantined']} quarantined, "
            f"{d['sources_removed']} removed",
            f"Chunks written: {d['chunks_written']}; embeddings computed: "
            f"{d['embeddings_computed']}; total {self.total_seconds:.2f}s",
            "Stage times: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.stage_seconds.items()),
        ]
        lines += [f"warning: {w}" for w in self.warnings]
        for s in self.sources:
            line = f"  [{s.status}] {s.location}"
            if s.chunks_written:
                line += f" ({s.chunks_written} chunks)"
            if s.reason:
                line += f": {s.reason}"
            lines.append(line)
        return "\n".join(lines)
