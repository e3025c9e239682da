"""Retrieved summary nodes are cited through their member passages.

A collection with a summary tree (collections_app/ingestion/summary_tree/)
holds summary chunks beside its passages, and both legs find them. A summary
is never a passage of the answer: each one retrieved is replaced, at its rank
and with its score, by its best member passages (nearest the probe, up to
``retrieval.summary_members``), so every citation and highlight points at the
document's own text. The trace says which summary brought which passages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from collections_app.models import Chunk
from collections_app.search_index.passages import PassageRow

Hydrate = Callable[[list[str]], Mapping[str, PassageRow]]


def summaries_expand(
    order: list[str],
    scores: Mapping[str, float],
    rows: dict[str, PassageRow],
    *,
    hydrate: Hydrate,
    per_summary: int,
) -> tuple[list[str], dict[str, float], dict[str, Any] | None]:
    """``order`` with every summary replaced by its best members; their scores; the trace.

    ``rows`` gains the member rows read (through ``hydrate``, which annotates the
    probe similarity). The list keeps its length bound: passages pushed past it
    by members drop off, as they would behind any better hit.
    """
    summaries = [cid for cid in order if _is_summary(rows.get(cid))]
    if not summaries:
        return order, dict(scores), None
    wanted = [m for cid in summaries for m in rows[cid].members if m not in rows]
    if wanted:
        rows.update(hydrate(list(dict.fromkeys(wanted))))
    expanded: list[str] = []
    new_scores: dict[str, float] = {}
    trace: list[dict[str, Any]] = []
    for cid in order:
        row = rows.get(cid)
        if row is None:
            continue
        if not _is_summary(row):
            if cid not in new_scores:
                expanded.append(cid)
                new_scores[cid] = scores[cid]
            continue
        members = [m for m in row.members if m in rows and m not in new_scores]
        members.sort(key=lambda m: -_similarity(rows[m]))
        taken = members[:per_summary]
        for member in taken:
            expanded.append(member)
            new_scores[member] = scores[cid]
        trace.append(
            {
                "summary": cid,
                "level": (row.metadata or {}).get("level", ""),
                "members": len(row.members),
                "passages": taken,
            }
        )
    expanded = expanded[: len(order)]
    details = {"found": len(summaries), "per_summary": per_summary, "nodes": trace}
    return expanded, {cid: new_scores[cid] for cid in expanded}, details


def _is_summary(row: PassageRow | None) -> bool:
    return row is not None and row.kind == Chunk.Kind.SUMMARY


def _similarity(row: PassageRow) -> float:
    value = row.similarity
    # Without a probe vector (keyword-only), members keep document order.
    return float(value) if value is not None else 0.0
