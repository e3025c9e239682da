"""The stages end to end, offline (no chat model): when the pipeline declines to answer.

The relevance floor (vector similarity, exact codes, keyword coverage), the minimum
score and an empty collection each give an honest not-found, without citations.
"""

from __future__ import annotations

from query_app.pipeline.generation import NOT_FOUND_ANSWER
from query_app.services import QueryRequest, query_answer, query_retrieve
from tests.support.factories import indexed_collection
from tests.support.knowledge_base import REFUND_QUESTION, UNRELATED_QUESTION, step


def test_unrelated_question_gets_an_honest_not_found_without_citations(kb, reader):
    run = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=UNRELATED_QUESTION)
    )
    assert run.mode == "not-found"
    assert run.answer == NOT_FOUND_ANSWER
    assert run.citations == []
    rerank = step(run, "rerank")["details"]
    assert rerank["decision"] == "declined"
    assert rerank["floor"]["passed"] is False
    assert rerank["floor"]["best_vector_similarity"] < rerank["floor"]["min_vector_similarity"]


def test_hybrid_declines_unrelated_questions_too(kb, reader):
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=UNRELATED_QUESTION,
            overrides={"retrieval": {"mode": "hybrid", "candidate_k": 20}},
        ),
    )
    assert run.mode == "not-found"
    assert run.citations == []


def test_an_exact_code_match_counts_as_relevant_evidence(kb, reader):
    unreachable = {"retrieval": {"mode": "hybrid"}, "floor": {"min_vector_similarity": 0.99}}
    code = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb", question="What does ERR-4471 mean?", overrides=unreachable
        ),
    )
    assert code.mode == "extractive"
    assert step(code, "rerank")["details"]["floor"]["judged_by"] == (
        "exact match of the required codes or phrases"
    )
    words = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="What does the full backup volume error mean?",
            overrides=unreachable,
        ),
    )
    assert words.mode == "not-found"
    assert step(words, "rerank")["details"]["floor"]["judged_by"] == "vector similarity"


def test_keyword_only_retrieval_is_judged_by_keyword_coverage(kb, reader):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="backup volume",
            overrides={"retrieval": {"mode": "keyword"}, "floor": {"min_keyword_coverage": 0.3}},
        ),
    )
    floor = step(run, "rerank")["details"]["floor"]
    assert floor["judged_by"] == "keyword coverage"
    assert floor["best_keyword_coverage"] == 1.0
    assert floor["best_vector_similarity"] is None
    strict = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="backup kangaroo marsupial wombat platypus",
            overrides={"retrieval": {"mode": "keyword"}},
        ),
    )
    assert strict.citations == []
    assert step(strict, "rerank")["details"]["decision"] == "declined"


def test_empty_collection_answers_not_found(db, reader):
    indexed_collection([], slug="empty", members={reader: "read"}, embed_chunks=False)
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="empty",
            question=REFUND_QUESTION,
            overrides={"retrieval": {"mode": "keyword"}},
        ),
    )
    assert run.mode == "not-found"
    assert step(run, "rerank")["details"]["decision"] == "no candidates"


def test_minimum_score_lets_the_system_decline(kb, reader):
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb", question=REFUND_QUESTION, overrides={"rerank": {"min_score": 0.99}}
        ),
    )
    assert run.mode == "not-found"
    details = step(run, "rerank")["details"]
    assert details["min_score"] == {"value": 0.99, "dropped": 5}
