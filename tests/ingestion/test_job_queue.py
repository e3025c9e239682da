"""The job queue: fair between users, and a job's progress moves while it embeds.

Before: jobs ran in the order their messages were queued, so one writer's 991
one-file jobs kept everyone else waiting until all of them were done; and a
job's counts changed only when a source was stored, so a large document showed
no progress for as long as the model worked on it.
"""

from __future__ import annotations

import pytest
from django.db import connection

from collections_app.models import IngestionJob
from collections_app.services import (
    collection_create,
    ingestion_job_claim,
    ingestion_job_create,
    ingestion_jobs_drain,
    membership_set,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_quotas(rag_set) -> None:
    rag_set("quotas", {"bytes_per_day": 0, "chunks_per_day": 0, "concurrent_jobs": 0})


@pytest.fixture
def shared(collection, other_user):  # type: ignore[no-untyped-def]
    """alice's ``docs``, where bob may write too."""
    membership_set(collection=collection, user=other_user, role="write")
    return collection


def _note(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.md"
    path.write_text(f"# {name}\n\nThe {name} note records one fact about {name}.\n")
    return str(path)


def test_another_users_job_waits_for_one_job_at_most(user, other_user, shared, tmp_path, no_quotas):
    flood = [
        ingestion_job_create(collection=shared, user=user, locations=[f"/nowhere/{n}.md"])[0]
        for n in range(200)
    ]
    theirs, _ = ingestion_job_create(
        collection=shared, user=other_user, locations=[_note(tmp_path, "bob")]
    )

    order = []
    for _ in range(3):
        job = ingestion_job_claim(worker="w:1")
        assert job is not None
        order.append(job.pk)
        IngestionJob.objects.filter(pk=job.pk).update(status="succeeded")

    assert order[0] == flood[0].pk
    assert order[1] == theirs.pk
    assert order[2] == flood[1].pk


def test_a_worker_busy_with_one_users_job_gives_the_next_turn_to_another_user(
    user, other_user, shared, tmp_path, no_quotas
):
    for n in range(20):
        ingestion_job_create(collection=shared, user=user, locations=[f"/nowhere/{n}.md"])
    theirs, _ = ingestion_job_create(
        collection=shared, user=other_user, locations=[_note(tmp_path, "bob")]
    )

    running = ingestion_job_claim(worker="w:1")  # alice's first, still running
    assert running is not None and running.created_by == user
    second = ingestion_job_claim(worker="w:2")

    assert second is not None and second.pk == theirs.pk


def test_a_worker_drains_the_queue_taking_turns_between_users(
    user, other_user, shared, tmp_path, no_quotas, rag_set
):
    rag_set("ingestion.roots", [str(tmp_path)])
    alices = [
        ingestion_job_create(collection=shared, user=user, locations=[_note(tmp_path, f"a{n}")])[0]
        for n in range(4)
    ]
    bobs, _ = ingestion_job_create(
        collection=shared, user=other_user, locations=[_note(tmp_path, "b0")]
    )
    # Another collection's jobs without a user take turns as their own owner.
    other = collection_create(name="Other", slug="other", user=user)
    cli, _ = ingestion_job_create(
        collection=other, locations=[_note(tmp_path, "c0")], operator=True
    )

    ran = ingestion_jobs_drain(worker="w:1")

    assert ran == 6
    started = list(IngestionJob.objects.order_by("started_at").values_list("pk", flat=True))
    assert set(started[:3]) == {alices[0].pk, bobs.pk, cli.pk}
    assert set(IngestionJob.objects.values_list("status", flat=True)) == {"succeeded"}


def test_a_jobs_counts_move_while_a_large_source_is_embedded(user, collection, tmp_path):
    # 500 short passages: progress is reported between the model's own batches, which
    # take up to 256 passages this short (embed.encode_in_steps).
    path = tmp_path / "handbook.md"
    path.write_text(
        "# Handbook\n\n"
        + "\n\n".join(
            f"Section {n} explains rule {n}. " + " ".join(f"rule{n}word{k}" for k in range(30))
            for n in range(500)
        )
    )
    job, _ = ingestion_job_create(
        collection=collection, user=user, locations=[str(path)], operator=True
    )
    # Every write to the job row, as the database saw it.
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TABLE job_writes (embeddings int, chunks int, status text, current text)"
        )
        cur.execute(
            "CREATE FUNCTION job_writes_log() RETURNS trigger AS $$ BEGIN "
            "INSERT INTO job_writes VALUES "
            "(NEW.embeddings_computed, NEW.chunks_written, NEW.status, NEW.current); "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        cur.execute(
            "CREATE TRIGGER job_writes_log AFTER UPDATE ON collections_app_ingestionjob "
            "FOR EACH ROW EXECUTE FUNCTION job_writes_log()"
        )

    ingestion_jobs_drain(worker="w:1")

    job.refresh_from_db()
    assert job.status == "succeeded"
    total = job.embeddings_computed
    assert total >= 500
    with connection.cursor() as cur:
        cur.execute(
            "SELECT embeddings, current FROM job_writes "
            "WHERE status = 'running' AND chunks = 0 AND embeddings > 0"
        )
        during = cur.fetchall()
    # Seen part-way through the embedding, before any chunk was stored.
    assert any(0 < embedded < total for embedded, _ in during), during
    assert any("embedding handbook" in current.lower() for _, current in during), during


def test_a_drain_past_its_time_leaves_the_rest_to_a_new_message(
    user, collection, no_quotas, django_capture_on_commit_callbacks
):
    job, _ = ingestion_job_create(collection=collection, user=user, locations=["/nowhere.md"])

    with django_capture_on_commit_callbacks() as wake_ups:
        ran = ingestion_jobs_drain(worker="w:1", max_seconds=0)

    assert ran == 0
    job.refresh_from_db()
    assert job.status == "queued"
    # A worker is woken for it once this transaction commits.
    assert len(wake_ups) == 1
