"""Multi-hop evidence: entity bridges, multi-part questions, the adaptive single shot's correction.

Real retrieval over a small collection (embedded PostgreSQL, the real embedder),
offline judgements and extractive answers. A question that describes a thing
("the dock that a Q3 of revision C uses") is answered from the document that
names it ("QD-2"); each part of a two-part question keeps its own evidence; the
adaptive single shot retries a poorly covered search once and refines partial
evidence.
"""

from __future__ import annotations

from typing import Any

import pytest

from query_app.pipeline.corrective import decompose_offline, part_words
from query_app.pipeline.stages.evaluate import cover_parts
from query_app.pipeline.types import Candidate
from query_app.services import QueryRequest, query_answer
from tests.support.factories import Doc, indexed_collection
from tests.support.knowledge_base import REFUND_QUESTION

DOCS = [
    Doc(
        location="/hardware/compatibility.csv",
        title="Scanner compatibility",
        chunks=[
            "model: Scanlet S2; hardware_revision: A; min_firmware: 1.9.0; dock: SD-1\n\n"
            "model: Scanlet S3; hardware_revision: B; min_firmware: 2.5.0; dock: SD-2\n\n"
            "model: Scanlet S3; hardware_revision: C; min_firmware: 2.6.2; dock: SD-3"
        ],
    ),
    Doc(
        location="/sales/prices.csv",
        title="Price list",
        chunks=[
            "sku: SKU-100; product: Scanlet S3; description: Handheld scanner; price_eur: 349.00\n\n"
            "sku: SKU-110; product: Dock SD-2; description: Charging cradle; price_eur: 99.00\n\n"
            "sku: SKU-120; product: Dock SD-3; description: Charging and upload cradle; "
            "price_eur: 129.00"
        ],
    ),
    Doc(
        location="/releases/notes.md",
        title="Release notes",
        chunks=[
            "Orbit 2.1 was released in June. Security: the bundled OpenSSL was updated to 3.0.14.",
            "Orbit 2.1 also speeds up restores of large vaults by a third.",
            "Orbit 2.0 added incremental snapshots and a new console.",
            "Orbit 2.1.1 fixed a crash of the console when a vault was renamed.",
            "Orbit 2.1.2 updated the bundled zlib library and the OpenSSL certificates store.",
            "Orbit 1.9 is the last version that runs on 32-bit systems.",
            "Upgrading to Orbit 2.1 keeps every vault and setting of the version before it.",
        ],
    ),
    Doc(
        location="/policies/security.md",
        title="Security disclosure",
        chunks=[
            "Send reports of a vulnerability to security@example.org; we acknowledge them "
            "within two business days."
        ],
    ),
]
OFFLINE = {"generation.generator": "extractive", "groundedness.checker": "heuristic"}


@pytest.fixture
def hops_kb(db, reader):  # type: ignore[no-untyped-def]
    return indexed_collection(DOCS, slug="hops-kb", members={reader: "read"})


def ask(
    user: Any, question: str, profile: str = "corrective", collection: str = "hops-kb", **more: Any
) -> Any:
    return query_answer(
        user=user,
        request=QueryRequest(
            collection=collection, question=question, profile=profile, overrides=OFFLINE | more
        ),
    )


def steps(run: Any, node: str) -> list[dict[str, Any]]:
    return [s for s in run.trace if s["node"] == node]


def cited_sources(run: Any) -> set[str]:
    return {c["source"] for c in run.citations if c["cited"]}


DOCK_QUESTION = "How much is the dock that a Scanlet S3 of hardware revision C uses?"


def test_a_described_thing_is_searched_by_the_name_the_evidence_gives_it(hops_kb, reader):
    run = ask(reader, DOCK_QUESTION)
    first = steps(run, "evaluate")[0]["details"]
    assert first["outcome"] == "bridge"
    bridge = first["bridge"]
    # The row the description points at is revision C's, not revision B's.
    assert "hardware_revision: C" in bridge["definition"]
    assert "SD-3" in bridge["probe"] and "SD-2" not in bridge["probe"]
    rewrite = steps(run, "rewrite")[0]["details"]
    assert rewrite["source"] == "bridge"
    # The answer is read as asking about the named thing, not the description.
    assert rewrite["resolved"] == "How much is the dock (SD-3)?"
    assert "129.00" in run.answer
    assert "/sales/prices.csv" in cited_sources(run)


def test_without_the_bridge_the_description_row_is_quoted_instead(hops_kb, reader):
    # One search quotes the row the question's words match best: the compatibility
    # row, which names the dock but not its price.
    run = ask(reader, DOCK_QUESTION, profile="balanced", **{"retrieval.bridge": False})
    assert "129.00" not in run.answer


def test_a_question_that_names_its_subject_takes_no_entity_bridge(hops_kb, reader):
    run = ask(reader, "How much does the Dock SD-3 cost?")
    assert all("bridge" not in s["details"] for s in steps(run, "evaluate"))
    assert not steps(run, "rewrite")
    assert "129.00" in run.answer


