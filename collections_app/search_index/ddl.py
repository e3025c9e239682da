"""The vector index's DDL: per-collection HNSW indexes over the dimension-less embedding column.

pgvector's HNSW needs a fixed dimension, and collections may use embedding
models of different sizes. Each collection therefore gets a partial expression
index ``(embedding::vector(d)) vector_cosine_ops`` whose predicate is
:func:`vector_index_predicate` (the collection id *and* the vector size). Vector
search casts the same way and filters with the same predicate, so the planner
uses that collection's index and never scans the table.

The size check in the predicate matters: after a collection is re-embedded
with a model of another size, old row versions stay in the heap until vacuum,
and CREATE INDEX reads those too; without the check their cast would fail.
"""

from __future__ import annotations

from django.db import connection
from django.db.backends.utils import CursorWrapper


def vector_index_name(collection_id: int, dimensions: int | None = None) -> str:
    """The index name; without ``dimensions``, the common prefix of all its sizes."""
    base = f"chunk_hnsw_c{int(collection_id)}"
    return base if dimensions is None else f"{base}_d{int(dimensions)}"


def vector_index_predicate(*, collection_id: int, dimensions: int) -> str:
    """The SQL condition a vector query must carry to use the collection's index."""
    return f"collection_id = {int(collection_id)} AND vector_dims(embedding) = {int(dimensions)}"


def vector_distance_sql(*, dimensions: int, placeholder: str = "%s") -> str:
    """The cosine-distance expression the index orders by, against a bound vector."""
    d = int(dimensions)
    return f"(embedding::vector({d})) <=> {placeholder}::vector({d})"


def vector_index_ensure(*, collection_id: int, dimensions: int) -> None:
    """Create the collection's HNSW index for ``dimensions``; drop its other sizes."""
    name = vector_index_name(collection_id, dimensions)
    with connection.cursor() as cur:
        if connection.in_atomic_block:
            # Inside a transaction that just wrote chunks, the deferred foreign-key
            # checks must run before Postgres allows CREATE INDEX on the table.
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
            concurrently = ""
        else:
            # Build without blocking writes to the shared chunk table (other
            # collections keep ingesting meanwhile).
            concurrently = "CONCURRENTLY "
        # An interrupted concurrent build leaves an invalid index behind, which
        # IF NOT EXISTS would take for a finished one.
        cur.execute(
            "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s AND NOT i.indisvalid",
            [name],
        )
        if cur.fetchone():
            cur.execute(f'DROP INDEX IF EXISTS "{name}"')
        cur.execute(
            f'CREATE INDEX {concurrently}IF NOT EXISTS "{name}" ON collections_app_chunk '
            f"USING hnsw ((embedding::vector({int(dimensions)})) vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) "
            f"WHERE {vector_index_predicate(collection_id=collection_id, dimensions=dimensions)}"
        )
        for other in _collection_indexes(cur, collection_id):
            if other != name:
                cur.execute(f'DROP INDEX {concurrently}IF EXISTS "{other}"')


def vector_index_drop(*, collection_id: int) -> None:
    """Drop every vector index of the collection."""
    with connection.cursor() as cur:
        for name in _collection_indexes(cur, collection_id):
            cur.execute(f'DROP INDEX IF EXISTS "{name}"')


def _collection_indexes(cur: CursorWrapper, collection_id: int) -> list[str]:
    prefix = vector_index_name(collection_id)
    cur.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'collections_app_chunk' "
        "AND (indexname = %s OR indexname LIKE %s)",
        [prefix, prefix.replace("_", r"\_") + r"\_d%"],
    )
    return [row[0] for row in cur.fetchall()]
