"""Question vectors under load: the per-process cache and micro-batches of concurrent questions.

Real model (all-MiniLM-L6-v2), real PostgreSQL; the tiny models are built here.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from collections_app.embedding import get_embedder
from query_app.pipeline.embed_cache import (
    MicroBatcher,
    question_cache,
    question_cache_clear,
    question_vectors,
)
from query_app.services import QueryRequest, query_answer
from tests.support.knowledge_base import REFUND_QUESTION

NO_RETRIEVAL_CACHE = {"cache.enabled": False}  # so that retrieval embeds every time


@pytest.fixture(autouse=True)
def _cold_question_cache():
    question_cache_clear()
    yield
    question_cache_clear()


def _retrieve(run):
    return next(step for step in run.trace if step["stage"] == "retrieve")


def test_a_question_asked_again_reuses_its_vector_and_gets_the_same_passages(kb, reader):
    request = QueryRequest(collection="kb", question=REFUND_QUESTION, overrides=NO_RETRIEVAL_CACHE)

    first = query_answer(user=reader, request=request)
    second = query_answer(user=reader, request=request)
    other = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb", question="Who can I call for support?", overrides=NO_RETRIEVAL_CACHE
        ),
    )

    assert _retrieve(first)["details"]["vectors_cached"] == 0
    assert _retrieve(second)["details"]["vectors_cached"] == 1
    assert _retrieve(other)["details"]["vectors_cached"] == 0
    assert [c["chunk_id"] for c in second.citations] == [c["chunk_id"] for c in first.citations]
    assert second.answer == first.answer


def test_cached_vectors_are_the_models_own_and_a_caller_cannot_change_them():
    embedder = get_embedder()
    texts = ["How do refunds work?", "Where is the office?"]

    cold = question_vectors(embedder, texts)
    cold.vectors[0][:] = 5.0  # the caller's copy
    warm = question_vectors(embedder, list(reversed(texts)))

    assert (cold.cached, warm.cached) == (0, 2)
    np.testing.assert_allclose(warm.vectors, embedder.encode(texts)[::-1], atol=1e-4)


def test_another_embedding_profile_never_gets_the_old_models_vectors(tmp_path):
    from tests.support.tiny_models import build_tiny_sentence_transformer

    question = "How do refunds work?"
    default = get_embedder()
    first = build_tiny_sentence_transformer(tmp_path / "a", dimensions=32, seed=1)
    # Same profile name, other weights: a model directory replaced under its name.
    second = build_tiny_sentence_transformer(tmp_path / "b", dimensions=32, seed=2)
    tiny_a = get_embedder({"model": str(first), "model_name": "tiny-32"})
    tiny_b = get_embedder({"model": str(second), "model_name": "tiny-32"})

    on_default = question_vectors(default, [question])
    on_a = question_vectors(tiny_a, [question])
    on_b = question_vectors(tiny_b, [question])
    again_on_a = question_vectors(tiny_a, [question])

    assert (on_default.cached, on_a.cached, on_b.cached, again_on_a.cached) == (0, 0, 0, 1)
    assert on_default.vectors.shape == (1, 384)
    assert on_a.vectors.shape == on_b.vectors.shape == (1, 32)
    np.testing.assert_allclose(on_a.vectors, tiny_a.encode([question]), atol=1e-4)
    np.testing.assert_allclose(on_b.vectors, tiny_b.encode([question]), atol=1e-4)
    assert not np.allclose(on_a.vectors, on_b.vectors, atol=1e-3)


def test_a_cache_of_zero_entries_keeps_nothing(rag_set):
    rag_set("query_limits.question_cache_entries", 0)
    question_cache_clear()
    embedder = get_embedder()

    question_vectors(embedder, ["How do refunds work?"])

    assert question_vectors(embedder, ["How do refunds work?"]).cached == 0
    assert len(question_cache()) == 0


def test_concurrent_callers_share_a_batch_and_each_gets_its_own_vectors():
    embedder = get_embedder()
    gate = threading.Event()
    started = threading.Event()

    def encode_after_gate(texts):
        # The first batch holds the model until every other caller is waiting.
        started.set()
        gate.wait(timeout=60)
        return embedder.encode(texts)

    batcher = MicroBatcher(encode_after_gate, max_texts=48)
    asks = {n: [f"Question number {n} about refunds?", f"Where is office {n}?"] for n in range(8)}
    asks[3] = [*asks[3], asks[5][0]]  # one text asked by two callers
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def caller(n: int) -> None:
        try:
            results[n] = batcher.encode(asks[n])
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=caller, args=(0,))
    first.start()
    assert started.wait(timeout=60)
    others = [threading.Thread(target=caller, args=(n,)) for n in range(1, 8)]
    for thread in others:
        thread.start()
    while batcher.waiting() < 7:
        threading.Event().wait(0.01)
    gate.set()
    for thread in [first, *others]:
        thread.join(timeout=120)

    assert errors == []
    assert (batcher.requests, batcher.batches) == (8, 2)  # seven callers, one model call
    for n, texts in asks.items():
        assert results[n].shape == (len(texts), 384)
        np.testing.assert_allclose(results[n], embedder.encode(texts), atol=1e-4)


def test_a_failing_batch_fails_each_of_its_callers_and_the_next_batch_runs():
    embedder = get_embedder()
    calls = []

    def encode(texts):
        calls.append(list(texts))
        if len(calls) == 1:
            raise RuntimeError("the model ran out of memory")
        return embedder.encode(texts)

    batcher = MicroBatcher(encode)

    with pytest.raises(RuntimeError, match="out of memory"):
        batcher.encode(["first"])
    vectors = batcher.encode(["second"])

    assert vectors.shape == (1, 384)
    assert calls == [["first"], ["second"]]


def test_a_sentences_terms_are_kept_and_each_caller_gets_its_own_list():
    from query_app.pipeline.lexical import _content_terms, content_terms

    text = "Refunds are paid within fourteen days of the returned parcel's arrival."
    first = content_terms(text)
    assert first == ["refund", "paid", "within", "fourteen", "day", "return", "parcel", "arriv"]
    held = _content_terms.cache_info().hits
    first.append("changed by the caller")
    again = content_terms(text)
    assert _content_terms.cache_info().hits == held + 1
    assert again == first[:-1]
