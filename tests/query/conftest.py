"""Fixtures for the answering tests: real PostgreSQL + pgvector, real embedder, loopback chat."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from django.core.cache import cache

from tests.support.chat_server import ScriptedChatServer
from tests.support.factories import Doc, indexed_collection

# A small knowledge base. The refund passage shares no word with the
# "money returned" question (only the vector leg can find it); ERR-4471 is
# one code among look-alikes (only the keyword leg pins it down exactly).
KB_DOCS = [
    Doc(
        location="/kb/refunds.md",
        title="Refund policy",
        chunks=[
            "Customers can request a refund within 30 days of purchase. "
            "Refunds are issued to the original payment method within five business days.",
            "Gift cards and downloadable software licences are not refundable once activated.",
        ],
    ),
    Doc(
        location="/kb/errors.md",
        title="Error reference",
        chunks=[
            "ERR-4471: the backup volume is full. Free disk space on the target volume and run "
            "the backup job again.",
            "ERR-4472: the backup server is unreachable. Check the network connection and the "
            "firewall rules.",
            "ERR-4470: the backup configuration file is invalid. Validate it with backupctl check.",
        ],
        pages=[3, 3, 4],
    ),
    Doc(
        location="/kb/errors-general.md",
        title="About error codes",
        chunks=[
            "What does an error code mean? Every error code names one failure and the action "
            "that fixes it; look the code up in the error reference.",
            "Error codes that start with ERR are shown in the status bar and written to the log.",
        ],
    ),
    Doc(
        location="/kb/server.md",
        title="Server operations",
        chunks=[
            "To reboot the application server, stop the service with systemctl stop appserver "
            "and start it again with systemctl start appserver.",
            "The server writes its logs to /var/log/appserver; rotate them weekly.",
        ],
    ),
    Doc(
        location="/kb/shipping.md",
        title="Shipping",
        chunks=[
            "Orders ship within two business days from our warehouse in Rotterdam.",
            "International deliveries take five to ten days depending on customs.",
        ],
    ),
]


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


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


@pytest.fixture
def rag_settings(settings):
    """A private, editable copy of settings.RAG (profiles are re-resolved on change)."""
    settings.RAG = copy.deepcopy(settings.RAG)
    return settings


@pytest.fixture
def chat_server() -> Iterator[ScriptedChatServer]:
    server = ScriptedChatServer().start()
    yield server
    server.stop()


@pytest.fixture
def chat_configured(rag_settings, chat_server):
    """settings.RAG["chat"] pointing at the scripted server, with fast retries."""
    rag = copy.deepcopy(rag_settings.RAG)
    rag["chat"] = {
        "base_url": chat_server.base_url,
        "model": "scripted-model",
        "api_key": "test-key",
        "timeout_s": 5.0,
        "max_retries": 2,
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
    }
    rag_settings.RAG = rag
    return chat_server


@pytest.fixture
def rag_set(rag_settings):
    """``rag_set("query.rerank.model", value)``: replace one value of settings.RAG."""

    def set_value(path: str, value: object) -> None:
        rag = copy.deepcopy(rag_settings.RAG)
        *parents, leaf = path.split(".")
        target = rag
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
        rag_settings.RAG = rag

    return set_value
