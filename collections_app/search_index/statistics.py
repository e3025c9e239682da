"""Collection-wide term statistics for BM25-style keyword scoring.

Postgres full-text ranking (ts_rank_cd) knows nothing about how rare a term is
across the collection; BM25 needs each lexeme's document frequency and the
average document length. They are recomputed from the chunks' tsvectors after
every ingestion that changed chunks: the frequencies into the TermStat rows,
the collection-wide figures into ``Collection.keyword_stats``.

Runs on one collection may finish at the same moment: a transaction-scoped
advisory lock per collection makes their refreshes take turns, and a refresh
that finds the statistics already cover its changes (``covering``: the index
version its last change produced) does nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction

from collections_app.search_index.columns import jsonb_value

if TYPE_CHECKING:
    from collections_app.models import Collection


@dataclass(frozen=True)
class TermStats:
    """The collection-wide figures BM25 needs, as stored in ``Collection.keyword_stats``."""

    chunks: int = 0
    avg_lexemes: float = 0.0

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any] | None) -> TermStats:
        """Read ``Collection.keyword_stats``; missing figures read as zero."""
        stored = stored or {}
        return cls(
            chunks=int(stored.get("chunks") or 0),
            avg_lexemes=float(stored.get("avg_lexemes") or 0.0),
        )

    @property
    def missing(self) -> bool:
        """Never refreshed (or an empty collection): no IDF and no length norm."""
        return self.chunks == 0 or self.avg_lexemes <= 0


# The advisory lock's first key: "term statistics" (the second is the collection id).
STATS_LOCK_CLASS = 0x7465726D


def term_stats_refresh(*, collection_id: int, covering: int | None = None) -> dict[str, Any]:
    """Recompute the collection's TermStat rows and ``keyword_stats``; return the stats.

    With ``covering`` (an index version), a refresh that finds the stored
    statistics computed at that version or later leaves them as they are.
    """
    cid = int(collection_id)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [STATS_LOCK_CLASS, cid])
        # Read after the lock: a refresh that finished meanwhile is visible now.
        cur.execute(
            "SELECT index_version, keyword_stats FROM collections_app_collection WHERE id = %s",
            [cid],
        )
        row = cur.fetchone()
        if row is None:
            return {}
        version, stored = int(row[0]), _stored(row[1])
        if covering is not None and int(stored.get("version", -1)) >= covering:
            return stored
        cur.execute("DELETE FROM collections_app_termstat WHERE collection_id = %s", [cid])
        # ts_stat takes the query as text; cid is an int, so inlining is safe. The
        # conflict clause keeps a refresh correct even without the lock's turn-taking.
        cur.execute(
            "INSERT INTO collections_app_termstat (collection_id, lexeme, ndoc) "
            "SELECT %s, word, ndoc FROM ts_stat("
            f"'SELECT search_vector FROM collections_app_chunk WHERE collection_id = {cid}') "
            "ON CONFLICT (collection_id, lexeme) DO UPDATE SET ndoc = EXCLUDED.ndoc",
            [cid],
        )
        cur.execute(
            "SELECT count(*), coalesce(avg(length(search_vector)), 0) "
            "FROM collections_app_chunk WHERE collection_id = %s",
            [cid],
        )
        chunks, avg_lexemes = cur.fetchone() or (0, 0)
        stats = {"chunks": int(chunks), "avg_lexemes": float(avg_lexemes), "version": version}
        cur.execute(
            "UPDATE collections_app_collection SET keyword_stats = %s::jsonb WHERE id = %s",
            [json.dumps(stats), cid],
        )
    return stats


def _stored(value: Any) -> dict[str, Any]:
    value = jsonb_value(value)
    return value if isinstance(value, dict) else {}


def collection_term_stats_refresh(
    *, collection: Collection, covering: int | None = None
) -> dict[str, Any]:
    """Recompute TermStat rows and ``collection.keyword_stats``; return the stats.

    ``covering``: see :func:`term_stats_refresh`.
    """
    stats = term_stats_refresh(collection_id=int(collection.pk), covering=covering)
    collection.keyword_stats = stats
    return stats


def term_document_frequencies(*, collection_id: int, lexemes: Sequence[str]) -> dict[str, int]:
    """How many chunks of the collection hold each lexeme, as of the last refresh.

    Lexemes absent from the statistics are left out of the answer.
    """
    with connection.cursor() as cur:
        cur.execute(
            "SELECT lexeme, ndoc FROM collections_app_termstat "
            "WHERE collection_id = %s AND lexeme = ANY(%s)",
            [int(collection_id), list(lexemes)],
        )
        return dict(cur.fetchall())
