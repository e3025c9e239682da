"""What a rewritten probe finds is judged against the question, never against the probe.

Offline rewriting adds words (and codes) of the passages already found, so the
new probe matches those passages however far they are from the question: the
grader and the sentence floor must still measure them by the question.
"""

from __future__ import annotations

from typing import Any

from query_app.services import QueryRequest, query_answer
from tests.support.documents import INSTALL
from tests.support.factories import indexed_collection

OFF_TOPIC = "What is the boiling point of mercury at sea level?"
NO_MODEL_ANSWER = {"generation.generator": "extractive", "groundedness.checker": "heuristic"}


def _ask(user: Any, question: str) -> Any:
    return query_answer(
        user=user,
        request=QueryRequest(
            collection="install", question=question, profile="corrective", overrides=NO_MODEL_ANSWER
        ),
    )


def _steps(run: Any, name: str) -> list[dict[str, Any]]:
    return [step for step in run.trace if step["node"] == name]


def test_passages_found_by_a_feedback_probe_are_graded_by_the_question(db, reader, no_chat_model):
    indexed_collection([INSTALL], slug="install", members={reader: "read"})

    run = _ask(reader, OFF_TOPIC)

    rewrites = _steps(run, "rewrite")
    assert rewrites and rewrites[0]["details"]["how"] == "pseudo-relevance feedback"
    # The feedback probe carries the passage's own words, code included ("64-bit") ...
    assert "64-bit" in rewrites[0]["details"]["probe"]
    later = [s for s in _steps(run, "retrieve") if s["iteration"] > 0]
    assert later and all(s["details"]["judged_by_question"] for s in later)
    # ... yet the install passage is no evidence for the question at any iteration,
    assert {s["details"]["verdict"] for s in _steps(run, "evaluate")} == {"incorrect"}
    # and nothing of it is quoted.
    assert run.mode == "not-found"
    assert not [c for c in run.citations if c["cited"]]
    assert "installer" not in run.answer


def test_a_rewrite_that_finds_the_answer_still_answers(db, reader, no_chat_model):
    indexed_collection([INSTALL], slug="install", members={reader: "read"})

    run = _ask(reader, "how much free disk space does setup on linux want")

    assert run.mode != "not-found"
    assert "2 GB of free disk space" in run.answer
