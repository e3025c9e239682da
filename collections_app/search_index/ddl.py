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

Many runs finish at once (hundreds of one-file jobs): the index usually exists
already, which a catalog lookup settles without any DDL. Building or dropping
one takes turns under an advisory lock: two concurrent builds on the chunk
table wait for each other's transactions and deadlock otherwise. Outside a
transaction the lock is taken by polling ``pg_try_advisory_lock`` between
statements, because ``CREATE INDEX CONCURRENTLY`` waits for every older
transaction, and a session blocked inside a lock-waiting statement would be one.
"""

from __future__ import annotations

import time

from django.db import connection
from django.db.backends.utils import CursorWrapper

# The advisory lock's keys: "vector index DDL" over the whole chunk table.
DDL_LOCK_CLASS = 0x76656374
DDL_LOCK_KEY = 0
DDL_LOCK_POLL_S = 0.05


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
    """Create the collection's HNSW index for ``dimensions``; drop its other sizes.

    Safe to call from many runs at once; a no-op (one catalog query) when the
    index is there and valid and no other size is left.
    """
    name = vector_index_name(collection_id, dimensions)
    with connection.cursor() as cur:
        if _index_ready(cur, collection_id, name):
            return
        if connection.in_atomic_block:
            # Inside a transaction that just wrote chunks, the deferred foreign-key
            # checks must run before Postgres allows CREATE INDEX on the table.
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [DDL_LOCK_CLASS, DDL_LOCK_KEY])
            _index_build(cur, collection_id, dimensions, name, concurrently="")
            return
        _session_lock(cur)
        try:
            # Build without blocking writes to the shared chunk table (other
            # collections keep ingesting meanwhile).
            if not _index_ready(cur, collection_id, name):
                _index_build(cur, collection_id, dimensions, name, concurrently="CONCURRENTLY ")
        finally:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [DDL_LOCK_CLASS, DDL_LOCK_KEY])


def _index_ready(cur: CursorWrapper, collection_id: int, name: str) -> bool:
    """Whether ``name`` exists and is valid and is the collection's only vector index."""
    prefix = vector_index_name(collection_id)
    cur.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname IN (%s, %s) OR c.relname LIKE %s",
        [name, prefix, prefix.replace("_", r"\_") + r"\_d%"],
    )
    found = dict(cur.fetchall())
    return found == {name: True}


def _session_lock(cur: CursorWrapper) -> None:
    # Polled, so this session never sits inside a statement waiting for the lock
    # (a concurrent CREATE INDEX CONCURRENTLY would wait for it, and it for that).
    while True:
        cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [DDL_LOCK_CLASS, DDL_LOCK_KEY])
        row = cur.fetchone()
        if row and row[0]:
            return
        time.sleep(DDL_LOCK_POLL_S)


def _index_build(
    cur: CursorWrapper, collection_id: int, dimensions: int, name: str, *, concurrently: str
) -> None:
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
