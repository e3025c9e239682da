"""Many jobs on one collection at once: nothing is lost, nothing fails.

Before: with 991 one-file jobs, 444 sources were missing from the manifest (each
run wrote back the whole manifest it had read), one job failed on a duplicate
key in the keyword statistics refresh and one on a deadlock building the vector
index. These tests run real jobs in threads, each on its own database
connection, against the test database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection, connections

from collections_app.models import Chunk, IngestionJob, ManifestEntry, Source, TermStat
from collections_app.search_index import term_stats_refresh, vector_index_name
from collections_app.services import collection_ingest, ingestion_job_create, ingestion_job_execute

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = [
    "glaciers",
    "volcanoes",
    "tides",
    "monsoons",
    "deserts",
    "coral reefs",
    "aurora",
    "tundra",
]


def _together(calls: list[Callable[[], object]]) -> list[BaseException]:
    """Run ``calls`` in threads released at the same moment; return what they raised."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            barrier.wait()
            call()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return errors


def _files(folder: Path) -> list[Path]:
    folder.mkdir()
    paths = []
    for n, topic in enumerate(TOPICS):
        path = folder / f"note-{n}.md"
        path.write_text(
            f"# Notes on {topic}\n\nField note {n}: {topic} were observed on day {n}. "
            f"The {topic} survey recorded code OBS-{1000 + n}.\n"
        )
        paths.append(path)
    return paths


def test_one_file_jobs_running_together_all_succeed_and_keep_every_manifest_entry(
    user, collection, tmp_path
):
    paths = _files(tmp_path / "notes")
    jobs = [
        ingestion_job_create(
            collection=collection, user=user, locations=[str(path)], operator=True
        )[0]
        for path in paths
    ]

    errors = _together([lambda job=job: ingestion_job_execute(job=job) for job in jobs])

    assert errors == []
    statuses = dict(IngestionJob.objects.values_list("pk", "status"))
    assert set(statuses.values()) == {"succeeded"}, [j.error for j in IngestionJob.objects.all()]
    assert ManifestEntry.objects.filter(collection=collection).count() == len(paths)
    assert Source.objects.filter(collection=collection, status="ready").count() == len(paths)
    # The keyword statistics cover every chunk written by every job.
    collection.refresh_from_db()
    assert collection.keyword_stats["chunks"] == Chunk.objects.filter(collection=collection).count()
    assert TermStat.objects.filter(collection=collection, lexeme="aurora").exists()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [vector_index_name(collection.pk, 384)],
        )
        assert cur.fetchall() == [(True,)]

    # Every entry counts: a second round costs no embeddings at all.
    again = collection_ingest(collection=collection, locations=[str(p) for p in paths])
    assert again.embeddings_computed == 0
    assert again.as_dict()["sources_unchanged"] == len(paths)


def test_statistics_refreshes_running_together_never_collide(collection, tmp_path):
    collection_ingest(collection=collection, locations=[str(p) for p in _files(tmp_path / "n")])
    expected = dict(TermStat.objects.filter(collection=collection).values_list("lexeme", "ndoc"))
    assert expected

    errors = _together([lambda: term_stats_refresh(collection_id=collection.pk) for _ in range(6)])

    assert errors == []
    refreshed = dict(TermStat.objects.filter(collection=collection).values_list("lexeme", "ndoc"))
    assert refreshed == expected
