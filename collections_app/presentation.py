"""What the collection pages show, prepared from rows: job panels, quarantine entries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.utils.safestring import SafeString

from collections_app.highlight import signal_windows, signals_with_offsets
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders.base import format_bytes
from collections_app.ingestion.report import names_with_counts
from collections_app.models import IngestionJob, QuarantineItem
from collections_app.selectors import JobRow, job_rows


@dataclass
class JobPanel:
    """A job with the per-source rows of its progress panel."""

    job: IngestionJob
    rows: list[JobRow]


def job_panel(job: IngestionJob) -> JobPanel:
    return JobPanel(job=job, rows=job_rows(job))


@dataclass
class SignalGroup:
    """All signals of one name: listed once, with how often it was found."""

    name: str
    count: int
    # Each distinct detail once, in the order found.
    details: list[str]

    @property
    def label(self) -> str:
        return names_with_counts([self.name] * self.count)


def signal_groups(signals: Iterable[Mapping[str, object]]) -> list[SignalGroup]:
    """Signals grouped by name, in the order each name was first found."""
    groups: dict[str, SignalGroup] = {}
    for signal in signals:
        name = str(signal.get("name") or "unnamed signal")
        group = groups.setdefault(name, SignalGroup(name=name, count=0, details=[]))
        group.count += 1
        detail = str(signal.get("detail") or "")
        if detail and detail not in group.details:
            group.details.append(detail)
    return list(groups.values())


@dataclass
class QueueEntry:
    """A quarantine item with its signals marked in the held text."""

    item: QuarantineItem
    # Excerpts of the held text with every signal marked, when the source still
    # holds the text the item was flagged for.
    windows: list[SafeString]
    # Signals that do not point into the visible text (hidden content).
    unplaced: list[dict[str, object]]
    # The signals listed once per name, repeats counted.
    groups: list[SignalGroup] = field(default_factory=list)


def quarantine_entry(item: QuarantineItem) -> QueueEntry:
    source = item.source
    same_text = item.content_hash in {
        source.content_hash,
        (source.metadata or {}).get("pending_hash"),
    }
    windows = signal_windows(source.text, item.signals) if same_text else []
    placed = signals_with_offsets(item.signals) if windows else set()
    unplaced = [s for i, s in enumerate(item.signals) if i not in placed]
    return QueueEntry(item, windows, unplaced, signal_groups(item.signals))


def max_file_size() -> str:
    """The largest accepted upload, for people: ``"50.0 MiB"``."""
    return format_bytes(IngestionLimits.from_settings().max_file_bytes)
