"""Per-collection HNSW indexes over the dimension-less embedding column.

pgvector's HNSW needs a fixed dimension, and collections may use embedding
models of different sizes. Each collection therefore gets a partial expression
index ``(embedding::vector(d)) vector_cosine_ops WHERE collection_id = <id>``;
vector search casts the same way and filters on the same collection id, so the
planner uses that collection's index and never scans the table.
"""

from __future__ import annotations

from django.db import connection


def vector_index_name(collection_id: int) -> str:
    return f"chunk_hnsw_c{int(collection_id)}"


def vector_index_ensure(*, collection_id: int, dimensions: int) -> None:
    """Create the collection's HNSW index for ``dimensions`` (drop one of another size)."""
    name = vector_index_name(collection_id)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            [name],
        )
        row = cur.fetchone()
        if row and f"vector({int(dimensions)})" in row[0]:
            return
        if row:
            cur.execute(f'DROP INDEX IF EXISTS "{name}"')
        cur.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON collections_app_chunk '
            f"USING hnsw ((embedding::vector({int(dimensions)})) vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) "
            f"WHERE collection_id = {int(collection_id)}"
        )


def vector_index_drop(*, collection_id: int) -> None:
    with connection.cursor() as cur:
        cur.execute(f'DROP INDEX IF EXISTS "{vector_index_name(collection_id)}"')
