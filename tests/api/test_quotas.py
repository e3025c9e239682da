"""Per-user ingestion budgets: jobs at once, bytes and passages per day (429 with the reason).

Before: any user could queue 991 jobs, upload without limit and have all of it
embedded; nothing said no.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collections_app.models import IngestionJob, Source
from tests.support.clients import token_client
from tests.support.documents import INSTALL, upload

UPLOAD = "/api/collections/docs/sources/upload"
LOCATIONS = "/api/collections/docs/sources/locations"


@pytest.fixture
def quotas(rag_set):  # type: ignore[no-untyped-def]
    """Set the budgets for the test: ``quotas(concurrent_jobs=2)``; the others unlimited."""

    def set_quotas(**values: int) -> None:
        rag_set(
            "quotas",
            {"bytes_per_day": 0, "chunks_per_day": 0, "concurrent_jobs": 0, **values},
        )

    return set_quotas


def test_a_user_with_too_many_jobs_waiting_is_told_to_wait(
    api, collection, quotas, django_user_model
):
    quotas(concurrent_jobs=2)
    for n in range(2):
        queued = api.post(LOCATIONS, {"locations": [f"https://example.org/{n}"]}, format="json")
        assert queued.status_code == 202, queued.content

    refused = api.post(LOCATIONS, {"locations": ["https://example.org/2"]}, format="json")

    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "quota_exceeded"
    assert "2 ingestion jobs queued or running" in body["detail"]
    assert "wait for one to finish" in body["detail"]
    assert IngestionJob.objects.count() == 2

    admin = django_user_model.objects.create_superuser(username="root", password="pw-root")
    exempt = token_client(admin).post(
        LOCATIONS, {"locations": ["https://example.org/3"]}, format="json"
    )
    assert exempt.status_code == 202, exempt.content


def test_an_upload_past_the_daily_byte_budget_is_refused_and_nothing_is_stored(
    api, collection, quotas, media_root
):
    quotas(bytes_per_day=1000)
    first = api.post(UPLOAD, {"files": [upload("a.md", "# A\n\n" + "a" * 600)]}, format="multipart")
    assert first.status_code == 202, first.content

    refused = api.post(
        UPLOAD, {"files": [upload("b.md", "# B\n\n" + "b" * 600)]}, format="multipart"
    )

    assert refused.status_code == 429
    assert "RAG_QUOTA_BYTES_PER_DAY" in refused.json()["detail"]
    assert list(Source.objects.values_list("location", flat=True)) == ["upload:a.md"]
    stored = [p.name for p in Path(media_root).rglob("*") if p.is_file()]
    assert stored == ["a.md"]


def test_a_job_that_reaches_the_daily_passage_budget_stops_there(
    api, collection, quotas, media_root, celery_eager, django_capture_on_commit_callbacks
):
    quotas(chunks_per_day=1)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            UPLOAD,
            {
                "files": [
                    upload("one.md", "# One\n\nThe first note.\n"),
                    upload("two.md", "# Two\n\nThe second note.\n"),
                ]
            },
            format="multipart",
        )
    assert response.status_code == 202, response.content
    job = IngestionJob.objects.get()
    assert job.status == "partial"
    outcomes = {s["location"]: s for s in job.report["sources"]}
    assert outcomes["upload:one.md"]["status"] == "ingested"
    assert outcomes["upload:two.md"]["status"] == "failed"
    reason = outcomes["upload:two.md"]["reason"]
    assert "daily budget" in reason and "RAG_QUOTA_CHUNKS_PER_DAY" in reason

    refused = api.post(UPLOAD, {"files": [upload("three.md", INSTALL)]}, format="multipart")
    assert refused.status_code == 429
    assert "used up" in refused.json()["detail"]
