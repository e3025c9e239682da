"""The passages a search found, read by id in one statement.

Retrieval knows a search's hits only by chunk id; the answer needs their text,
place and document. :func:`passages_read` reads them in one plain statement,
without building model instances: this read happens for every question, and
Django's query building and model construction cost more than the read itself
(about 1 CPU-ms of each answer, ``benchmarks/load.py --profile``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection

from collections_app.search_index.columns import jsonb_value, vector_value
from collections_app.search_index.vector import vector_literal

_COLUMNS = (
    "c.id, c.collection_id, c.source_id, s.location, s.title, c.text, c.char_start, "
    "c.char_end, c.page, c.section_path, c.ordinal, c.kind, c.members, c.metadata"
)


@dataclass(frozen=True)
class PassageRow:
    """One chunk as retrieval hands it on: its text, where it is, its document."""

    id: str
    collection_id: int
    source_id: int
    source_location: str
    source_title: str
    text: str
    char_start: int
    char_end: int
    page: int | None
    section_path: list[str]
    ordinal: int
    kind: str
    members: list[str]
    metadata: dict[str, Any]
    # Cosine to the probe (None: no probe vector, or the chunk has another size).
    similarity: float | None = None
    # The stored vector, when asked for.
    embedding: np.ndarray | None = None


def passages_read(
    *,
    collection_id: int,
    ids: Sequence[str],
    vector: np.ndarray | None = None,
    with_embeddings: bool = False,
) -> dict[str, PassageRow]:
    """The chunks ``ids`` of the collection, by id (those that exist).

    With ``vector``, each carries its cosine to it, keyword-only hits included,
    so that every candidate is judged on one scale; a chunk embedded at another
    size (mid-reindex) has None.
    """
    if not ids:
        return {}
    params: list[Any] = []
    extra = ""
    if vector is not None:
        dims = len(vector)
        extra += (
            f", CASE WHEN vector_dims(c.embedding) = {dims} THEN "
            f"1 - ((c.embedding::vector({dims})) <=> %s::vector({dims})) END"
        )
        params.append(vector_literal(vector))
    else:
        extra += ", NULL"
    extra += ", c.embedding" if with_embeddings else ", NULL"
    # By primary key alone: Postgres then always reads the few rows through the
    # key. With ``collection_id`` in the WHERE, a collection created since the
    # table was last analysed looked empty to the planner, which then walked that
    # whole collection (0.3 s at 100k chunks); the ids' collection is checked here.
    sql = (
        f"SELECT {_COLUMNS}{extra} FROM collections_app_chunk c "
        "JOIN collections_app_source s ON s.id = c.source_id WHERE c.id = ANY(%s)"
    )
    params.append(list(ids))
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    found: dict[str, PassageRow] = {}
    for row in rows:
        if row[1] != collection_id:
            continue
        similarity, embedding = row[14], row[15]
        found[row[0]] = PassageRow(
            id=row[0],
            collection_id=row[1],
            source_id=row[2],
            source_location=row[3],
            source_title=row[4],
            text=row[5],
            char_start=row[6],
            char_end=row[7],
            page=row[8],
            section_path=list(jsonb_value(row[9]) or []),
            ordinal=row[10],
            kind=row[11],
            members=list(jsonb_value(row[12]) or []),
            metadata=dict(jsonb_value(row[13]) or {}),
            similarity=float(similarity) if similarity is not None else None,
            embedding=vector_value(embedding) if embedding is not None else None,
        )
    return found
