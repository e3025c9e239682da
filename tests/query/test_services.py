"""query_answer's contract: permissions, input validation, stored runs, selectors."""

from __future__ import annotations

import json

import pytest

from collections_app.models import CollectionMembership
from collections_app.selectors import CollectionNotFound
from query_app.exceptions import (
    EmptyQuestion,
    QuestionTooLong,
    TopNOutOfRange,
    UnknownProfile,
    UnknownReranker,
)
from query_app.models import QueryRun
from query_app.selectors import QueryRunNotFound, query_run_get_for_user, query_runs_for_user
from query_app.services import QueryRequest, query_answer, query_answer_stream, query_run_rerun
from tests.support.knowledge_base import REFUND_QUESTION


@pytest.mark.parametrize("question", ["", "   \n\t "])
def test_an_empty_question_is_refused(kb, reader, question):
    with pytest.raises(EmptyQuestion, match="the question is empty"):
        query_answer(user=reader, request=QueryRequest(collection="kb", question=question))


def test_an_over_long_question_is_refused_with_the_limit(kb, reader, rag_set):
    with pytest.raises(QuestionTooLong, match="2001 characters long; the limit is 2000"):
        query_answer(user=reader, request=QueryRequest(collection="kb", question="x" * 2001))
    rag_set("query_limits.max_question_chars", 20)
    with pytest.raises(QuestionTooLong, match="the limit is 20"):
        query_answer(user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION))


def test_top_n_out_of_range_is_refused(kb, reader):
    with pytest.raises(TopNOutOfRange, match="between 1 and 50, got 0"):
        query_answer(
            user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION, top_n=0)
        )


def test_unknown_profile_and_reranker_are_refused_with_the_known_names(kb, reader):
    with pytest.raises(
        UnknownProfile, match="known profiles: adaptive, balanced, corrective, fast, quality"
    ):
        query_answer(
            user=reader,
            request=QueryRequest(collection="kb", question=REFUND_QUESTION, profile="best"),
        )
    with pytest.raises(UnknownReranker, match="known rerankers: cross-encoder, llm, none"):
        query_answer(
            user=reader,
            request=QueryRequest(
                collection="kb", question=REFUND_QUESTION, overrides={"rerank": {"kind": "bge"}}
            ),
        )


def test_a_collection_the_user_may_not_read_looks_missing(kb, outsider):
    with pytest.raises(CollectionNotFound, match="no collection 'kb'"):
        query_answer(user=outsider, request=QueryRequest(collection="kb", question=REFUND_QUESTION))
    with pytest.raises(CollectionNotFound):
        query_answer(user=outsider, request=QueryRequest(collection=kb, question=REFUND_QUESTION))
    with pytest.raises(CollectionNotFound, match="no collection 'nope'"):
        query_answer(
            user=outsider, request=QueryRequest(collection="nope", question=REFUND_QUESTION)
        )
    # Checked before anything is streamed.
    with pytest.raises(CollectionNotFound):
        query_answer_stream(
            user=outsider,
            request=QueryRequest(collection="kb", question=REFUND_QUESTION, stream=True),
        )


def test_bad_input_stores_nothing(kb, reader):
    with pytest.raises(EmptyQuestion):
        query_answer(user=reader, request=QueryRequest(collection="kb", question=" "))
    assert not QueryRun.objects.exists()


def test_every_answer_is_stored_with_its_evidence_and_trace(kb, reader):
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection=kb,
            question=f"  {REFUND_QUESTION}  ",
            top_n=3,
            overrides={"context": {"ordering": "linear"}},
        ),
    )
    stored = QueryRun.objects.get(pk=run.pk)
    assert stored.user == reader
    assert stored.collection == kb
    assert stored.question == REFUND_QUESTION
    assert stored.profile == "fast"
    assert stored.options["rerank"]["top_n"] == 3
    assert stored.options["context"]["ordering"] == "linear"
    assert stored.overrides == {"context": {"ordering": "linear"}, "rerank.top_n": 3}
    assert stored.answer == run.answer and stored.mode == "extractive"
    assert len(stored.citations) == 3
    assert set(stored.citations[0]) >= {
        "marker",
        "chunk_id",
        "source",
        "snippet",
        "score",
        "char_start",
        "char_end",
        "page",
    }
    assert stored.trace[0]["stage"] == "transform"
    assert stored.timings["total_ms"] > 0
    assert set(stored.timings["stages"]) == {s["stage"] for s in stored.trace}
    assert stored.index_version == kb.index_version
    assert stored.error == ""
    payload = stored.as_payload()
    assert json.loads(json.dumps(payload))["citations"] == stored.citations


def test_store_false_returns_an_unsaved_run(kb, reader):
    run = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION), store=False
    )
    assert run.pk is None
    assert run.citations
    assert not QueryRun.objects.exists()


def test_a_run_can_be_rerun_with_another_profile_setting(kb, reader):
    first = query_answer(
        user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION, top_n=2)
    )
    again = query_run_rerun(user=reader, run=first, overrides={"retrieval": {"mode": "hybrid"}})
    assert again.pk != first.pk
    assert again.question == first.question
    assert again.options["retrieval"]["mode"] == "hybrid"


def test_runs_are_visible_to_readers_of_their_collection_only(kb, reader, outsider):
    run = query_answer(user=reader, request=QueryRequest(collection="kb", question=REFUND_QUESTION))
    assert query_run_get_for_user(reader, run_id=run.pk) == run
    assert list(query_runs_for_user(reader)) == [run]
    with pytest.raises(QueryRunNotFound):
        query_run_get_for_user(outsider, run_id=run.pk)
    assert list(query_runs_for_user(outsider, mine_only=False)) == []
    # Shared: another reader of the collection may open it, but it is not theirs.
    CollectionMembership.objects.create(collection=kb, user=outsider, role="read")
    assert query_run_get_for_user(outsider, run_id=run.pk) == run
    assert list(query_runs_for_user(outsider)) == []
    # Losing access hides the run, even from its author.
    CollectionMembership.objects.filter(user=reader).delete()
    with pytest.raises(QueryRunNotFound):
        query_run_get_for_user(reader, run_id=run.pk)


def test_an_unknown_run_id_is_not_found(db, reader):
    with pytest.raises(QueryRunNotFound):
        query_run_get_for_user(reader, run_id=12345)
    with pytest.raises(QueryRunNotFound):
        query_run_get_for_user(reader, run_id="abc")  # type: ignore[arg-type]
