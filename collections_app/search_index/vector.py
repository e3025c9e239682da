"""Vector search: the nearest chunks of one collection, answered from its HNSW index.

The query casts and filters exactly like the collection's partial index
(:mod:`.ddl`: ``embedding::vector(d)`` ... ``WHERE collection_id = <id> AND
vector_dims(embedding) = d``), so Postgres walks that index instead of
scanning the chunk table.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction

from collections_app.search_index.ddl import vector_distance_sql, vector_index_predicate


def vector_literal(vector: Iterable[float]) -> str:
    """The pgvector text form of ``vector`` (7 significant digits, as float32 holds)."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


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
    with transaction.atomic(), connection.cursor() as cur:
        # ef_search bounds the HNSW candidate list: it must be ≥ k or the
        # index returns fewer rows than asked for. Local to this transaction.
        cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
        cur.execute(sql, [literal, literal, k])
        return [(row[0], float(row[1])) for row in cur.fetchall()]
