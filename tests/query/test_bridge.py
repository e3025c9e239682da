"""The bridge stage of the linear profiles: one more search when the evidence renames
the question's thing (query_app/pipeline/stages/bridge.py).

Real retrieval over a small collection (embedded PostgreSQL, the real embedder) and
extractive answers. A glossary line or a table row found by the question gives the
name the answer's document uses; fast searches that name next to the question once.
"""

from __future__ import annotations

from typing import Any

import pytest

from query_app.services import QueryRequest, query_answer, query_retrieve
from tests.support.factories import Doc, indexed_collection

DOCS = [
    Doc(
        location="/sales/glossary.md",
        title="Sales glossary",
        chunks=[
            "**Meridian pack**: the sales name of the Kestrel K5 Field Kit.\n\n"
            "**Tier Gold**: the internal name of the Premier support plan."
        ],
    ),
    Doc(
        location="/sales/prices.csv",
        title="Price list",
        chunks=[
            "sku: SKU-500; product: Kestrel K5; description: Handheld meter; price_eur: 210.00\n\n"
            "sku: SKU-510; product: Kestrel K5 Field Kit; description: One K5 with a carry "
            "case and a tripod; price_eur: 395.00\n\n"
            "sku: SKU-520; product: Tripod mount TR-9; description: Aluminium; price_eur: 64.00"
        ],
    ),
    Doc(
        location="/hardware/compatibility.csv",
        title="Meter compatibility",
        chunks=[
            "model: Kestrel K4; hardware_revision: A; mount: TR-7\n\n"
            "model: Kestrel K5; hardware_revision: B; mount: TR-9"
        ],
    ),
    Doc(
        location="/support/hours.md",
        title="Support hours",
        chunks=["Support answers on weekdays from 08:00 to 18:00 by e-mail and phone."],
    ),
]
OFFLINE = {"generation.generator": "extractive", "groundedness.checker": "heuristic"}
KIT_QUESTION = "How much does the Meridian pack cost?"
MOUNT_QUESTION = "How much is the mount that a Kestrel K5 of hardware revision B uses?"


@pytest.fixture
def sales(db, reader):  # type: ignore[no-untyped-def]
    return indexed_collection(DOCS, slug="sales", members={reader: "read"})


def ask(user: Any, question: str, profile: str = "fast", **more: Any) -> Any:
    return query_answer(
        user=user,
        request=QueryRequest(
            collection="sales", question=question, profile=profile, overrides=OFFLINE | more
        ),
    )


def bridge_step(run: Any) -> dict[str, Any]:
    [step] = [s for s in run.trace if s["stage"] == "bridge"]
    return step


def cited_sources(run: Any) -> set[str]:
    return {c["source"] for c in run.citations if c["cited"]}


def test_a_glossary_name_is_searched_by_what_it_names(sales, reader):
    run = ask(reader, KIT_QUESTION)
    step = bridge_step(run)
    details = step["details"]
    assert not step["skipped"] and details["hopped"] is True
    assert details["term"] == "Meridian pack"
    assert "field" in details["probe"] and "kit" in details["probe"]
    assert details["resolved"] == "How much does the Meridian pack (Kestrel K5 Field Kit) cost?"
    # The hop's own search, fusion and floor, each with its time.
    assert [h["stage"] for h in details["hop"]] == ["retrieve", "fuse", "rerank"]
    assert "395.00" in run.answer
    assert "/sales/prices.csv" in cited_sources(run)


def test_without_the_bridge_only_the_definition_is_found(sales, reader):
    run = ask(reader, KIT_QUESTION, **{"retrieval.bridge": False})
    step = bridge_step(run)
    assert step["skipped"] and step["details"]["reason"] == "off (option retrieval.bridge)"
    assert "395.00" not in run.answer


def test_a_described_thing_is_searched_by_the_name_its_row_gives(sales, reader):
    run = ask(reader, MOUNT_QUESTION)
    details = bridge_step(run)["details"]
    assert details["hopped"] is True
    assert "hardware_revision: B" in details["definition"]
    assert "TR-9" in details["probe"] and "TR-7" not in details["probe"]
    assert details["resolved"] == "How much is the mount (TR-9)?"
    assert "64.00" in run.answer


def test_a_question_that_names_its_subject_takes_no_hop(sales, reader):
    run = ask(reader, "How much does the tripod mount TR-9 cost?")
    step = bridge_step(run)
    assert not step["skipped"] and step["details"]["hopped"] is False
    assert "no term of the question" in step["details"]["reason"]
    assert "hop" not in step["details"]
    assert "64.00" in run.answer


def test_the_hop_repeats_no_warning_of_the_rerank_step(sales, reader):
    # balanced without a cross-encoder: the rerank step says it was skipped, once.
    run = ask(reader, KIT_QUESTION, profile="balanced")
    step = bridge_step(run)
    assert step["details"]["hopped"] is True
    assert step["warnings"] == []
    [rerank] = [h for h in step["details"]["hop"] if h["stage"] == "rerank"]
    assert rerank["warnings"], "the hop's own rerank note stays on its row"
    assert "395.00" in run.answer


def test_retrieval_only_ranks_the_question_alone(sales, reader):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(collection="sales", question=KIT_QUESTION, profile="fast"),
    )
    step = bridge_step(run)
    assert step["skipped"] and step["details"]["reason"].startswith("retrieval only")


def test_a_question_the_collection_does_not_answer_takes_no_hop(sales, reader):
    run = ask(reader, "Which volcano erupted in Iceland last spring?")
    step = bridge_step(run)
    assert step["skipped"]
    assert step["details"]["reason"] == "no passage cleared the relevance floor"
    assert run.answer.startswith("Not found")
