"""Models loaded when a web or worker process starts, not by the first question.

Loading the embedder (torch, sentence-transformers, the weights) and running it
once made the first answer after a start take 12.5 s against well under a second
for the next. When ``settings.RAG["warmup"]`` is on (``RAG_WARMUP``; ``bin/start``
and the Docker image turn it on) the web process (``ragsite/wsgi.py``) and the
Celery worker (``ragsite/celery.py``) call ``models_warm`` as they start.

It runs in each process that serves: a gunicorn worker, a Celery pool child or a
threads/solo worker, never in a parent that forks afterwards (torch's thread
pools do not survive a fork).
"""

from __future__ import annotations

import gc
import logging
import time

from django.conf import settings

logger = logging.getLogger(__name__)


def warmup_enabled() -> bool:
    """Whether processes load their models as they start (settings.RAG["warmup"])."""
    return bool(settings.RAG.get("warmup"))


def web_warm() -> list[str]:
    """What a web process loads before it serves: every view module, then the models.

    Django imports the URLconf, and with it every view and what they import (the
    REST framework, the evaluation pages...), on a process's first request: 2.4 s
    of a first answer on a busy 2-core machine.
    """
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (the import is the point)
    loaded = models_warm()
    heap_freeze()
    return loaded


def heap_freeze() -> None:
    """Leave what the start loaded out of the garbage collector's passes from now on.

    A web process holds some 560,000 objects once its views, models and word
    lists are loaded. Python's cyclic collector walks all of them on each full
    pass, with the interpreter lock held: under load each full pass stopped
    every thread of the process for 0.4-0.7 s (``benchmarks/load.py``'s worst
    answers). Those objects live as long as the process, so after one last
    collection they are frozen (``gc.freeze``): later passes walk only what
    requests create.
    """
    gc.collect()
    gc.freeze()


def models_warm() -> list[str]:
    """Load, and run once, the default embedder and every cross-encoder a profile names,
    and the spelling check's word list.

    Returns what was loaded, in words. Never raises: a model that cannot be loaded
    is logged, and an answer that needs it reports it in its trace as usual.
    """
    from collections_app.embedding import SMALL_BATCH, get_embedder
    from query_app.exceptions import QueryError, RerankerNotConfigured
    from query_app.pipeline.rerankers import reranker_warm
    from query_app.services import profile_names, profile_resolve

    started = time.perf_counter()
    loaded: list[str] = []
    try:
        embedder = get_embedder()
        # The first encodes pay one-off costs (kernels, tokenizer caches, the
        # thread pool of larger batches): one question, then a batch of sentences.
        embedder.encode(["warm-up"])
        embedder.encode(["A warm-up sentence."] * (SMALL_BATCH + 1))
        loaded.append(f"embedder {embedder.profile.model}")
    except Exception:
        logger.exception("warm-up: the embedding model could not be loaded")
    seen: set[tuple[str, str, int]] = set()
    for name in profile_names():
        try:
            _, options = profile_resolve(profile=name)
            o = options.rerank
            key = (o.kind, o.model, o.max_length)
            if key in seen:
                continue
            seen.add(key)
            what = reranker_warm(o)
        except RerankerNotConfigured:
            # A fresh install: the profile runs without it and its trace says how to enable it.
            logger.info("warm-up: profile %r: no %s model configured", name, options.rerank.kind)
            continue
        except QueryError as exc:
            logger.warning("warm-up: profile %r: %s", name, exc)
            continue
        except Exception:
            logger.exception("warm-up: profile %r: its reranker could not be loaded", name)
            continue
        if what:
            loaded.append(what)
    from query_app.pipeline.spelling import dictionary_load

    dictionary_load()  # 0.3 s: the spelling check's English word list
    loaded.append("the English word list")
    logger.info(
        "warm-up: loaded %s in %.1f s",
        ", ".join(loaded) or "nothing",
        time.perf_counter() - started,
    )
    return loaded
