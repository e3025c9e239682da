"""Fixtures shared by every test tree (registered by the root conftest.py).

A fixture goes here once a second tree needs it; one tree's own fixtures stay in
that tree's conftest.py, which may override one of these by name (tests/ui has
its own ``collection``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import caches

from tests.support.chat_server import ScriptedChatServer
from tests.support.search_server import ScriptedSearchServer


@pytest.fixture
def user(django_user_model):  # type: ignore[no-untyped-def]
    """alice."""
    return django_user_model.objects.create_user(username="alice", password="pw-alice")


@pytest.fixture
def other_user(django_user_model):  # type: ignore[no-untyped-def]
    """bob."""
    return django_user_model.objects.create_user(username="bob", password="pw-bob")


@pytest.fixture
def collection(db, user):  # type: ignore[no-untyped-def]
    """An empty collection "Docs" (slug ``docs``) administered by alice."""
    from collections_app.services import collection_create

    return collection_create(name="Docs", slug="docs", user=user)


@pytest.fixture
def media_root(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def celery_eager() -> Iterator[Any]:
    """Run Celery tasks in-process.

    For tests about what a job *does*. Jobs are enqueued on commit, so wrap the
    request in ``django_capture_on_commit_callbacks(execute=True)``. Tests about
    the worker itself start a real Celery worker (tests/ingestion/test_cli.py).
    """
    from ragsite.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Retrieval results are cached per collection version; every test starts cold."""
    for each in caches.all():
        each.clear()
    yield
    for each in caches.all():
        each.clear()


@pytest.fixture(autouse=True)
def _fresh_model_settings() -> Iterator[None]:
    """Each process keeps the saved model settings for a second; every test reads them anew."""
    from query_app.model_settings import model_settings_forget

    model_settings_forget()
    yield
    model_settings_forget()


@pytest.fixture
def rag_settings(settings):  # type: ignore[no-untyped-def]
    """A private, editable copy of settings.RAG (profiles are re-resolved on change)."""
    settings.RAG = copy.deepcopy(settings.RAG)
    return settings


@pytest.fixture
def rag_set(rag_settings) -> Callable[[str, object], None]:  # type: ignore[no-untyped-def]
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


@pytest.fixture
def no_chat_model(rag_set) -> None:  # type: ignore[no-untyped-def]
    """No chat endpoint configured: answers are extractive."""
    rag_set("chat.base_url", "")
    rag_set("chat.model", "")


@pytest.fixture
def chat_server() -> Iterator[ScriptedChatServer]:
    """A scripted OpenAI-compatible chat server on 127.0.0.1 (no LLM runs here)."""
    server = ScriptedChatServer().start()
    yield server
    server.stop()


@pytest.fixture
def search() -> Iterator[ScriptedSearchServer]:
    """A scripted SearxNG-compatible search server on 127.0.0.1 (no search engine runs here)."""
    server = ScriptedSearchServer().start()
    yield server
    server.stop()


@pytest.fixture
def chat_configured(rag_settings, chat_server) -> ScriptedChatServer:  # type: ignore[no-untyped-def]
    """settings.RAG["chat"] pointing at the scripted server, with fast retries."""
    rag = copy.deepcopy(rag_settings.RAG)
    rag["chat"] = {
        **rag["chat"],
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
