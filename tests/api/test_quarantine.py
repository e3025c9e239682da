"""The quarantine queue over the REST API: review held documents, approve or reject."""

from __future__ import annotations

import pytest

from collections_app.models import Chunk, QuarantineItem, Source
from tests.support.documents import PLAIN_INJECTION, upload

pytestmark = pytest.mark.django_db

QUEUE = "/api/collections/docs/quarantine"


@pytest.fixture
def held(api, collection, media_root, celery_eager, django_capture_on_commit_callbacks):
    """Two injection attempts uploaded to ``docs`` and held for review."""
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/collections/docs/sources/upload",
            {
                "files": [
                    upload("notes.md", PLAIN_INJECTION),
                    upload("notes-2.md", PLAIN_INJECTION.replace("dark", "light")),
                ]
            },
            format="multipart",
        )
    assert response.status_code == 202, response.content
    items = {
        item.source.location: item
        for item in QuarantineItem.objects.filter(collection=collection).select_related("source")
    }
    # First the "dark mode" notes, then the "light mode" ones.
    return [items["upload:notes.md"], items["upload:notes-2.md"]]


def test_held_documents_are_listed_with_their_signals(api, held):
    listed = api.get(QUEUE).json()["results"]
    assert {i["source"]["location"] for i in listed} == {"upload:notes.md", "upload:notes-2.md"}
    first = listed[0]
    assert first["review_status"] == "pending"
    assert "instruction-override" in {s["name"] for s in first["signals"]}
    assert "Ignore all previous instructions" in first["excerpt"]

    detail = api.get(f"{QUEUE}/{held[0].pk}").json()
    assert "dark mode" in detail["text"]
    assert not Chunk.objects.filter(source_id=held[0].source_id).exists()


def test_approving_indexes_what_the_reviewer_saw(api, held):
    item = held[0]
    response = api.post(f"{QUEUE}/{item.pk}/approve")
    assert response.status_code == 200, response.content
    assert response.json()["item"]["review_status"] == "approved"
    assert response.json()["item"]["reviewer"] == "alice"
    assert Chunk.objects.filter(source_id=item.source_id, text__contains="dark mode").exists()

    again = api.post(f"{QUEUE}/{item.pk}/approve")
    assert again.status_code == 409
    assert "already" in again.json()["detail"]

    pending = [i["id"] for i in api.get(QUEUE).json()["results"]]
    assert pending == [held[1].pk]
    approved = [i["id"] for i in api.get(f"{QUEUE}?status=approved").json()["results"]]
    assert approved == [item.pk]
    assert len(api.get(f"{QUEUE}?status=all").json()["results"]) == 2


def test_rejecting_needs_a_reason(api, held):
    item = held[0]
    for body in ({}, {"reason": "   "}):
        response = api.post(f"{QUEUE}/{item.pk}/reject", body, format="json")
        assert response.status_code == 400
        assert response.json()["reason"] == ["a rejection needs a reason"]
    item.refresh_from_db()
    assert item.review_status == "pending"

    response = api.post(f"{QUEUE}/{item.pk}/reject", {"reason": "prompt injection"}, format="json")
    assert response.status_code == 200
    assert response.json()["review_status"] == "rejected"
    assert response.json()["reason"] == "prompt injection"
    assert Source.objects.get(pk=item.source_id).status == "rejected"


def test_unknown_status_filter_is_a_bad_request(api, held):
    response = api.get(f"{QUEUE}?status=maybe")
    assert response.status_code == 400
    assert "status" in response.json()


def test_bulk_review_reports_each_item(api, held):
    response = api.post(
        f"{QUEUE}/bulk",
        {"action": "reject", "ids": [held[0].pk, held[1].pk, 999999], "reason": "spam"},
        format="json",
    )
    assert response.status_code == 200
    results = {r["id"]: r for r in response.json()["results"]}
    assert results[held[0].pk]["ok"] and results[held[0].pk]["review_status"] == "rejected"
    assert results[held[1].pk]["ok"]
    assert not results[999999]["ok"] and "no such item" in results[999999]["detail"]
    assert api.get(QUEUE).json()["results"] == []


def test_bulk_reject_without_reason_and_bulk_approve(api, held):
    refused = api.post(f"{QUEUE}/bulk", {"action": "reject", "ids": [held[0].pk]}, format="json")
    assert refused.status_code == 400
    assert "reason" in refused.json()

    approved = api.post(
        f"{QUEUE}/bulk", {"action": "approve", "ids": [h.pk for h in held]}, format="json"
    )
    assert all(r["ok"] for r in approved.json()["results"])
    assert Chunk.objects.filter(source_id=held[1].source_id, text__contains="light mode").exists()


def test_only_admins_review(reader, held):
    assert reader.get(QUEUE).status_code == 403
    assert reader.post(f"{QUEUE}/{held[0].pk}/approve").status_code == 403
    held[0].refresh_from_db()
    assert held[0].review_status == "pending"