def test_a_later_part_is_searched_in_its_own_words_and_keeps_its_evidence(hops_kb, reader):
    run = ask(
        reader,
        "Which OpenSSL version did Orbit 2.1 bring, and where do I report a new vulnerability?",
    )
    subs = steps(run, "decompose")[0]["details"]["sub_questions"]
    assert subs == [
        "Which OpenSSL version did Orbit 2.1 bring",
        "where do I report a new vulnerability",
    ]
    # Seven release-note passages share the first part's words; the security policy,
    # which answers the second part, is in the evidence too.
    kept = {c["source"] for c in run.citations}
    assert {"/releases/notes.md", "/policies/security.md"} <= kept
    # Both parts are answered: the version, and where to report (in the part's own words).
    assert "3.0.14" in run.answer
    assert "security@example.org" in run.answer


def passage(chunk_id: str, score: float) -> Candidate:
    return Candidate(
        chunk_id=chunk_id,
        source_id=1,
        source_location=f"/{chunk_id}.md",
        source_title=chunk_id,
        text=chunk_id,
        char_start=0,
        char_end=len(chunk_id),
        fused_score=score,
    )


def test_each_part_keeps_its_best_passage_after_the_best_one_overall():
    # Fused by RRF, passages both the question and its first part found (a, b, c, d)
    # outrank the only one the second part found (s), which the top 3 would drop.
    fused = [passage(x, 0.05 - i / 100) for i, x in enumerate("abcds")]
    leads = [passage("b", 0.03), passage("s", 0.016)]
    kept, promoted = cover_parts(fused[:3], leads, fused)
    assert [c.chunk_id for c in kept] == ["a", "b", "s"]
    assert promoted == ["s"]
    assert kept[2].fused_score == fused[4].fused_score  # the fused candidate, not the hop's
    # Nothing joins an empty set (the relevance floor emptied it), nor without parts.
    assert cover_parts([], leads, fused) == ([], [])
    assert cover_parts(fused[:3], [], fused) == (fused[:3], [])


def test_a_later_part_that_points_back_borrows_the_subject():
    assert decompose_offline("What does ERR-4471 mean and how do I fix it?") == [
        "What does ERR-4471 mean",
        "how do I fix it ERR-4471 mean",
    ]
    # What the borrowed part must find beyond the first part's subject.
    assert part_words("how do I fix it ERR-4471 mean", "What does ERR-4471 mean") == "fix"
    assert decompose_offline("How heavy is the S3, and where do I report a vulnerability?") == [
        "How heavy is the S3",
        "where do I report a vulnerability",
    ]
    # A later part may open with a preposition before its question word.
    assert decompose_offline(
        "In which city is the support hub, and at which e-mail address do I reach support?"
    ) == ["In which city is the support hub", "at which e-mail address do I reach support"]
    assert decompose_offline("What does the kit cost, and during which hours is it sold?") == [
        "What does the kit cost",
        "during which hours is it sold kit cost",
    ]
    # "and" before a preposition without a question word joins one question's words.
    assert decompose_offline("Which files are kept in Ghent and at Lisbon?") == [
        "Which files are kept in Ghent and at Lisbon?"
    ]


# --- the adaptive single shot -----------------------------------------------------

STRICT = {"corrective.upper": 0.99, "corrective.lower": 0.98, "corrective.gate_strong": 1.0}
LOOSE = {"corrective.upper": 0.99, "corrective.lower": 0.0, "corrective.gate_strong": 1.0}


def test_the_single_shot_retries_poorly_covered_evidence_once(kb, reader, no_chat_model):
    run = ask(reader, REFUND_QUESTION, profile="adaptive", collection="kb", **STRICT)
    path = [s["node"] for s in run.trace]
    assert steps(run, "route")[0]["details"]["route"] == "single"
    evaluates = steps(run, "single:evaluate")
    assert [e["details"]["outcome"] for e in evaluates] == ["retry", "incorrect"]
    # One rewritten search, fused with the question's, then the answer: never a loop.
    assert len(steps(run, "single:rewrite")) == 1
    retrieves = steps(run, "single:retrieve")
    assert len(retrieves) == 2 and len(retrieves[1]["details"]["per_probe"]) == 2
    assert "rewrite" not in path and "decompose" not in path
    assert path[-4:] == ["single:assemble", "single:generate", "single:groundedness", "end"]
    assert "30 days" in run.answer


def test_the_single_shot_refines_partial_evidence(kb, reader, no_chat_model):
    run = ask(reader, REFUND_QUESTION, profile="adaptive", collection="kb", **LOOSE)
    assert steps(run, "single:evaluate")[0]["details"]["outcome"] == "ambiguous"
    refine = steps(run, "single:refine")[0]["details"]
    assert 1 <= refine["chunks_kept"] <= refine["chunks_in"]
    assert not steps(run, "single:rewrite")
    assert "30 days" in run.answer


def test_the_single_shot_answers_strong_evidence_directly(kb, reader, no_chat_model):
    run = ask(reader, REFUND_QUESTION, profile="adaptive", collection="kb")
    outcome = steps(run, "single:evaluate")[0]["details"]["outcome"]
    assert outcome in ("correct", "ambiguous")
    assert not steps(run, "single:rewrite")
