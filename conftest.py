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
def run_jobs_inline(django_capture_on_commit_callbacks):
    """Run Celery tasks in-process when their transaction commits.

    For tests about what a job *does*; tests about the worker itself start a
    real Celery worker instead (tests/ingestion/test_cli.py).
    """
    from ragsite.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            yield callbacks
    finally:
        app.conf.task_always_eager = previous
