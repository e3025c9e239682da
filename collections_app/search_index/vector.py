"""Vector search: the nearest chunks of one collection, answered from its HNSW index.

The query casts and filters exactly like the collection's partial index
(:mod:`.ddl`: ``embedding::vector(d)`` ... ``WHERE collection_id = <id> AND
vector_dims(embedding) = d``), so Postgres walks that index instead of
scanning the chunk table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import psycopg
from django.db import connection, transaction

from collections_app.search_index.columns import vector_value
from collections_app.search_index.ddl import vector_distance_sql, vector_index_predicate

EF_SEARCH_SQL = "SELECT set_config('hnsw.ef_search', %s, true)"


@lru_cache(maxsize=8)
def _literal_format(dimensions: int) -> str:
    return "[" + ",".join(["%.7g"] * dimensions) + "]"


def vector_literal(vector: Iterable[float]) -> str:
    """The pgvector text form of ``vector`` (7 significant digits, as float32 holds)."""
    values = tuple(float(x) for x in (vector.tolist() if hasattr(vector, "tolist") else vector))
    return _literal_format(len(values)) % values


def vector_search(
    *, collection_id: int, dimensions: int, vector: Iterable[float], k: int, ef_search: int
) -> list[tuple[str, float]]:
    """(chunk id, cosine similarity) of the ``k`` nearest chunks, via the HNSW index.

    ``vector`` must have ``dimensions`` components; the caller checks, because
    only it can say which collection and model the mismatch is about.
    """
    literal = vector_literal(vector)
    distance = vector_distance_sql(dimensions=dimensions)
    # Same expression and predicate as the partial index.
    sql = (
        f"SELECT id, 1 - ({distance}) AS similarity "
        f"FROM collections_app_chunk WHERE "
        f"{vector_index_predicate(collection_id=collection_id, dimensions=dimensions)} "
        f"ORDER BY {distance} LIMIT %s"
    )
    with connection.cursor() as cur:
        # ef_search bounds the HNSW candidate list: it must be ≥ k or the index
        # returns fewer rows than asked for. set_config(..., true) is local to
        # the transaction; the statements of one simple query are one transaction
        # (inside an atomic block, the block's own), so the setting and the search
        # go in one round trip instead of four (BEGIN, set, search, COMMIT).
        if isinstance(cur.cursor, psycopg.ClientCursor):
            cur.execute(f"{EF_SEARCH_SQL}; {sql}", [str(ef_search), literal, literal, k])
            cur.nextset()
            return [(row[0], float(row[1])) for row in cur.fetchall()]
    # Server-side binding (a deployment's OPTIONS) takes one statement at a time.
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(EF_SEARCH_SQL, [str(ef_search)])
        cur.execute(sql, [literal, literal, k])
        return [(row[0], float(row[1])) for row in cur.fetchall()]


def document_means(
    *, collection_id: int, dimensions: int, chunk_ids: Sequence[str]
) -> dict[str, np.ndarray]:
    """The document vector of each chunk, by chunk id: the mean of its document's
    passages' vectors (summary nodes left out), scaled to unit length.

    One statement: the documents of the chunks asked for, then their passages.
    Chunks of one document share one array.
    """
    if not chunk_ids:
        return {}
    d = int(dimensions)
    sql = (
        "WITH asked AS (SELECT id, source_id FROM collections_app_chunk "
        "WHERE collection_id = %s AND id = ANY(%s)), "
        "documents AS ("
        f"SELECT c.source_id, AVG(c.embedding::vector({d})) AS mean "
        "FROM collections_app_chunk c "
        "WHERE c.collection_id = %s AND c.kind = 'passage' "
        f"AND vector_dims(c.embedding) = {d} "
        "AND c.source_id IN (SELECT source_id FROM asked) GROUP BY c.source_id) "
        "SELECT asked.id, asked.source_id, documents.mean FROM asked "
        "JOIN documents ON documents.source_id = asked.source_id"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [int(collection_id), list(chunk_ids), int(collection_id)])
        rows = cur.fetchall()
    means: dict[int, np.ndarray] = {}
    found: dict[str, np.ndarray] = {}
    for chunk_id, source_id, text in rows:
        if text is None:
            continue
        if source_id not in means:
            mean = vector_value(text)
            norm = float(np.linalg.norm(mean))
            if norm == 0.0:
                continue
            means[source_id] = mean / norm
        found[chunk_id] = means[source_id]
    return found
