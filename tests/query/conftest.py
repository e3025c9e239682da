"""Fixtures for the answering tests: the knowledge base and its readers.

Real PostgreSQL + pgvector and the real embedder. The chat and settings fixtures
(``chat_server``, ``chat_configured``, ``rag_set``) are shared ones, in
tests/support/fixtures.py.
"""

from __future__ import annotations

import pytest

from tests.support.factories import indexed_collection
from tests.support.knowledge_base import KB_DOCS


@pytest.fixture
def reader(django_user_model):
    return django_user_model.objects.create_user(username="reader", password="pw-reader")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user(username="outsider", password="pw-outsider")


@pytest.fixture
def kb(db, reader):
    """The knowledge base, readable by ``reader``."""
    return indexed_collection(KB_DOCS, slug="kb", members={reader: "read"})
