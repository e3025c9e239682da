"""Models loaded when a web or worker process starts (RAG_WARMUP), not by the first question."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from query_app.pipeline.rerankers import _cross_encoder_cached, load_cross_encoder
from ragsite.celery import _is_prefork, worker_models_warm
from ragsite.warmup import models_warm
from tests.support.knowledge_base import KB_DOCS, REFUND_QUESTION
from tests.support.tiny_models import build_tiny_cross_encoder

TEXTS = [REFUND_QUESTION, *[chunk for doc in KB_DOCS for chunk in doc.chunks]]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce-warm"), texts=TEXTS)


def test_warm_up_loads_the_embedder_and_the_configured_cross_encoder(db, rag_set, tiny_model):
    rag_set("query.rerank.model", str(tiny_model))
    _cross_encoder_cached.cache_clear()

    loaded = models_warm()

    assert loaded == [
        "embedder all-MiniLM-L6-v2",
        f"cross-encoder {tiny_model}",
        "the English word list",
    ]
    # The first question finds it loaded: the process's copy, not a new load.
    assert _cross_encoder_cached.cache_info().currsize == 1
    before = _cross_encoder_cached.cache_info().hits
    load_cross_encoder(str(tiny_model), 512)
    assert _cross_encoder_cached.cache_info().hits == before + 1


def test_warm_up_on_a_fresh_install_loads_the_embedder_and_notes_the_missing_reranker(
    db, rag_set, caplog
):
    rag_set("query.rerank.model", "")
    with caplog.at_level(logging.INFO, logger="ragsite.warmup"):
        loaded = models_warm()

    assert loaded == ["embedder all-MiniLM-L6-v2", "the English word list"]
    assert "no cross-encoder model configured" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_broken_cross_encoder_does_not_stop_the_start(db, rag_set, tmp_path, caplog):
    broken = tmp_path / "not-a-model"
    broken.mkdir()
    rag_set("query.rerank.model", str(broken))
    with caplog.at_level(logging.INFO, logger="ragsite.warmup"):
        loaded = models_warm()

    assert loaded == ["embedder all-MiniLM-L6-v2", "the English word list"]
    assert "cannot load the cross-encoder model" in caplog.text


def test_the_worker_loads_the_models_only_when_warm_up_is_on(db, rag_set, caplog):
    class ThreadsWorker:
        pool_cls = "threads"

    rag_set("warmup", False)
    with caplog.at_level(logging.INFO, logger="ragsite.warmup"):
        worker_models_warm(sender=ThreadsWorker())
    assert "warm-up" not in caplog.text

    rag_set("warmup", True)
    with caplog.at_level(logging.INFO, logger="ragsite.warmup"):
        worker_models_warm(sender=ThreadsWorker())
    assert "warm-up: loaded embedder all-MiniLM-L6-v2" in caplog.text


def test_a_prefork_worker_leaves_the_loading_to_its_pool_children():
    from celery.concurrency.prefork import TaskPool
    from celery.concurrency.thread import TaskPool as ThreadPool

    assert _is_prefork("prefork") and _is_prefork(TaskPool)
    assert not _is_prefork("threads") and not _is_prefork(ThreadPool)
    assert not _is_prefork("solo") and not _is_prefork(None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("warmup", ["1", "0"])
def test_a_web_process_loads_the_models_before_it_serves_when_asked(warmup):
    """What gunicorn does in each worker: import ragsite.wsgi (a real process)."""
    env = {
        **os.environ,
        "RAGSITE_DB_NAME": settings.DATABASES["default"]["NAME"],
        "RAG_WARMUP": warmup,
        "RAG_RERANK_MODEL": "",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, sys, ragsite.wsgi; print('views imported:', 'query_app.views' in sys.modules);"
            " print('frozen:', gc.get_freeze_count())",
        ],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    if warmup == "1":
        # The views too: Django would import them on the first request otherwise.
        assert "views imported: True" in done.stdout
        assert "warm-up: loaded embedder all-MiniLM-L6-v2" in done.stderr
        # What it loaded is left out of the garbage collector's later passes.
        frozen = int(done.stdout.split("frozen:")[1])
        assert frozen > 100_000
    else:
        assert "views imported: False" in done.stdout
        assert "warm-up" not in done.stderr
        assert "frozen: 0" in done.stdout
