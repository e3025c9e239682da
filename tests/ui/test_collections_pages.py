"""Collection pages: list, create, edit, delete, members, permissions."""

from __future__ import annotations

import pytest
from django.test import Client

from collections_app.models import Chunk, Collection, CollectionMembership, Source

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/collections/",
        "/collections/new/",
        "/collections/handbook/",
        "/collections/handbook/members/",
        "/quarantine/",
    ],
)
def test_every_page_sends_anonymous_visitors_to_the_login_page(client, collection, url):
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_logging_in_and_out(client, user):
    page = client.get("/accounts/login/")
    assert b'name="password"' in page.content

    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    assert client.get("/collections/").status_code == 200

    client.post("/accounts/logout/")
    assert client.get("/collections/").status_code == 302


def test_wrong_password_is_a_message_on_the_login_page(client, user):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})

    assert response.status_code == 200
    assert b"correct username and password" in response.content


def test_no_collections_yet_offers_to_create_one(alice):
    response = alice.get("/collections/")

    assert b"No collections yet" in response.content
    assert b'href="/collections/new/"' in response.content


def test_creating_a_collection_makes_its_creator_admin(alice, user, media_root):
    response = alice.post(
        "/collections/new/",
        {"name": "Team handbook", "slug": "", "description": "", "chunking_strategy": "sentence"},
        follow=True,
    )

    collection = Collection.objects.get(slug="team-handbook")
    assert collection.chunking_strategy == "sentence"
    assert CollectionMembership.objects.get(collection=collection, user=user).role == "admin"
    assert response.redirect_chain[-1][0] == "/collections/team-handbook/"
    assert b"No documents yet" in response.content


def test_a_taken_slug_is_a_form_error_not_a_crash(alice, collection):
    response = alice.post(
        "/collections/new/",
        {"name": "Other", "slug": "handbook", "chunking_strategy": "recursive"},
    )

    assert response.status_code == 200
    assert b"already exists" in response.content
    assert Collection.objects.count() == 1


def test_list_shows_counts_last_ingestion_and_status(alice, ingested):
    response = alice.get("/collections/")
    row = response.content.decode().split("/collections/handbook/")[1].split("</tr>")[0]

    chunks = Chunk.objects.filter(collection=ingested).count()
    assert chunks > 0
    assert '<td class="num">2</td>' in row
    assert f'<td class="num">{chunks}</td>' in row
    last = Source.objects.latest("ingested_at").ingested_at
    assert f'<time datetime="{last.isoformat()}">just now</time>' in row
    assert "ready" in row


def test_admin_edits_name_and_chunking(alice, collection):
    alice.post(
        "/collections/handbook/edit/",
        {"name": "Handbook 2", "description": "updated", "chunking_strategy": "fixed"},
    )

    collection.refresh_from_db()
    assert (collection.name, collection.chunking_strategy) == ("Handbook 2", "fixed")
    assert collection.slug == "handbook"


def test_delete_asks_for_confirmation_then_removes_the_passages(alice, ingested):
    confirm = alice.get("/collections/handbook/delete/")
    assert b"Delete the collection" in confirm.content
    assert Collection.objects.filter(slug="handbook").exists()

    response = alice.post("/collections/handbook/delete/", follow=True)

    assert not Collection.objects.filter(slug="handbook").exists()
    assert not Chunk.objects.exists()
    assert b"were deleted" in response.content


def test_a_collection_the_user_may_not_read_is_not_found(bob, collection):
    for url in (
        "/collections/handbook/",
        "/collections/handbook/edit/",
        "/collections/handbook/delete/",
        "/collections/handbook/members/",
    ):
        assert bob.get(url).status_code == 404, url
    assert bob.post("/collections/handbook/delete/").status_code == 404
    assert b"handbook" not in bob.get("/collections/").content.lower()


def test_a_reader_sees_the_collection_but_gets_a_message_for_admin_pages(reader, collection):
    page = reader.get("/collections/handbook/")
    assert page.status_code == 200
    assert b"Upload documents" not in page.content

    response = reader.post("/collections/handbook/delete/", follow=True)

    assert Collection.objects.filter(slug="handbook").exists()
    assert "You may not administer" in response.content.decode()


def test_admin_gives_and_removes_access(alice, collection, other_user):
    page = alice.get("/collections/handbook/members/")
    assert b"alice" in page.content

    alice.post("/collections/handbook/members/", {"username": "bob", "role": "write"})
    assert CollectionMembership.objects.get(user=other_user, collection=collection).role == "write"

    alice.post("/collections/handbook/members/", {"username": "bob", "role": ""})
    assert not CollectionMembership.objects.filter(user=other_user).exists()


def test_the_last_admin_cannot_remove_themselves(alice, collection, user):
    response = alice.post(
        "/collections/handbook/members/", {"username": "alice", "role": "read"}, follow=True
    )

    assert CollectionMembership.objects.get(user=user, collection=collection).role == "admin"
    assert b"only admin" in response.content


def test_adding_an_unknown_user_is_a_form_error(alice, collection):
    response = alice.post("/collections/handbook/members/", {"username": "zed", "role": "read"})

    assert response.status_code == 200
    # The same words as for an inactive account (tests/ui/test_hardening_pages.py).
    assert b"&#x27;zed&#x27; cannot be given a role here" in response.content


def test_forms_without_a_csrf_token_are_rejected(user, collection):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    response = client.post("/collections/handbook/delete/")

    assert response.status_code == 403
    assert Collection.objects.filter(slug="handbook").exists()


def test_unknown_pages_are_a_friendly_not_found_page(alice):
    response = alice.get("/collections/nope/")

    assert response.status_code == 404
    assert b"Back to your collections" in response.content
