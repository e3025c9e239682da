"""One ingestion job shared by many workers: split into parts, added up in one place.

Before: a job ran whole on the one worker that claimed it, however many workers
were idle. Now a job of more than ``part_sources`` sources is split into parts
that any worker claims; the job row carries the sums of its parts and parts
done of total, and the part that ends last finishes the job, once. These tests
run the parts in this process (one worker, or a part whose worker died); the
tests with two real Celery workers are in ``test_job_fanout_workers.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import Collection, IngestionPart, ManifestEntry, Provenance, Source
from collections_app.services import (
    collection_create,
    ingestion_job_claim,
    ingestion_job_create,
    ingestion_job_execute,
    ingestion_jobs_drain,
    ingestion_jobs_reconcile,
    membership_set,
)
from collections_app.services.jobs import JobTiming
from collections_app.services.jobs.fanout import (
    ingestion_part_claim,
    ingestion_part_run,
    job_split,
)
from tests.support.clients import token_client
from tests.support.ingestion_results import (
    chunk_rows,
    duplicate_chunks,
    job_transitions_record,
    manifest_rows,
    notes_write,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def parts_of_two(rag_set) -> None:
    rag_set("jobs.part_sources", 2)


def test_a_split_job_ends_like_an_unsplit_one_with_its_parts_added_up(
    user, collection, tmp_path, parts_of_two, client
):
    notes = notes_write(tmp_path / "notes", 7)
    reference = collection_create(name="Reference", slug="reference", user=user)
    whole, _ = ingestion_job_create(collection=reference, locations=notes, operator=True)
    ingestion_job_execute(job=whole)
    job, _ = ingestion_job_create(collection=collection, user=user, locations=notes, operator=True)
    writes = job_transitions_record()

    ran = ingestion_jobs_drain(worker="w:1")

    job.refresh_from_db()
    assert ran == 1 + 4  # the job (split) and its four parts
    assert job.status == "succeeded", job.error
    assert (job.parts_total, job.parts_done, job.parts_failed) == (4, 4, 0)
    assert (job.sources_total, job.sources_done, job.sources_failed) == (7, 7, 0)
    assert job.chunks_written == sum(p.chunks_written for p in job.parts.all()) > 0
    assert {s["status"] for s in job.report["sources"]} == {"ingested"}
    assert sorted(s["location"] for s in job.report["sources"]) == sorted(notes)
    # The same chunks and the same manifest as the job run whole, nothing twice.
    assert chunk_rows(collection) == chunk_rows(reference)
    assert manifest_rows(collection) == manifest_rows(reference)
    assert duplicate_chunks(collection) == []
    # Progress only moved forward, part by part, and the job finished once.
    rows = writes()
    done = [row["sources_done"] for row in rows if row["status"] == "running"]
    assert done == sorted(done) and done[-1] == 7
    assert {row["parts_done"] for row in rows} >= {1, 2, 3, 4}
    assert [row["status"] for row in rows if row["finished"]] == ["succeeded"]

    body = token_client(user).get(f"/api/collections/docs/jobs/{job.pk}").json()
    assert (body["parts_done"], body["parts_total"], body["parts_failed"]) == (4, 4, 0)
    client.force_login(user)
    page = client.get(f"/collections/docs/jobs/{job.pk}/").content.decode()
    assert "4 of 4 parts done" in page


def test_a_part_whose_worker_died_three_times_fails_and_the_other_parts_stand(
    user, collection, tmp_path, parts_of_two, rag_set
):
    rag_set("jobs.max_attempts", 3)
    notes = notes_write(tmp_path / "notes", 6)
    job, _ = ingestion_job_create(collection=collection, user=user, locations=notes, operator=True)
    writes = job_transitions_record()
    # The first worker splits the job, then dies on its first part, for the third time.
    claimed = ingestion_job_claim(worker="gone-host:4242")
    assert claimed is not None
    assert job_split(claimed, worker="gone-host:4242", timing=JobTiming.from_settings())
    doomed = ingestion_part_claim(worker="gone-host:4242")
    assert doomed is not None and doomed.index == 0
    stale = timezone.now() - timedelta(minutes=10)
    IngestionPart.objects.filter(pk=doomed.pk).update(heartbeat_at=stale, attempts=3)

    ingestion_jobs_drain(worker="w:2")

    job.refresh_from_db()
    assert job.status == "running" and (job.parts_done, job.parts_total) == (2, 3)
    outcome = ingestion_jobs_reconcile()
    assert outcome.failed_parts == [doomed.pk]

    job.refresh_from_db()
    assert job.status == "partial", job.error
    assert (job.parts_done, job.parts_failed, job.sources_failed, job.sources_done) == (2, 1, 2, 6)
    outcomes = {s["location"]: s for s in job.report["sources"]}
    lost = [item["location"] for item in doomed.items]
    for location in notes:
        if location in lost:
            assert outcomes[location]["status"] == "failed"
            assert "interrupted 3 times" in outcomes[location]["reason"]
        else:
            assert outcomes[location]["status"] == "ingested"
    assert any("part 1 failed" in w for w in job.report["warnings"])
    assert Source.objects.filter(collection=collection, status="ready").count() == 4
    assert [row["status"] for row in writes() if row["finished"]] == ["partial"]
    # A second check finds nothing to do: the job is not finished again.
    again = ingestion_jobs_reconcile()
    assert again.failed_parts == [] and again.finished == []
    assert len([row for row in writes() if row["finished"]]) == 1
    assert Provenance.objects.filter(job=job).count() == 4


def test_a_small_job_or_a_reindex_runs_whole(user, collection, tmp_path, parts_of_two):
    notes = notes_write(tmp_path / "notes", 2)
    small, _ = ingestion_job_create(
        collection=collection, user=user, locations=notes, operator=True
    )
    more = notes_write(tmp_path / "more", 3)
    reindex, _ = ingestion_job_create(
        collection=collection, user=user, locations=more, reindex=True, operator=True
    )

    ingestion_jobs_drain(worker="w:1")

    for job in (small, reindex):
        job.refresh_from_db()
        assert job.status == "succeeded", job.error
        assert job.parts_total == 0
    assert not IngestionPart.objects.exists()


def test_another_users_job_waits_for_one_part_of_a_split_job_at_most(
    user, other_user, collection, tmp_path, parts_of_two
):
    membership_set(collection=collection, user=other_user, role="write")
    big, _ = ingestion_job_create(
        collection=collection,
        user=user,
        locations=notes_write(tmp_path / "big", 8),
        operator=True,
    )
    theirs, _ = ingestion_job_create(
        collection=collection,
        user=other_user,
        locations=notes_write(tmp_path / "theirs", 1),
        operator=True,
    )

    ingestion_jobs_drain(worker="w:1")

    theirs.refresh_from_db()
    assert theirs.status == "succeeded"
    started = list(big.parts.order_by("started_at").values_list("started_at", flat=True))
    assert len(started) == 4
    # The split job's first part ran, then the other user's job, then the rest.
    assert started[0] < theirs.started_at < started[1]


def test_reading_a_split_job_whose_part_lost_its_worker_queues_the_part_again(
    user, collection, tmp_path, parts_of_two
):
    job, _ = ingestion_job_create(
        collection=collection,
        user=user,
        locations=notes_write(tmp_path / "notes", 4),
        operator=True,
    )
    claimed = ingestion_job_claim(worker="w:1")
    assert claimed is not None
    assert job_split(claimed, worker="w:1", timing=JobTiming.from_settings())
    orphan = ingestion_part_claim(worker="gone-host:4242")
    assert orphan is not None
    stale = timezone.now() - timedelta(minutes=10)
    IngestionPart.objects.filter(pk=orphan.pk).update(heartbeat_at=stale)

    body = token_client(user).get(f"/api/collections/docs/jobs/{job.pk}").json()

    assert body["status"] == "running" and body["parts_total"] == 2
    orphan.refresh_from_db()
    assert orphan.status == "queued" and "no sign of life" in orphan.error
    # Any worker now takes it; the job ends as if nothing had happened.
    ingestion_jobs_drain(worker="w:2")
    job.refresh_from_db()
    assert job.status == "succeeded" and job.parts_done == 2


def test_a_part_that_fails_as_a_whole_is_recorded_and_the_job_keeps_the_others(
    user, collection, tmp_path, parts_of_two
):
    notes = notes_write(tmp_path / "notes", 4)
    job, _ = ingestion_job_create(collection=collection, user=user, locations=notes, operator=True)
    claimed = ingestion_job_claim(worker="w:1")
    assert claimed is not None
    assert job_split(claimed, worker="w:1", timing=JobTiming.from_settings())
    first = ingestion_part_claim(worker="w:1")
    assert first is not None
    ingestion_part_run(first, worker="w:1")
    # Another model is recorded for the collection before the second part runs.
    Collection.objects.filter(pk=collection.pk).update(embedding_model="another-model")

    ingestion_jobs_drain(worker="w:2")

    job.refresh_from_db()
    assert job.status == "partial"
    assert (job.parts_done, job.parts_failed, job.sources_failed) == (1, 1, 2)
    outcomes = {s["location"]: s for s in job.report["sources"]}
    assert [outcomes[n]["status"] for n in notes] == ["ingested", "ingested", "failed", "failed"]
    assert "another-model" in outcomes[notes[2]]["reason"]
    assert any(w.startswith("part 2 failed") for w in job.report["warnings"])
    assert ManifestEntry.objects.filter(collection=collection).count() == 2
