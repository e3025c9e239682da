"""The decisive keyword hit rule (``retrieval.decisive_keyword``) on real PostgreSQL + pgvector.

The collection is built so that rank fusion buries the one passage holding the
question's rare words: the vector leg prefers passages about rotating keys in
general, which also hold the question's common words and so fill the keyword
leg's next places with low scores.
"""

from __future__ import annotations

import pytest

from query_app.pipeline.decisive_keyword import decisive_keyword_hit
from query_app.services import QueryRequest, query_retrieve
from tests.support.factories import Doc, indexed_collection

QUESTION = "How often are Zephyrine cipher keys rotated by default?"
ANSWER = "[zephyrine] cipher = aes-gcm, rotate_keys_after = 90d, zephyrine cipher store on disk."
GENERAL = [
    "How often should keys be rotated? Rotate keys often, by default every month.",
    "Rotating keys often is good practice: keys rotated by default limit exposure.",
    "Key rotation: how often keys are rotated depends on the default policy.",
    "By default, rotated keys are kept so old data can still be read.",
    "Keys are rotated often in busy systems; the default schedule is weekly.",
    "Password rotation: how often passwords are changed by default.",
]


def _order(slug, reader, **retrieval):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection=slug,
            question=QUESTION,
            # per_document 0: each leg reads exactly candidate_k chunks.
            overrides={
                "retrieval": {"mode": "hybrid", "candidate_k": 6, "per_document": 0, **retrieval}
            },
            top_n=6,
        ),
    )
    retrieve = next(s for s in run.trace if s["stage"] == "retrieve")
    fusion = retrieve["details"]["per_probe"][0]["fusion"]
    return [c["source"] for c in run.citations], fusion


@pytest.fixture
def buried(db, reader):
    """The answer's passage, which the vector leg misses, among passages about key rotation."""
    docs = [Doc(location=f"/general-{n}.md", chunks=[text]) for n, text in enumerate(GENERAL)]
    return indexed_collection(
        [*docs, Doc(location="/zephyrine.md", chunks=[ANSWER])],
        slug="buried",
        members={reader: "read"},
    )


def test_off_by_default_the_fusion_leaves_the_decisive_hit_where_rrf_puts_it(buried, reader):
    order, fusion = _order("buried", reader)
    assert "decisive_keyword" not in fusion
    assert "/zephyrine.md" not in order[:2]


def test_a_decisive_keyword_hit_is_placed_at_the_configured_rank(buried, reader):
    off, _ = _order("buried", reader)
    on, fusion = _order("buried", reader, decisive_keyword=True)
    decisive = fusion["decisive_keyword"]
    assert decisive["fires"] is True
    assert decisive["ratio"] >= 2.0
    assert decisive["coverage"] >= 0.6
    assert decisive["fused_rank"] == (
        off.index("/zephyrine.md") + 1 if "/zephyrine.md" in off else None
    )
    assert decisive["rank"] == 2
    assert on[1] == "/zephyrine.md"
    # Everything else keeps its fused order.
    assert [s for s in on if s != "/zephyrine.md"] == [s for s in off if s != "/zephyrine.md"][:5]

    first, fusion = _order("buried", reader, decisive_keyword=True, decisive_keyword_rank=1)
    assert first[0] == "/zephyrine.md"
    assert fusion["decisive_keyword"]["rank"] == 1


def test_a_hit_already_above_the_rank_is_never_moved_down(buried, reader):
    off, _ = _order("buried", reader)
    rank = off.index("/zephyrine.md") + 1
    on, fusion = _order("buried", reader, decisive_keyword=True, decisive_keyword_rank=6)
    assert fusion["decisive_keyword"]["fires"] is True
    assert fusion["decisive_keyword"]["rank"] == rank
    assert on == off


def test_no_promotion_when_the_margin_over_the_second_hit_is_short(db, reader):
    docs = [Doc(location=f"/general-{n}.md", chunks=[text]) for n, text in enumerate(GENERAL)]
    rival = "[zephyrine] cipher keys: the zephyrine cipher is rotated by an operator."
    indexed_collection(
        [
            *docs,
            Doc(location="/zephyrine.md", chunks=[ANSWER]),
            Doc(location="/rival.md", chunks=[rival]),
        ],
        slug="rivals",
        members={reader: "read"},
    )
    off, _ = _order("rivals", reader)
    on, fusion = _order("rivals", reader, decisive_keyword=True)
    decisive = fusion["decisive_keyword"]
    assert decisive["fires"] is False
    assert decisive["ratio"] < 2.0
    assert on == off


def test_no_promotion_when_the_hit_covers_too_little_of_the_question(buried, reader):
    off, _ = _order("buried", reader)
    on, fusion = _order("buried", reader, decisive_keyword=True, decisive_keyword_coverage=0.99)
    decisive = fusion["decisive_keyword"]
    assert decisive["fires"] is False
    assert decisive["ratio"] >= 2.0
    assert decisive["coverage"] < 0.99
    assert on == off


def test_the_rule_reads_the_margin_and_the_coverage_of_the_top_hit():
    coverage = {"a": 0.7, "b": 0.2}
    hit = decisive_keyword_hit([("a", 10.0), ("b", 4.0)], coverage, ratio=2.0, min_coverage=0.6)
    assert hit == {"fires": True, "chunk_id": "a", "ratio": 2.5, "coverage": 0.7}
    short = decisive_keyword_hit([("a", 10.0), ("b", 6.0)], coverage, ratio=2.0, min_coverage=0.6)
    assert short["fires"] is False
    thin = decisive_keyword_hit([("a", 10.0), ("b", 4.0)], coverage, ratio=2.0, min_coverage=0.8)
    assert thin["fires"] is False
    # A lone hit has no runner-up to be measured against: its coverage decides.
    assert decisive_keyword_hit([("a", 3.0)], coverage, ratio=2.0, min_coverage=0.6)["fires"]
    assert decisive_keyword_hit([], coverage, ratio=2.0, min_coverage=0.6) == {"fires": False}
