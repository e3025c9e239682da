"""Collections and members over the REST API."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from collections_app.models import Collection, CollectionMembership

pytestmark = pytest.mark.django_db


def test_token_is_issued_for_valid_credentials_only(user):
    client = APIClient()
    good = client.post("/api/auth/token", {"username": "alice", "password": "pw-alice"})
    assert good.status_code == 200
    bad = client.post("/api/auth/token", {"username": "alice", "password": "wrong"})
    assert bad.status_code == 400

    client.credentials(HTTP_AUTHORIZATION=f"Token {good.json()['token']}")
    assert client.get("/api/collections").status_code == 200


def test_requests_without_credentials_are_refused(db):
    assert APIClient().get("/api/collections").status_code == 401


def test_session_login_also_authenticates(client, user, collection):
    client.force_login(user)
    response = client.get("/api/collections")
    assert response.status_code == 200
    assert [c["slug"] for c in response.json()["results"]] == ["docs"]


def test_creator_becomes_admin_and_sees_counts(api):
    created = api.post("/api/collections", {"name": "Team handbook"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["slug"] == "team-handbook"
    assert body["role"] == "admin"
    assert body["source_count"] == 0 and body["chunk_count"] == 0

    listed = api.get("/api/collections").json()["results"]
    assert [c["slug"] for c in listed] == ["team-handbook"]


def test_listing_shows_source_and_chunk_counts_of_ingested_collection(api, ingested):
    (docs,) = api.get("/api/collections").json()["results"]
    assert docs["source_count"] == 2
    assert docs["chunk_count"] == sum(s.chunk_count for s in ingested.sources.all()) > 0


def test_listing_shows_only_readable_collections(api, stranger, collection):
    stranger.post("/api/collections", {"name": "Private", "slug": "private"}, format="json")
    assert [c["slug"] for c in api.get("/api/collections").json()["results"]] == ["docs"]
    assert [c["slug"] for c in stranger.get("/api/collections").json()["results"]] == ["private"]


def test_duplicate_slug_is_refused_with_a_message(api, collection):
    response = api.post("/api/collections", {"name": "Docs again", "slug": "docs"}, format="json")
    assert response.status_code == 400
    assert "already exists" in response.json()["slug"][0]


def test_unknown_chunking_strategy_lists_the_known_ones(api):
    response = api.post(
        "/api/collections", {"name": "X", "chunking_strategy": "paragraphs"}, format="json"
    )
    assert response.status_code == 400
    message = response.json()["chunking_strategy"][0]
    assert "paragraphs" in message and "recursive" in message


def test_name_without_letters_or_digits_is_refused(api):
    response = api.post("/api/collections", {"name": "!!!"}, format="json")
    assert response.status_code == 400
    assert "letters or digits" in str(response.json())


def test_admin_renames_and_reader_may_not(api, reader, collection):
    renamed = api.patch("/api/collections/docs", {"description": "Product docs"}, format="json")
    assert renamed.status_code == 200
    assert renamed.json()["description"] == "Product docs"
    assert renamed.json()["name"] == "Docs"

    refused = reader.patch("/api/collections/docs", {"name": "Mine"}, format="json")
    assert refused.status_code == 403
    assert "admin" in refused.json()["detail"]
    collection.refresh_from_db()
    assert collection.name == "Docs"


def test_reader_sees_the_collection_with_its_role(reader, collection):
    response = reader.get("/api/collections/docs")
    assert response.status_code == 200
    assert response.json()["role"] == "read"


def test_only_an_admin_deletes_a_collection(api, reader, collection):
    assert reader.delete("/api/collections/docs").status_code == 403
    assert api.delete("/api/collections/docs").status_code == 204
    assert not Collection.objects.filter(slug="docs").exists()


def test_admin_manages_members(api, collection, other_user):
    added = api.post(
        "/api/collections/docs/members", {"username": "bob", "role": "write"}, format="json"
    )
    assert added.status_code == 200
    assert {"username": "bob", "role": "write"} in added.json()

    changed = api.put("/api/collections/docs/members/bob", {"role": "read"}, format="json")
    assert changed.json() == {"username": "bob", "role": "read"}

    assert api.delete("/api/collections/docs/members/bob").status_code == 204
    members = api.get("/api/collections/docs/members").json()
    assert members == [{"username": "alice", "role": "admin"}]


def test_member_errors_are_clear(api, collection):
    unknown_user = api.post(
        "/api/collections/docs/members", {"username": "nobody", "role": "read"}, format="json"
    )
    assert unknown_user.status_code == 400
    assert "nobody" in unknown_user.json()["username"][0]

    bad_role = api.put("/api/collections/docs/members/alice", {"role": "owner"}, format="json")
    assert bad_role.status_code == 400
    assert "role" in bad_role.json()


def test_last_admin_cannot_step_down(api, collection, user):
    response = api.put("/api/collections/docs/members/alice", {"role": "read"}, format="json")
    assert response.status_code == 409
    assert "only admin" in response.json()["detail"]
    membership = CollectionMembership.objects.get(collection=collection, user=user)
    assert membership.role == "admin"


def test_reader_cannot_see_or_change_members(reader, collection):
    assert reader.get("/api/collections/docs/members").status_code == 403
    response = reader.post(
        "/api/collections/docs/members", {"username": "carol", "role": "admin"}, format="json"
    )
    assert response.status_code == 403
