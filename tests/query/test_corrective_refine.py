"""Refine (ambiguous evidence) keeps what a matching heading is about, not the heading alone.

Real retrieval and the extractive answer over a small collection: the demo's
"How are chunk sizes counted?" matched only the heading "Chunking strategies", and
refine cut the passage down to that title, so the corrective answer was one poor line.
"""

from __future__ import annotations

import pytest

from query_app.services import QueryRequest, query_answer
from tests.support.factories import Doc, indexed_collection

DOCS = [
    Doc(
        location="/docs/ingestion.md",
        title="How ingestion works",
        chunks=[
            "## Chunking strategies\n\nThe default strategy is `recursive`: it splits by "
            "section, then paragraph, then sentence, and packs the pieces up to a budget of "
            "200 tokens of the embedding model. Other strategies are `sentence`, `structural`, "
            "`semantic` and `fixed`.",
            "## The quarantine\n\nDocuments that try to give instructions to the model are "
            "held in the quarantine until a reviewer approves them.",
        ],
    ),
    Doc(
        location="/docs/shipping.md",
        title="Shipping",
        chunks=["Orders ship within two business days from our warehouse in Rotterdam."],
    ),
]
# Every grade "ambiguous", so refine runs; the answer and its check are offline.
AMBIGUOUS = {
    "corrective.upper": 0.99,
    "corrective.lower": 0.0,
    "corrective.gate_strong": 1.0,
    "corrective.gate_weak": 0.0,
    "generation.generator": "extractive",
    "groundedness.checker": "heuristic",
}


@pytest.fixture
def docs_kb(db, reader):  # type: ignore[no-untyped-def]
    return indexed_collection(DOCS, slug="refine-kb", members={reader: "read"})


def test_a_matching_heading_keeps_its_section_for_the_answer(docs_kb, reader):
    run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="refine-kb",
            question="How are chunk sizes counted?",
            profile="corrective",
            overrides=AMBIGUOUS,
        ),
    )
    refine = next(s for s in run.trace if s["node"] == "refine")["details"]
    assert refine["chunks_kept"] >= 1
    assert "200 tokens" in run.answer
