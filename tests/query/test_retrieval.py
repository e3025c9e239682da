"""The retrieve stage against real PostgreSQL + pgvector: vector, keyword and hybrid legs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collections_app.models import Collection
from collections_app.search_index import keyword_terms, term_document_frequencies, vector_index_name
from collections_app.search_index.vector import vector_search
from query_app.exceptions import EmbeddingProfileMismatch, InvalidOption
from query_app.pipeline.retrieval import collection_embedder, retrieve_probe
from query_app.services import QueryRequest, query_answer, query_prepare, query_retrieve
from tests.support.factories import Doc, indexed_collection

CODE_QUESTION = "What does ERR-4471 mean?"
PARAPHRASE_QUESTION = "How long do I have to get my money returned?"


def _retrieve(user, question, *, mode, k=3):
    run = query_retrieve(
        user=user,
        request=QueryRequest(
            collection="kb",
            question=question,
            # per_document 0: each leg reads exactly k chunks (no deeper pool).
            overrides={
                "retrieval": {"mode": mode, "candidate_k": k, "per_document": 0},
                "rerank": {"top_n": k},
            },
        ),
    )
    return run


def _sources(run) -> list[str]:
    return [c["snippet"] for c in run.citations]


def _step(run, stage):
    return next(s for s in run.trace if s["stage"] == stage)


def test_only_the_keyword_leg_finds_the_exact_code(kb, reader):
    vector = _retrieve(reader, CODE_QUESTION, mode="vector")
    keyword = _retrieve(reader, CODE_QUESTION, mode="keyword")
    assert not any(s.startswith("ERR-4471") for s in _sources(vector))
    assert _sources(keyword)[0].startswith("ERR-4471")
    # Look-alike codes never match: the code must appear exactly.
    assert not any(s.startswith(("ERR-4470", "ERR-4472")) for s in _sources(keyword))


def test_only_the_vector_leg_finds_the_paraphrase(kb, reader):
    vector = _retrieve(reader, PARAPHRASE_QUESTION, mode="vector")
    keyword = _retrieve(reader, PARAPHRASE_QUESTION, mode="keyword")
    assert _sources(vector)[0].startswith("Customers can request a refund")
    assert not any("refund" in s for s in _sources(keyword))


def test_hybrid_finds_both_and_each_candidate_keeps_its_leg_ranks(kb, reader):
    code = _retrieve(reader, CODE_QUESTION, mode="hybrid")
    paraphrase = _retrieve(reader, PARAPHRASE_QUESTION, mode="hybrid")
    assert any(s.startswith("ERR-4471") for s in _sources(code))
    assert _sources(paraphrase)[0].startswith("Customers can request a refund")
    # The trace keeps every candidate's place in each leg.
    ranking = {e["chunk_id"]: e for e in _step(code, "fuse")["details"]["ranking"]}
    exact_id = next(c["chunk_id"] for c in code.citations if c["snippet"].startswith("ERR-4471"))
    assert set(ranking[exact_id]["legs"]) == {"keyword"}
    assert ranking[exact_id]["legs"]["keyword"]["rank"] == 1

    query = query_prepare(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=CODE_QUESTION,
            overrides={"retrieval": {"mode": "hybrid", "candidate_k": 3, "per_document": 0}},
            top_n=3,
            retrieval_only=True,
        ),
    )
    vector = collection_embedder(query.collection).encode([CODE_QUESTION])[0]
    result = retrieve_probe(
        collection=query.collection,
        probe=CODE_QUESTION,
        probe_index=0,
        vector=vector,
        options=query.options,
    )
    by_text = {c.text[:8]: c for c in result.candidates}
    exact = by_text["ERR-4471"]
    assert set(exact.legs) == {"keyword"}
    assert exact.legs["keyword"].rank == 1
    assert exact.retrieval_score == pytest.approx(1 / (60 + 1))
    both = [c for c in result.candidates if len(c.legs) == 2]
    for cand in both:
        expected = sum(1 / (60 + hit.rank) for hit in cand.legs.values())
        assert cand.retrieval_score == pytest.approx(expected)
    # Every candidate has a cosine to the question, keyword-only hits included.
    assert all(c.vector_similarity is not None for c in result.candidates)
    assert exact.keyword_coverage is not None and exact.keyword_coverage > 0.5


def test_rrf_k_is_configurable(kb, reader):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=CODE_QUESTION,
            overrides={
                "retrieval": {
                    "mode": "hybrid",
                    "candidate_k": 3,
                    "rrf_k": 1,
                    "fusion": "rrf",
                    "per_document": 0,
                }
            },
            top_n=3,
        ),
    )
    fusion = _step(run, "retrieve")["details"]["per_probe"][0]["fusion"]
    assert fusion == {"method": "rrf", "k": 1, "fused": fusion["fused"]}
    assert max(c["score"] for c in run.citations) == pytest.approx(1 / (1 + 1))


def test_evidence_fusion_keeps_the_exact_code_and_reports_its_weights(kb, reader):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=CODE_QUESTION,
            overrides={"retrieval": {"mode": "hybrid", "candidate_k": 3, "fusion": "evidence"}},
            top_n=3,
        ),
    )
    fusion = _step(run, "retrieve")["details"]["per_probe"][0]["fusion"]
    assert fusion["method"] == "evidence"
    assert fusion["weights"] == {"vector": 1.0, "keyword": 1.0}
    # Keyword hits holding the question's code are exact matches: full evidence.
    assert any(s.startswith("ERR-4471") for s in _sources(run))


def _adaptive(reader, question):
    return query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question=question,
            overrides={"retrieval": {"mode": "hybrid", "candidate_k": 3, "fusion": "adaptive"}},
            top_n=3,
        ),
    )


def test_adaptive_fusion_weighs_the_keyword_leg_by_its_evidence_for_the_question(kb, reader):
    code = _adaptive(reader, CODE_QUESTION)
    fusion = _step(code, "retrieve")["details"]["per_probe"][0]["fusion"]
    # The question's code is held by every keyword hit: the keyword leg counts fully.
    assert fusion["method"] == "adaptive"
    assert fusion["keyword_evidence"] == 1.0
    assert fusion["weights"] == {"vector": 1.0, "keyword": 1.0}
    assert any(s.startswith("ERR-4471") for s in _sources(code))

    paraphrase = _adaptive(reader, PARAPHRASE_QUESTION)
    fusion = _step(paraphrase, "retrieve")["details"]["per_probe"][0]["fusion"]
    # No keyword hit holds all of the question's words: the keyword leg weighs
    # its evidence, and the vector leg's answer stays first.
    assert 0.0 <= fusion["keyword_evidence"] < 1.0
    assert fusion["weights"]["keyword"] == pytest.approx(fusion["keyword_evidence"], abs=1e-3)
    assert _sources(paraphrase)[0].startswith("Customers can request a refund")


def test_an_unknown_fusion_is_refused_with_the_known_ones(kb, reader):
    with pytest.raises(InvalidOption, match="rrf, evidence, adaptive, scores"):
        query_prepare(
            user=reader,
            request=QueryRequest(
                collection="kb",
                question=CODE_QUESTION,
                overrides={"retrieval": {"mode": "hybrid", "fusion": "borda"}},
            ),
        )


@pytest.fixture
def large_collection(db, reader):
    """3,000 chunks with random vectors: enough rows for the planner to prefer the indexes."""
    from tests.support.factories import chunks_add

    collection = indexed_collection(
        ["Kernel panic after a firmware update."], slug="large", members={reader: "read"}
    )
    source = collection.sources.get()
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO collections_app_chunk (id, collection_id, source_id, source_hash, "
            "ordinal, text, char_start, char_end, section_path, token_count, metadata, "
            "embedding, created_at) "
            "SELECT 'bulk-' || i, %s, %s, 'x', i, 'Routine note ' || i || ' about topic ' || "
            "(i %% 40) || ' and the weekly maintenance window.', 0, 10, '[]', 10, '{}', "
            "(SELECT array_agg(random() - 0.5) FROM generate_series(1, 384 + 0 * i))::vector, "
            "now() FROM generate_series(1, 3000) AS i",
            [collection.pk, source.pk],
        )
        cur.execute("ANALYZE collections_app_chunk")
    chunks_add(collection, [])  # refresh the term statistics
    return collection


def _plan(sql: str) -> str:
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cur.fetchall())


def test_vector_search_uses_the_collection_hnsw_index(large_collection, reader):
    """Same cast and filter as the partial index: the planner answers from it, no scan."""
    with CaptureQueriesContext(connection) as captured:
        query_retrieve(
            user=reader, request=QueryRequest(collection="large", question="kernel panic firmware")
        )
    sent = next(q["sql"] for q in captured.captured_queries if "ORDER BY (embedding" in q["sql"])
    # One round trip: the search with its (transaction-local) ef_search before it.
    ef, sql = sent.split("; ", 1)
    assert "hnsw.ef_search" in ef and "'40'" in ef
    plan = _plan(sql)
    assert f"Index Scan using {vector_index_name(large_collection.pk, 384)}" in plan
    assert "Seq Scan" not in plan


def test_ef_search_bounds_the_search_it_is_sent_with(large_collection):
    """HNSW returns at most ef_search rows: each search runs with the value sent with it."""
    vector = [1.0] + [0.0] * 383
    found = vector_search(
        collection_id=large_collection.pk, dimensions=384, vector=vector, k=100, ef_search=100
    )
    assert len(found) == 100
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    bounded = vector_search(
        collection_id=large_collection.pk, dimensions=384, vector=vector, k=100, ef_search=12
    )
    assert 0 < len(bounded) <= 12
    again = vector_search(
        collection_id=large_collection.pk, dimensions=384, vector=vector, k=100, ef_search=100
    )
    assert again == found


def test_keyword_search_uses_the_gin_index(large_collection, reader):
    with CaptureQueriesContext(connection) as captured:
        run = query_retrieve(
            user=reader,
            request=QueryRequest(
                collection="large",
                question="kernel panic firmware",
                overrides={"retrieval": {"mode": "keyword"}},
            ),
        )
    assert run.citations[0]["snippet"] == "Kernel panic after a firmware update."
    sql = next(q["sql"] for q in captured.captured_queries if "ts_filter" in q["sql"])
    plan = _plan(sql)
    assert "Bitmap Index Scan on chunk_search_vector_gin" in plan
    assert "Seq Scan on collections_app_chunk" not in plan


def test_ef_search_follows_candidate_k(kb, reader):
    run = _retrieve(reader, PARAPHRASE_QUESTION, mode="vector", k=30)
    assert _step(run, "retrieve")["details"]["per_probe"][0]["vector"]["ef_search"] == 60


def test_per_document_keeps_one_long_document_from_crowding_the_candidates_without_dropping_it(
    db, reader
):
    manual = [f"Backup retention, part {n}: backup copies and backup schedules." for n in range(8)]
    indexed_collection(
        [
            Doc(location="/manual.md", chunks=manual),
            Doc(location="/faq.md", chunks=["How long are backups kept? Thirty days."]),
        ],
        slug="crowded",
        members={reader: "read"},
    )

    def sources(per_document: int) -> list[str]:
        run = query_retrieve(
            user=reader,
            request=QueryRequest(
                collection="crowded",
                question="backup retention",
                overrides={
                    "retrieval": {"mode": "hybrid", "candidate_k": 3, "per_document": per_document}
                },
                top_n=3,
            ),
        )
        return [c["source"] for c in run.citations]

    crowded = sources(0)
    collapsed = sources(1)
    assert crowded == ["/manual.md"] * 3
    # The FAQ gets a place; the manual's further passages are demoted, not dropped, so
    # a collection of few documents still gives as many candidates as asked for.
    assert sorted(collapsed) == ["/faq.md", "/manual.md", "/manual.md"]


def test_a_collection_indexed_with_another_model_asks_for_a_reindex(kb, reader):
    Collection.objects.filter(pk=kb.pk).update(embedding_model="some-other-model")
    with pytest.raises(EmbeddingProfileMismatch, match="reindex the collection"):
        query_answer(
            user=reader, request=QueryRequest(collection="kb", question=PARAPHRASE_QUESTION)
        )


def test_keyword_only_retrieval_needs_no_embeddings(db, reader):
    indexed_collection(
        [Doc(location="/notes.md", chunks=["Backups run nightly at two o'clock."])],
        slug="plain",
        members={reader: "read"},
        embed_chunks=False,
    )
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="plain",
            question="When do backups run?",
            overrides={"retrieval": {"mode": "keyword"}},
        ),
    )
    assert run.citations[0]["snippet"] == "Backups run nightly at two o'clock."
    assert "embedder" not in _step(run, "retrieve")["details"]


def test_the_keyword_legs_lexemes_bring_their_document_frequencies_in_one_round_trip(
    large_collection,
):
    text = "kernel panic after the weekly maintenance window zzqx"
    with CaptureQueriesContext(connection) as captured:
        terms = keyword_terms(text=text, required_text="", collection_id=large_collection.pk)
    assert len(captured.captured_queries) == 1
    assert terms.df == term_document_frequencies(
        collection_id=large_collection.pk, lexemes=terms.lexemes
    )
    assert "zzqx" in terms.lexemes and "zzqx" not in terms.df  # in no chunk
    assert terms.df["window"] == 3000 and terms.df["kernel"] == 1
    assert keyword_terms(text=text, required_text="").df is None
