"""Collection-wide term statistics for BM25-style keyword scoring.

Postgres full-text ranking (ts_rank_cd) knows nothing about how rare a term is
across the collection; BM25 needs each lexeme's document frequency and the
average document length. They are recomputed from the chunks' tsvectors after
every ingestion that changed chunks.
"""

from __future__ import annotations

from django.db import connection, transaction

from collections_app.models import Collection


def collection_term_stats_refresh(*, collection: Collection) -> dict[str, float]:
    """Recompute TermStat rows and ``collection.keyword_stats``; return the stats."""
    cid = int(collection.pk)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("DELETE FROM collections_app_termstat WHERE collection_id = %s", [cid])
        # ts_stat takes the query as text; cid is an int, so inlining is safe.
        cur.execute(
            "INSERT INTO collections_app_termstat (collection_id, lexeme, ndoc) "
            "SELECT %s, word, ndoc FROM ts_stat("
            f"'SELECT search_vector FROM collections_app_chunk WHERE collection_id = {cid}')",
            [cid],
        )
        cur.execute(
            "SELECT count(*), coalesce(avg(length(search_vector)), 0) "
            "FROM collections_app_chunk WHERE collection_id = %s",
            [cid],
        )
        chunks, avg_lexemes = cur.fetchone()
        stats = {"chunks": int(chunks), "avg_lexemes": float(avg_lexemes)}
        Collection.objects.filter(pk=cid).update(keyword_stats=stats)
    collection.keyword_stats = stats
    return stats
