"""What an ingestion left in the database, in forms two runs can be compared by.

Used by the tests that check that a job split between workers ends exactly
like the same job run whole: the same chunks, the same manifest, nothing twice,
and a job row that moved forward and finished once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import connection

from collections_app.models import Chunk, Collection, ManifestEntry

TOPICS = ["glaciers", "volcanoes", "tides", "monsoons", "deserts", "reefs", "aurora", "tundra"]


def notes_write(folder: Path, count: int) -> list[str]:
    """``count`` distinct Markdown notes of two sections each; their paths, in order."""
    folder.mkdir(parents=True)
    paths = []
    for n in range(count):
        topic = TOPICS[n % len(TOPICS)]
        path = folder / f"note-{n:02d}.md"
        path.write_text(
            f"# Note {n} on {topic}\n\n## Survey\n\nField note {n}: {topic} were observed on "
            f"day {n}. The survey recorded code OBS-{1000 + n}.\n\n## Findings\n\n"
            f"The {topic} of note {n} changed by {n * 3} percent over the season.\n"
        )
        paths.append(str(path))
    return paths


def chunk_rows(collection: Collection) -> dict[str, list[tuple[Any, ...]]]:
    """Each source's chunks (ordinal, text, header, tokens, source hash), by location."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    chunks = Chunk.objects.filter(collection=collection).order_by("source__location", "ordinal")
    for location, *values in chunks.values_list(
        "source__location", "ordinal", "text", "header", "token_count", "source_hash"
    ):
        rows.setdefault(location, []).append(tuple(values))
    return rows


def manifest_rows(collection: Collection) -> dict[str, tuple[Any, ...]]:
    """The collection's manifest: (content hash, chunker, embedding) by location."""
    return {
        location: (content_hash, chunker, embedding)
        for location, content_hash, chunker, embedding in ManifestEntry.objects.filter(
            collection=collection
        ).values_list("location", "content_hash", "chunker", "embedding")
    }


def duplicate_chunks(collection: Collection) -> list[tuple[Any, ...]]:
    """Chunks stored twice, and sources whose chunk count disagrees with their chunks."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT source_id, ordinal, count(*) FROM collections_app_chunk "
            "WHERE collection_id = %s GROUP BY 1, 2 HAVING count(*) > 1",
            [collection.pk],
        )
        twice = cur.fetchall()
        cur.execute(
            "SELECT s.id, s.chunk_count, count(c.id) FROM collections_app_source s "
            "LEFT JOIN collections_app_chunk c ON c.source_id = s.id "
            "WHERE s.collection_id = %s GROUP BY 1, 2 HAVING s.chunk_count <> count(c.id)",
            [collection.pk],
        )
        return twice + cur.fetchall()


class JobWrites:
    """Every write to a job row as the database saw it (a trigger logs them), in order."""

    def __init__(self) -> None:
        with connection.cursor() as cur:
            cur.execute(
                "CREATE TABLE IF NOT EXISTS job_writes (n serial, job int, status text, "
                "finished bool, sources_done int, parts_done int, parts_failed int)"
            )
            cur.execute("TRUNCATE job_writes")
            cur.execute(
                "CREATE OR REPLACE FUNCTION job_writes_log() RETURNS trigger AS $$ BEGIN "
                "INSERT INTO job_writes (job, status, finished, sources_done, parts_done, "
                "parts_failed) VALUES (NEW.id, NEW.status, NEW.status <> OLD.status AND "
                "NEW.status IN ('succeeded', 'partial', 'failed'), NEW.sources_done, "
                "NEW.parts_done, NEW.parts_failed); RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            cur.execute("DROP TRIGGER IF EXISTS job_writes_log ON collections_app_ingestionjob")
            cur.execute(
                "CREATE TRIGGER job_writes_log AFTER UPDATE ON collections_app_ingestionjob "
                "FOR EACH ROW EXECUTE FUNCTION job_writes_log()"
            )

    def __call__(self) -> list[dict[str, Any]]:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT job, status, finished, sources_done, parts_done, parts_failed "
                "FROM job_writes ORDER BY n"
            )
            names = [c.name for c in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def stop(self) -> None:
        """Remove the trigger (a test on a committed database leaves no trace)."""
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER IF EXISTS job_writes_log ON collections_app_ingestionjob")
            cur.execute("DROP TABLE IF EXISTS job_writes")


def job_transitions_record() -> JobWrites:
    """Start logging job row writes; call the result for the rows so far."""
    return JobWrites()
