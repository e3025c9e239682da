"""Fixtures for the page tests: logged-in clients, the Handbook collection, its documents."""

from __future__ import annotations

import pytest
from django.test import Client

from collections_app.services import collection_create, membership_set
from tests.support.clients import request_key_of
from tests.support.documents import INSTALL, REFUNDS, upload


@pytest.fixture
def collection(db, user, media_root):
    """The pages' collection is alice's "Handbook" (overrides the shared "Docs")."""
    return collection_create(name="Handbook", slug="handbook", user=user)


@pytest.fixture
def alice(client: Client, user) -> Client:
    """alice: admin of the collections she creates."""
    client.force_login(user)
    return client


@pytest.fixture
def bob(db, other_user) -> Client:
    """bob: no role on alice's collections unless a test gives him one."""
    client = Client()
    client.force_login(other_user)
    return client


@pytest.fixture
def reader(db, collection, other_user) -> Client:
    """bob with read access to the Handbook."""
    membership_set(collection=collection, user=other_user, role="read")
    client = Client()
    client.force_login(other_user)
    return client


@pytest.fixture
def ingested(collection, alice, celery_eager, django_capture_on_commit_callbacks):
    """The Handbook with two documents ingested through the upload form."""
    page = alice.get("/collections/handbook/").content.decode()
    key = request_key_of(page, "/collections/handbook/upload/")
    with django_capture_on_commit_callbacks(execute=True):
        response = alice.post(
            "/collections/handbook/upload/",
            {
                "files": [upload("install.md", INSTALL), upload("refunds.md", REFUNDS)],
                "request_key": key,
            },
        )
    assert response.status_code == 302
    return collection
