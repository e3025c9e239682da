"""Sources, uploads and ingestion jobs over the REST API."""

from __future__ import annotations

import pytest

from collections_app.models import Chunk, IngestionJob, Source
from tests.support.clients import token_client
from tests.support.documents import INSTALL, REFUNDS, upload

pytestmark = pytest.mark.django_db

UPLOAD = "/api/collections/docs/sources/upload"


def test_upload_starts_one_job_that_indexes_every_file(
    api, collection, media_root, celery_eager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            UPLOAD,
            {"files": [upload("install.md", INSTALL), upload("refunds.md", REFUNDS)]},
            format="multipart",
        )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["refused"] == [] and body["replayed"] is False
    assert sorted(s["location"] for s in body["sources"]) == [
        "upload:install.md",
        "upload:refunds.md",
    ]
    assert IngestionJob.objects.filter(collection=collection).count() == 1

    job = api.get(f"/api/collections/docs/jobs/{body['job']['id']}").json()
    assert job["status"] == "succeeded", job
    assert job["percent"] == 100 and job["sources_done"] == 2 and job["is_finished"]
    assert job["chunks_written"] > 0
    assert Chunk.objects.filter(collection=collection, text__contains="ERR-4471").exists()

    sources = api.get("/api/collections/docs/sources").json()["results"]
    assert {s["status"] for s in sources} == {"ready"}
    assert all(s["chunk_count"] > 0 and len(s["content_hash"]) == 64 for s in sources)
    assert all(s["kind"] == "markdown" and s["ingested_at"] for s in sources)


def test_oversized_file_is_refused_while_the_others_are_ingested(
    api, collection, media_root, settings, celery_eager, django_capture_on_commit_callbacks
):
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "max_file_bytes": 300},
    }
    big = upload("big.md", "# Big\n\n" + "All work and no play. " * 40)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            UPLOAD, {"files": [big, upload("refunds.md", REFUNDS)]}, format="multipart"
        )
    assert response.status_code == 202, response.content
    body = response.json()
    (refused,) = body["refused"]
    assert refused["name"] == "big.md"
    assert "big.md" in refused["reason"] and "largest accepted" in refused["reason"]
    assert [s["location"] for s in body["sources"]] == ["upload:refunds.md"]
    assert not Source.objects.filter(collection=collection, location="upload:big.md").exists()
    assert Chunk.objects.filter(collection=collection, text__contains="30 days").exists()


def test_upload_with_no_acceptable_file_is_a_bad_request(api, collection, media_root, settings):
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "max_file_bytes": 10},
    }
    response = api.post(UPLOAD, {"files": [upload("refunds.md", REFUNDS)]}, format="multipart")
    assert response.status_code == 400
    assert "refunds.md" in response.json()["detail"]
    assert not IngestionJob.objects.exists()


def test_upload_without_files_says_so(api, collection):
    response = api.post(UPLOAD, {}, format="multipart")
    assert response.status_code == 400
    assert "files" in response.json()


def test_retried_upload_with_the_same_idempotency_key_starts_no_second_job(
    api, collection, media_root, celery_eager, django_capture_on_commit_callbacks
):
    def send():  # type: ignore[no-untyped-def]
        with django_capture_on_commit_callbacks(execute=True):
            return api.post(
                UPLOAD,
                {"files": [upload("refunds.md", REFUNDS)]},
                format="multipart",
                HTTP_IDEMPOTENCY_KEY="upload-7f3a",
            )

    first, second = send(), send()
    assert first.status_code == second.status_code == 202
    assert second.json()["job"]["id"] == first.json()["job"]["id"]
    assert second.json()["replayed"] is True
    assert IngestionJob.objects.filter(collection=collection).count() == 1
    # The retry did not put the already-ingested source back to pending.
    assert Source.objects.get(location="upload:refunds.md").status == "ready"

    other_key = api.post(
        UPLOAD,
        {"files": [upload("refunds.md", REFUNDS)]},
        format="multipart",
        HTTP_IDEMPOTENCY_KEY="upload-other",
    )
    assert other_key.json()["job"]["id"] != first.json()["job"]["id"]


