"""Shared fixtures: a real PostgreSQL + pgvector (embedded), users, collections."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "tests" / "fixtures"


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob")


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def celery_eager():
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
