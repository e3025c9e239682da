"""Per-collection permissions: no read access means 404 everywhere, and no passages."""

from __future__ import annotations

import pytest

from collections_app.models import IngestionJob, QuarantineItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def targets(api, ingested, settings):
    """Every collection-scoped endpoint, with real ids from alice's collection."""
    settings.RAG = {**settings.RAG, "chat": {**settings.RAG["chat"], "base_url": "", "model": ""}}
    source = ingested.sources.get(location="upload:install.md")
    job = IngestionJob.objects.get(collection=ingested)
    item = QuarantineItem.objects.create(
        collection=ingested,
        source=source,
        content_hash=source.content_hash,
        verdict="suspicious",
        excerpt="ERR-4471",
    )
    run = api.post(
        "/api/collections/docs/query", {"question": "What is ERR-4471?"}, format="json"
    ).json()
    base = "/api/collections/docs"
    question = {"question": "What is ERR-4471?"}
    return [
        ("get", base, None),
        ("patch", base, {"name": "Mine"}),
        ("put", base, {"name": "Mine"}),
        ("delete", base, None),
        ("get", f"{base}/members", None),
        ("post", f"{base}/members", {"username": "bob", "role": "admin"}),
        ("put", f"{base}/members/bob", {"role": "admin"}),
        ("delete", f"{base}/members/alice", None),
        ("get", f"{base}/sources", None),
        ("post", f"{base}/sources/upload", {}),
        ("post", f"{base}/sources/locations", {"locations": ["https://example.org/"]}),
        ("get", f"{base}/sources/{source.pk}", None),
        ("delete", f"{base}/sources/{source.pk}", None),
        ("post", f"{base}/sources/{source.pk}/reingest", None),
        ("get", f"{base}/jobs", None),
        ("get", f"{base}/jobs/{job.pk}", None),
        ("get", f"{base}/quarantine", None),
        ("get", f"{base}/quarantine/{item.pk}", None),
        ("post", f"{base}/quarantine/{item.pk}/approve", None),
        ("post", f"{base}/quarantine/{item.pk}/reject", {"reason": "no"}),
        ("post", f"{base}/quarantine/bulk", {"action": "approve", "ids": [item.pk]}),
        ("post", f"{base}/query", question),
        ("post", f"{base}/retrieve", question),
        ("get", f"/api/query-runs/{run['id']}", None),
        ("get", "/api/query-runs?collection=docs", None),
    ]


def test_a_user_without_access_gets_404_everywhere_and_sees_no_passage(stranger, ingested, targets):
    chunks_before = ingested.chunks.count()
    for method, url, body in targets:
        response = getattr(stranger, method)(url, body, format="json")
        assert response.status_code == 404, (method, url, response.status_code)
        assert b"ERR-4471" not in response.content, (method, url)
        assert b"install" not in response.content, (method, url)
    # Nothing was changed by the attempts.
    assert ingested.chunks.count() == chunks_before
    assert QuarantineItem.objects.get().review_status == "pending"


def test_a_user_without_access_sees_neither_the_collection_nor_its_runs(stranger, targets):
    assert stranger.get("/api/collections").json()["results"] == []
    assert stranger.get("/api/query-runs").json()["results"] == []


def test_a_reader_reads_but_may_not_write(reader, ingested):
    base = "/api/collections/docs"
    source = ingested.sources.first()
    assert reader.get(f"{base}/sources").status_code == 200
    assert reader.get(f"{base}/sources/{source.pk}").status_code == 200
    assert reader.get(f"{base}/jobs").status_code == 200
    assert (
        reader.post(f"{base}/retrieve", {"question": "refunds"}, format="json").status_code == 200
    )
    for method, url in (
        ("delete", f"{base}/sources/{source.pk}"),
        ("post", f"{base}/sources/{source.pk}/reingest"),
        ("post", f"{base}/sources/locations"),
        ("get", f"{base}/quarantine"),
        ("delete", base),
    ):
        response = getattr(reader, method)(
            url, {"locations": ["https://example.org/"]}, format="json"
        )
        assert response.status_code == 403, (method, url)
    assert ingested.sources.filter(pk=source.pk).exists()


def test_losing_access_hides_ones_own_runs(api, reader, reader_user, ingested):
    run = reader.post(
        "/api/collections/docs/retrieve", {"question": "refunds"}, format="json"
    ).json()
    assert reader.get(f"/api/query-runs/{run['id']}").status_code == 200
    api.delete("/api/collections/docs/members/carol")
    assert reader.get(f"/api/query-runs/{run['id']}").status_code == 404
    assert reader.get("/api/query-runs").json()["results"] == []
