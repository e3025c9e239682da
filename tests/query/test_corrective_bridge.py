"""Bridge hops: the question names a thing by an internal name that a glossary defines.

Real retrieval over a small collection (embedded PostgreSQL, the real embedder),
offline judgements: the first retrieval finds the glossary line, the evaluate
node turns its definition into a bridge probe, and the second retrieval brings
the document that uses the other name, so the answer cites both.
"""

from __future__ import annotations

from typing import Any

import pytest

from query_app.services import QueryRequest, query_answer
from tests.support.factories import Doc, indexed_collection

DOCS = [
    Doc(
        location="/wiki/glossary.md",
        title="Glossary",
        chunks=[
            "Words you will hear inside the company.\n\n"
            "- **Tier A, Tier B, Tier C**: internal names of the Standard, Priority and "
            "Critical support plans.\n"
            "- **The Dock**: the Quillmate Dock QD-2 charging cradle."
        ],
    ),
    Doc(
        location="/policies/support.md",
        title="Support hours",
        chunks=[
            "Standard plan customers are answered on working days from 09:00 to 17:00 CET.",
            "Priority plan customers are answered Monday to Friday from 07:00 to 21:00 CET.",
            "Critical plan customers are answered around the clock, every day of the year.",
        ],
    ),
    Doc(
        location="/quillmate/firmware.md",
        title="Firmware updates",
        chunks=[
            "Scanners placed in a QD-2 cradle install new firmware between 01:00 and 04:00 "
            "local time."
        ],
    ),
    Doc(
        location="/kb/shipping.md",
        title="Shipping",
        chunks=["Orders ship within two business days from our warehouse in Rotterdam."],
    ),
]
OFFLINE = {"generation.generator": "extractive", "groundedness.checker": "heuristic"}


@pytest.fixture
def glossary_kb(db, reader):  # type: ignore[no-untyped-def]
    return indexed_collection(DOCS, slug="glossary-kb", members={reader: "read"})


def ask(user: Any, question: str, profile: str = "corrective") -> Any:
    return query_answer(
        user=user,
        request=QueryRequest(
            collection="glossary-kb", question=question, profile=profile, overrides=OFFLINE
        ),
    )


def steps(run: Any, node: str) -> list[dict[str, Any]]:
    return [s for s in run.trace if s["node"] == node]


def test_a_glossary_definition_bridges_to_the_document_that_answers(glossary_kb, reader):
    run = ask(reader, "During which hours is Tier B support available?")
    first = steps(run, "evaluate")[0]["details"]
    assert first["outcome"] == "bridge"
    # The definition is aligned with the list: Tier B is the second plan, Priority.
    assert first["bridge"]["term"].startswith("Tier A")
    rewrite = steps(run, "rewrite")[0]["details"]
    assert rewrite["source"] == "bridge"
    # The probe: the question's keywords and the definition's words, aligned with the
    # list (Tier B is the second name, Priority the second plan).
    assert "priority" in rewrite["probe"] and "critical" not in rewrite["probe"]
    assert rewrite["because"] == "a bridge hop"
    # One hop only, and no low-confidence flag: the budget was not exhausted.
    assert len(steps(run, "rewrite")) == 1
    assert run.as_payload()["low_confidence"] is False
    assert "07:00" in run.answer
    cited = {c["source"] for c in run.as_payload()["citations"]}
    assert any("support.md" in s for s in cited)


def test_a_question_without_a_defined_term_takes_no_bridge(glossary_kb, reader):
    run = ask(reader, "How fast do orders ship from the warehouse in Rotterdam?")
    assert all("bridge" not in s["details"] for s in steps(run, "evaluate"))
    assert all(s["details"]["source"] != "bridge" for s in steps(run, "rewrite"))
    assert "two business days" in run.answer


def test_adaptive_leaves_the_single_shot_for_a_bridge_hop(glossary_kb, reader):
    run = ask(reader, "During which hours is Tier B support available?", profile="adaptive")
    path = [s["node"] for s in run.trace]
    assert steps(run, "route")[0]["details"]["route"] == "single"
    assert path.index("single:evaluate") < path.index("rewrite")
    assert steps(run, "single:evaluate")[0]["details"]["outcome"] == "bridge"
    assert steps(run, "rewrite")[0]["details"]["source"] == "bridge"
    assert "07:00" in run.answer

    plain = ask(reader, "How fast do orders ship from the warehouse in Rotterdam?", "adaptive")
    plain_path = [s["node"] for s in plain.trace]
    # No bridge: the single shot goes on, with one offline check and no model call.
    assert "rewrite" not in plain_path and "single:assemble" in plain_path
    assert plain.model_calls == 0
