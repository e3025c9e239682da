"""Fixtures for the REST API tests: token-authenticated clients and a tiny collection."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from collections_app.services import membership_set
from tests.support.clients import token_client
from tests.support.documents import INSTALL, REFUNDS, upload


@pytest.fixture
def api(db, user) -> APIClient:
    """alice, who creates the collections."""
    return token_client(user)


@pytest.fixture
def stranger(db, other_user) -> APIClient:
    """bob, who has no role on alice's collections."""
    return token_client(other_user)


@pytest.fixture
def reader_user(django_user_model):
    return django_user_model.objects.create_user(username="carol", password="pw-carol")


@pytest.fixture
def reader(db, reader_user, collection) -> APIClient:
    """carol, with the read role on ``collection``."""
    membership_set(collection=collection, user=reader_user, role="read")
    return token_client(reader_user)


@pytest.fixture
def ingested(api, collection, media_root, celery_eager, django_capture_on_commit_callbacks):
    """``collection`` with two short Markdown files uploaded and ingested through the API."""
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/collections/docs/sources/upload",
            {"files": [upload("install.md", INSTALL), upload("refunds.md", REFUNDS)]},
            format="multipart",
        )
    assert response.status_code == 202, response.content
    collection.refresh_from_db()
    return collection