def test_overlong_idempotency_key_is_refused(api, collection, media_root):
    response = api.post(
        UPLOAD,
        {"files": [upload("refunds.md", REFUNDS)]},
        format="multipart",
        HTTP_IDEMPOTENCY_KEY="k" * 65,
    )
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["detail"]
    assert not Source.objects.exists()


def test_reader_may_not_upload(reader, collection, media_root):
    response = reader.post(UPLOAD, {"files": [upload("a.md", REFUNDS)]}, format="multipart")
    assert response.status_code == 403
    assert "write" in response.json()["detail"]
    assert not Source.objects.exists()


def test_writer_may_queue_web_urls_but_not_other_schemes(api, collection):
    queued = api.post(
        "/api/collections/docs/sources/locations",
        {"locations": ["https://docs.example.org/install.html"]},
        format="json",
    )
    assert queued.status_code == 202
    assert queued.json()["job"]["request"]["locations"] == ["https://docs.example.org/install.html"]

    ftp = api.post(
        "/api/collections/docs/sources/locations",
        {"locations": ["ftp://example.org/file.txt"]},
        format="json",
    )
    assert ftp.status_code == 400
    assert "http and https" in ftp.json()["locations"][0]


def test_a_bad_location_is_refused_while_the_good_ones_are_queued(api, collection):
    response = api.post(
        "/api/collections/docs/sources/locations",
        {
            "locations": [
                "https://docs.example.org/install.html",
                "ftp://example.org/file.txt",
                "/etc/passwd",
                "https://docs.example.org/faq.html",
            ]
        },
        format="json",
    )

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["job"]["request"]["locations"] == [
        "https://docs.example.org/install.html",
        "https://docs.example.org/faq.html",
    ]
    refused = {r["name"]: r["reason"] for r in body["refused"]}
    assert set(refused) == {"ftp://example.org/file.txt", "/etc/passwd"}
    assert "only http and https" in refused["ftp://example.org/file.txt"]
    assert "superusers" in refused["/etc/passwd"]


def test_source_detail_pages_through_its_chunks(api, ingested):
    source = ingested.sources.get(location="upload:install.md")
    first = api.get(f"/api/collections/docs/sources/{source.pk}?limit=1").json()
    assert first["location"] == "upload:install.md"
    assert first["chunks"]["count"] == source.chunk_count
    (chunk,) = first["chunks"]["results"]
    assert chunk["ordinal"] == 0
    stored = Chunk.objects.get(pk=chunk["id"])
    assert chunk["text"] == stored.text
    assert source.text[chunk["char_start"] : chunk["char_end"]].strip()


def test_unknown_source_is_not_found(api, collection):
    response = api.get("/api/collections/docs/sources/999999")
    assert response.status_code == 404
    assert "999999" in response.json()["detail"]


def test_deleting_a_source_removes_its_chunks(api, ingested):
    source = ingested.sources.get(location="upload:refunds.md")
    assert api.delete(f"/api/collections/docs/sources/{source.pk}").status_code == 204
    assert not Source.objects.filter(pk=source.pk).exists()
    assert not Chunk.objects.filter(collection=ingested, text__contains="30 days").exists()
    assert Chunk.objects.filter(collection=ingested, text__contains="ERR-4471").exists()


def test_reingesting_an_unchanged_source_costs_no_embeddings(
    api, ingested, celery_eager, django_capture_on_commit_callbacks
):
    source = ingested.sources.get(location="upload:install.md")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/collections/docs/sources/{source.pk}/reingest")
    assert response.status_code == 202
    assert response.json()["created"] is True
    job = IngestionJob.objects.get(pk=response.json()["job"]["id"])
    assert job.status == "succeeded"
    assert job.report["sources"][0]["status"] == "unchanged"
    assert job.embeddings_computed == 0


def test_jobs_are_listed_newest_first(api, ingested, other_user):
    jobs = api.get("/api/collections/docs/jobs").json()["results"]
    assert len(jobs) == 1
    assert jobs[0]["collection"] == "docs" and jobs[0]["created_by"] == "alice"
    assert jobs[0]["report"]["sources_ingested"] == 2
    assert token_client(other_user).get("/api/collections/docs/jobs").status_code == 404
