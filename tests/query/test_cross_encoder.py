"""The cross-encoder reranker with a tiny model the tests build themselves (no download)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from query_app.exceptions import RerankerModelError, RerankerNotConfigured
from query_app.models import QueryRun
from query_app.services import QueryRequest, query_answer, query_retrieve
from tests.support.knowledge_base import KB_DOCS, REFUND_QUESTION, step
from tests.support.tiny_models import build_tiny_cross_encoder, export_onnx

TEXTS = [REFUND_QUESTION, *[chunk for doc in KB_DOCS for chunk in doc.chunks]]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), texts=TEXTS)


@pytest.fixture(scope="module")
def tiny_onnx_model(tmp_path_factory, tiny_model):
    directory = tmp_path_factory.mktemp("tiny-ce-onnx")
    shutil.copytree(tiny_model, directory, dirs_exist_ok=True)
    export_onnx(directory)
    return directory


def _candidates(reader) -> list[dict]:
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=REFUND_QUESTION,
            top_n=8,
            overrides={"floor": {"min_vector_similarity": None}},
        ),
    )
    return run.citations


def _model_scores(model_dir, candidates, texts) -> np.ndarray:
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(model_dir), device="cpu")
    return model.predict([(REFUND_QUESTION, texts[c["chunk_id"]]) for c in candidates])


def test_cross_encoder_orders_candidates_by_its_own_scores(kb, reader, tiny_model, rag_set):
    # The deployment names the model (administrators only); a request picks the reranker.
    rag_set("query.rerank.model", str(tiny_model))
    candidates = _candidates(reader)
    texts = dict(kb.chunks.values_list("id", "text"))
    scores = _model_scores(tiny_model, candidates, texts)
    expected = [candidates[i]["chunk_id"] for i in np.argsort(-scores)[:3]]

    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=REFUND_QUESTION,
            overrides={
                "retrieval": {"candidate_k": 8},
                "rerank": {"kind": "cross-encoder", "top_n": 3},
                "floor": {"min_vector_similarity": None},
            },
        ),
    )
    assert [c["chunk_id"] for c in run.citations] == expected
    assert [c["score"] for c in run.citations] == pytest.approx(sorted(scores)[::-1][:3], abs=1e-5)
    rerank = step(run, "rerank")["details"]
    assert (rerank["reranker"], rerank["model"], rerank["scored"], rerank["kept"]) == (
        "cross-encoder",
        str(tiny_model),
        8,
        3,
    )


def test_onnx_cross_encoder_gives_the_same_scores(kb, reader, tiny_model, tiny_onnx_model, rag_set):
    overrides = {
        "retrieval": {"candidate_k": 8},
        "rerank": {"kind": "cross-encoder", "top_n": 4},
        "floor": {"min_vector_similarity": None},
    }
    request = QueryRequest(collection="kb", question=REFUND_QUESTION, overrides=overrides)
    rag_set("query.rerank.model", str(tiny_model))
    torch_run = query_retrieve(user=reader, request=request)
    rag_set("query.rerank.model", str(tiny_onnx_model))
    onnx_run = query_retrieve(user=reader, request=request)
    assert [c["chunk_id"] for c in onnx_run.citations] == [
        c["chunk_id"] for c in torch_run.citations
    ]
    assert [c["score"] for c in onnx_run.citations] == pytest.approx(
        [c["score"] for c in torch_run.citations], abs=1e-4
    )


def test_balanced_profile_reads_the_model_from_settings(kb, reader, tiny_model, rag_set):
    rag_set("query.rerank.model", str(tiny_model))
    run = query_answer(
        user=reader,
        request=QueryRequest(collection="kb", question=REFUND_QUESTION, profile="balanced"),
    )
    assert run.profile == "balanced"
    rerank = step(run, "rerank")["details"]
    assert (rerank["reranker"], rerank["model"], rerank["scored"]) == (
        "cross-encoder",
        str(tiny_model),
        step(run, "retrieve")["details"]["candidates"],
    )
    assert step(run, "retrieve")["details"]["mode"] == "hybrid"


def test_without_a_model_balanced_answers_in_retrieval_order_and_says_how_to_enable_it(
    kb, reader, rag_set
):
    rag_set("query.rerank.model", "")
    run = query_answer(
        user=reader,
        request=QueryRequest(collection="kb", question=REFUND_QUESTION, profile="balanced"),
    )
    plain = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=REFUND_QUESTION,
            profile="balanced",
            overrides={"rerank.kind": "none"},
        ),
    )

    assert run.mode == "extractive" and run.citations
    rerank = step(run, "rerank")
    assert rerank["details"]["reranker"] == "cross-encoder"
    assert rerank["details"]["skipped"] == "cross-encoder reranker not configured, skipped"
    assert "RAG_RERANK_MODEL" in rerank["details"]["skipped_reason"]
    assert "RAG_RERANK_MODEL" in rerank["details"]["enable"]
    assert rerank["warnings"][0].startswith(
        "the cross-encoder reranker is not configured here, so this step kept the retrieval order"
    )
    # What runs is exactly the profile without a reranker: the retrieval order.
    assert [c["chunk_id"] for c in run.citations] == [c["chunk_id"] for c in plain.citations]
    assert [c["rerank_score"] for c in rerank["details"]["ranking"]] == [None] * len(
        rerank["details"]["ranking"]
    )
    assert any("rerank: the cross-encoder reranker" in w for w in run.warnings)


def test_rerank_required_keeps_the_clear_error_naming_the_setting(kb, reader, rag_set):
    rag_set("query.rerank.model", "")
    with pytest.raises(RerankerNotConfigured) as err:
        query_answer(
            user=reader,
            request=QueryRequest(
                collection="kb",
                question=REFUND_QUESTION,
                profile="balanced",
                overrides={"rerank.required": True},
            ),
        )
    message = str(err.value)
    assert 'RAG["query"]["rerank"]["model"]' in message
    assert "RAG_RERANK_MODEL" in message
    # Refused before any work: nothing was stored.
    assert not QueryRun.objects.exists()


def test_a_model_that_cannot_be_loaded_is_reported(kb, reader, tmp_path, rag_set):
    missing = tmp_path / "no-such-model"
    missing.mkdir()
    rag_set("query.rerank.model", str(missing))
    overrides = {"rerank": {"kind": "cross-encoder"}}
    run = query_answer(
        user=reader,
        request=QueryRequest(collection="kb", question=REFUND_QUESTION, overrides=overrides),
    )
    rerank = step(run, "rerank")
    assert rerank["details"]["skipped"] == "cross-encoder reranker cannot load its model, skipped"
    assert "cannot load the cross-encoder model" in rerank["warnings"][0]
    assert str(missing) in rerank["warnings"][0]

    with pytest.raises(RerankerModelError, match="cannot load the cross-encoder model"):
        query_answer(
            user=reader,
            request=QueryRequest(
                collection="kb",
                question=REFUND_QUESTION,
                overrides={**overrides, "rerank.required": True},
            ),
        )
