"""The keyword leg: what a question requires (codes, quoted phrases, negations), where
it may be found (the chunk's text or its document's title), and BM25 ranking."""

from __future__ import annotations

import pytest

from collections_app.models import Collection
from query_app.pipeline.keyword import code_parts, keyword_query_parse, keyword_search
from query_app.pipeline.options import RetrievalOptions
from tests.support.factories import Doc, indexed_collection


@pytest.mark.parametrize(
    ("token", "required"),
    [
        ("ERR-4471", ["ERR-4471"]),
        ("v2.3.1", ["v2.3.1"]),
        ("sha256", ["sha256"]),
        ("Rad53-dependent", ["Rad53"]),
        ("2019", []),
        ("400mg", []),
        ("0-dimensional", []),
        ("https://example.org/a1", []),
    ],
)
def test_codes_that_must_match(token, required):
    assert code_parts(token) == required


def test_websearch_syntax_is_parsed():
    parsed = keyword_query_parse('"refund policy" for ERR-4471 -gift cards')
    assert parsed.phrases == ("refund policy",)
    assert parsed.codes == ("ERR-4471",)
    assert parsed.negated == ("gift",)
    assert "gift" not in parsed.text


def test_quoted_phrases_must_match(kb):
    options = RetrievalOptions()
    loose = keyword_search(collection=kb, text="backup server", k=10, options=options)
    exact = keyword_search(collection=kb, text='"backup server"', k=10, options=options)
    texts = [h.chunk_id for h in exact.hits]
    assert len(loose.hits) > len(exact.hits) >= 1
    assert exact.details["required"] == "'backup' <-> 'server'"
    chunk_texts = dict(kb.chunks.values_list("id", "text"))
    assert all("backup server" in chunk_texts[cid] for cid in texts)


def test_negated_words_exclude_chunks(kb):
    options = RetrievalOptions()
    hits = keyword_search(collection=kb, text="backup -firewall", k=10, options=options).hits
    chunk_texts = dict(kb.chunks.values_list("id", "text"))
    assert hits
    assert not any("firewall" in chunk_texts[h.chunk_id] for h in hits)


def test_bm25_prefers_rare_terms_over_common_ones(db):
    common = "The server log shows the server status and the server uptime."
    rare = "The server log mentions kernel panic once."
    filler = [f"The server restarted at night number {i}." for i in range(8)]
    collection = indexed_collection([common, rare, *filler], embed_chunks=False)
    hits = keyword_search(
        collection=collection, text="server kernel panic", k=3, options=RetrievalOptions()
    ).hits
    texts = dict(collection.chunks.values_list("id", "text"))
    assert texts[hits[0].chunk_id] == rare


def test_missing_term_statistics_fall_back_to_ts_rank_cd_with_a_warning(kb):
    Collection.objects.filter(pk=kb.pk).update(keyword_stats={})
    kb.refresh_from_db()
    result = keyword_search(collection=kb, text="backup volume", k=5, options=RetrievalOptions())
    assert result.hits
    assert any("term statistics are missing" in w for w in result.warnings)


def test_common_terms_are_pruned_from_matching_when_the_pool_is_small(db):
    docs = [f"Server note {i}: the server is fine." for i in range(150)]
    docs.append("Server note: kernel panic on the server.")
    collection = indexed_collection(docs, embed_chunks=False)
    result = keyword_search(
        collection=collection,
        text="server kernel",
        k=5,
        options=RetrievalOptions(keyword_pool=100),
    )
    assert result.details["pruned_common_terms"] == ["server"]
    texts = dict(collection.chunks.values_list("id", "text"))
    assert "kernel" in texts[result.hits[0].chunk_id]
    assert result.details["pooled"] == 1


