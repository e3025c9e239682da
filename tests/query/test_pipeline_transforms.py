"""The stages end to end, offline (no chat model): query transforms and fusion.

Without a chat model multi-query uses heuristic variants and HyDE probes with the
question, each with a warning; RAG-fusion fuses by RRF; MMR reorders with the chunk
embeddings.
"""

from __future__ import annotations

from query_app.services import QueryRequest, query_answer, query_retrieve
from tests.support.knowledge_base import REFUND_QUESTION, step


def test_multi_query_without_a_chat_model_uses_heuristic_variants_with_a_warning(kb, reader):
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=REFUND_QUESTION,
            overrides={"transform": {"kind": "multi-query", "variants": 2}},
        ),
    )
    transform = step(run, "transform")
    assert transform["skipped"] is False
    assert transform["details"]["source"] == "heuristic"
    assert transform["details"]["probes"][0] == REFUND_QUESTION
    assert len(transform["details"]["probes"]) == 3
    assert "no chat model is configured; used heuristic query variants" in transform["warnings"]
    fuse = step(run, "fuse")["details"]
    assert fuse["method"] == "union-max"
    assert fuse["in"] == 15
    assert fuse["out"] + fuse["duplicates"] == 15
    assert len({c["chunk_id"] for c in run.citations}) == len(run.citations)
    assert run.citations[0]["snippet"].startswith("Customers can request a refund")


def test_rag_fusion_fuses_probes_by_rrf(kb, reader):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=REFUND_QUESTION,
            overrides={"transform": {"kind": "rag-fusion"}},
        ),
    )
    fuse = step(run, "fuse")["details"]
    assert (fuse["method"], fuse["k"]) == ("rrf", 60)
    probes = len(step(run, "transform")["details"]["probes"])
    assert run.citations[0]["score"] <= probes / 61 + 1e-9


def test_hyde_without_a_chat_model_probes_with_the_question_and_warns(kb, reader):
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb", question=REFUND_QUESTION, overrides={"transform": {"kind": "hyde"}}
        ),
    )
    transform = step(run, "transform")
    assert transform["details"]["probes"] == [REFUND_QUESTION]
    assert transform["details"]["kind"] == "replacement"
    assert any("hypothetical answer" in w for w in transform["warnings"])


def test_mmr_reorders_with_the_chunk_embeddings(kb, reader):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="backup error",
            top_n=4,
            overrides={"fusion": {"mmr": True, "mmr_lambda": 0.5}},
        ),
    )
    assert step(run, "fuse")["details"]["mmr"] == {"lambda": 0.5, "similarity": "embedding-cosine"}