def test_a_required_code_may_be_named_by_the_document_title_alone(db):
    """Page 2 of a datasheet never names its product; its title does."""
    datasheet = Doc(
        location="/sheets/q3.pdf",
        title="Quillmate Q3 datasheet",
        chunks=[
            "Quillmate Q3. Weight: 182 g including the battery.",
            "Environmental. Operating temperature: -10 to 50 C. Sealing: IP65.",
        ],
    )
    other = Doc(
        location="/sheets/q2.pdf",
        title="Quillmate Q2 datasheet",
        chunks=["Environmental. Operating temperature: 0 to 40 C. Sealing: IP54."],
    )
    collection = indexed_collection([datasheet, other], embed_chunks=False)
    options = RetrievalOptions()
    texts = dict(collection.chunks.values_list("id", "text"))
    search = keyword_search(
        collection=collection, text="Q3 operating temperature", k=10, options=options
    )
    found = [texts[h.chunk_id] for h in search.hits]
    assert search.details["required"] == "'q3'"
    # The Q3's own page 2 is found by its title; the Q2's page, about the same, is not.
    assert "Environmental. Operating temperature: -10 to 50 C. Sealing: IP65." in found
    assert not any("IP54" in text for text in found)
    # Read through its title, the page takes the title's words as its own, a negated
    # one included; a chunk whose own text holds the code is judged by its text alone.
    excluded = keyword_search(
        collection=collection, text="Q3 operating temperature -datasheet", k=10, options=options
    )
    assert [texts[h.chunk_id] for h in excluded.hits] == [
        "Quillmate Q3. Weight: 182 g including the battery."
    ]


def test_with_missing_code_weight_a_hit_lacking_the_code_follows_those_holding_it(db):
    sheets = [
        Doc(
            location="/sheets/q3.pdf",
            title="Quillmate Q3 datasheet",
            chunks=["Environmental. Operating temperature: -10 to 50 C. Sealing: IP65."],
        ),
        Doc(
            location="/sheets/q2.pdf",
            title="Quillmate Q2 datasheet",
            chunks=["Environmental. Operating temperature: 0 to 40 C. Operating humidity 90%."],
        ),
    ]
    collection = indexed_collection(sheets, embed_chunks=False)
    texts = dict(collection.chunks.values_list("id", "text"))
    question = "Q3 operating temperature"
    strict = keyword_search(collection=collection, text=question, k=10, options=RetrievalOptions())
    assert [texts[h.chunk_id][-5:] for h in strict.hits] == ["IP65."]
    ignored = keyword_search(
        collection=collection, text=question, k=10, options=RetrievalOptions(require_codes=False)
    )
    assert [texts[h.chunk_id][-6:] for h in ignored.hits] == ["y 90%.", " IP65."]

    soft = keyword_search(
        collection=collection,
        text=question,
        k=10,
        options=RetrievalOptions(missing_code_weight=0.5),
    )
    # The Q2 page holds "operating" twice and scores higher on its words alone, yet
    # lacking the code it comes second, marked as not holding it.
    assert [(texts[h.chunk_id][-6:], h.exact) for h in soft.hits] == [
        (" IP65.", True),
        ("y 90%.", False),
    ]
    assert soft.details["preferred"] == "'q3'"
    assert soft.details["required"] == ""


def test_with_missing_code_weight_a_code_no_chunk_holds_still_finds_its_words(db):
    collection = indexed_collection(
        ["The Rad53 kinase checkpoint arrests replication forks.", "Forks stall."],
        embed_chunks=False,
    )
    question = "Rad9-dependent checkpoint kinase"
    strict = keyword_search(collection=collection, text=question, k=10, options=RetrievalOptions())
    soft = keyword_search(
        collection=collection,
        text=question,
        k=10,
        options=RetrievalOptions(missing_code_weight=0.5),
    )
    texts = dict(collection.chunks.values_list("id", "text"))
    assert strict.hits == []
    assert [texts[h.chunk_id] for h in soft.hits] == [
        "The Rad53 kinase checkpoint arrests replication forks."
    ]
    assert soft.hits[0].exact is False
