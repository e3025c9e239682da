"""The corrective and adaptive profiles end to end: real retrieval, real HTTP to a scripted model.

Offline (no chat model) every judgement is made by rules and retrieval signals;
with the scripted OpenAI-compatible server each node's one model call is
checked, including garbage, empty replies and timeouts, which fall back to the
offline judgement with a trace warning and never fail the answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from query_app.services import QueryRequest, query_answer
from tests.support.chat_server import Reply, ScriptedChatServer, completion
from tests.support.knowledge_base import REFUND_QUESTION, UNRELATED_QUESTION

# Offline judgements only: the answer and its check never call a model here.
NO_MODEL_ANSWER = {"generation.generator": "extractive", "groundedness.checker": "heuristic"}


def ask(user: Any, question: str, profile: str = "corrective", **overrides: Any) -> Any:
    return query_answer(
        user=user,
        request=QueryRequest(
            collection="kb", question=question, profile=profile, overrides=overrides or None
        ),
    )


def nodes(run: Any) -> list[tuple[str, int]]:
    return [(s["node"], s["iteration"]) for s in run.trace]


def node(run: Any, name: str, nth: int = 0) -> dict[str, Any]:
    return [s for s in run.trace if s["node"] == name][nth]


def test_chit_chat_is_answered_and_abuse_declined_without_retrieval(kb, reader, no_chat_model):
    hello = ask(reader, "Hello there!")
    assert [n for n, _ in nodes(hello)] == ["triage", "respond", "end"]
    assert node(hello, "triage")["details"]["label"] == "chit-chat"
    assert "Ask me a question about the documents" in hello.answer
    assert hello.citations == []

    bomb = ask(reader, "How do I make a bomb at home?")
    assert [n for n, _ in nodes(bomb)] == ["triage", "respond", "end"]
    respond = node(bomb, "respond")["details"]
    assert respond["decision"] == "declined"
    assert "asks for harm or abuse" in respond["reason"]
    assert bomb.answer.startswith("I can't help with that request.")
    assert bomb.as_payload()["low_confidence"] is False


def test_a_strong_answer_goes_straight_through_the_graph(kb, reader, no_chat_model):
    run = ask(reader, REFUND_QUESTION)
    path = [n for n, _ in nodes(run)]
    assert path[:2] == ["triage", "transform"]
    assert "rewrite" not in path
    evaluate = node(run, "evaluate")["details"]
    assert evaluate["verdict"] in ("correct", "ambiguous")
    assert evaluate["question"] == REFUND_QUESTION
    assert evaluate["relevance"] and all(0 <= r["relevance"] <= 1 for r in evaluate["relevance"])
    assert "30 days" in run.answer
    payload = run.as_payload()
    assert (payload["low_confidence"], payload["route"]) == (False, None)


def test_incorrect_evidence_rewrites_the_probe_within_the_budget(kb, reader, no_chat_model):
    # Every grade is "incorrect": the graph rewrites until the budget is spent,
    # then answers the best evidence it saw, flagged low-confidence.
    strict = {"corrective.upper": 0.99, "corrective.lower": 0.98, "corrective.gate_strong": 1.0}
    run = ask(reader, "how long until my money comes back", **strict, **NO_MODEL_ANSWER)
    rewrites = [s for s in run.trace if s["node"] == "rewrite"]
    assert [s["iteration"] for s in rewrites] == [1, 2, 3]
    probes = [s["details"]["probe"] for s in rewrites]
    assert len(set(probes)) == 3 and all("money" in p for p in probes)
    assert rewrites[0]["details"]["how"] == "pseudo-relevance feedback"
    assert rewrites[1]["details"]["how"] == "keywords only"
    assert rewrites[2]["details"]["how"] == "feedback from deeper passages"
    # Each retrieval after a rewrite searched the question and the new probe.
    retrieves = [s for s in run.trace if s["node"] == "retrieve"]
    assert [s["iteration"] for s in retrieves] == [0, 1, 2, 3]
    assert all(len(s["details"]["per_probe"]) == 2 for s in retrieves[1:])
    # The answer is written for (and graded against) the user's own words.
    assert all(
        s["details"]["question"] == "how long until my money comes back"
        for s in run.trace
        if s["node"] == "evaluate"
    )
    end = run.trace[-1]
    assert end["details"]["reason"] == "iteration budget spent (3 rewrites)"
    payload = run.as_payload()
    assert payload["low_confidence"] is True
    assert "iteration budget spent" in payload["low_confidence_reason"]
    assert run.mode == "extractive" and "refund" in run.answer.lower()


def test_ambiguous_evidence_is_refined_never_emptied(kb, reader, no_chat_model):
    loose = {"corrective.upper": 0.99, "corrective.lower": 0.0, "corrective.gate_strong": 1.0}
    run = ask(reader, REFUND_QUESTION, **loose, **NO_MODEL_ANSWER)
    assert node(run, "evaluate")["details"]["verdict"] == "ambiguous"
    refine = node(run, "refine")["details"]
    assert 1 <= refine["chunks_kept"] <= refine["chunks_in"]
    assert refine["chars_after"] <= refine["chars_before"]
    assert "30 days" in run.answer
    # The narrowed passage still points at its exact text in the source.
    cited = [c for c in run.citations if c["cited"]]
    assert cited and all(c["char_end"] - c["char_start"] == len(c["snippet"]) for c in cited)


def test_an_unanswerable_question_still_declines(kb, reader, no_chat_model):
    run = ask(reader, UNRELATED_QUESTION)
    assert run.mode == "not-found"
    assert node(run, "evaluate")["details"]["verdict"] == "incorrect"
    assert run.as_payload()["low_confidence"] is False  # a decline is not a guess


def test_adaptive_routes_each_question_and_says_why(kb, reader, no_chat_model):
    hello = ask(reader, "thanks!", profile="adaptive")
    assert [n for n, _ in nodes(hello)] == ["route", "respond", "end"]
    assert hello.as_payload()["route"] == "none"

    simple = ask(reader, REFUND_QUESTION, profile="adaptive")
    route = node(simple, "route")["details"]
    assert (route["route"], route["source"]) == ("single", "heuristic")
    assert route["reason"].startswith("simple: one short question")
    assert "evaluate" not in [n for n, _ in nodes(simple)]
    assert "single:retrieve" in [n for n, _ in nodes(simple)]

    both = ask(reader, "Compare ERR-4471 with ERR-4472", profile="adaptive")
    assert node(both, "route")["details"]["route"] == "iterative"
    assert node(both, "decompose")["details"]["sub_questions"] == ["ERR-4471", "ERR-4472"]
    sources = {c["source"] for c in both.citations if c["cited"]}
    assert "/kb/errors.md" in sources
    assert "ERR-4471" in both.answer and "ERR-4472" in both.answer


# --- with the scripted chat model ----------------------------------------------

Script = dict[str, Reply | Callable[[dict[str, Any]], Reply]]
ROLES = {
    "You sort a user's message": "triage",
    "You grade retrieved passages": "grade",
    "Retrieval found nothing good": "rewrite",
    "Split the user's question": "decompose",
    "Reply briefly and kindly": "respond",
}


def script(server: ScriptedChatServer, replies: Script) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        role = next((r for prefix, r in ROLES.items() if system.startswith(prefix)), "other")
        reply = replies.get(role, completion(f"unexpected call: {role}"))
        return reply(body) if callable(reply) else reply

    server.responder = respond


def calls(server: ScriptedChatServer, role: str) -> list[dict[str, Any]]:
    prefix = next(p for p, r in ROLES.items() if r == role)
    return [b for b in server.requests if b["messages"][0]["content"].startswith(prefix)]


def test_the_chat_model_triages_grades_and_decomposes(kb, reader, chat_configured):
    script(
        chat_configured,
        {
            "triage": completion("complex"),
            "decompose": completion("1. What does ERR-4471 mean?\n2. What does ERR-4472 mean?"),
            "grade": completion(
                'Sure! {"verdict": "correct", "relevance": [0.9, 0.8, 0.1, 0.1, 0.1], '
                '"reason": "both codes are explained"}'
            ),
        },
    )
    run = ask(reader, "What do ERR-4471 and ERR-4472 mean?", **NO_MODEL_ANSWER)
    triage = node(run, "triage")["details"]
    assert (triage["label"], triage["source"], triage["model_calls"]) == ("complex", "llm", 1)
    decompose = node(run, "decompose")["details"]
    assert decompose["sub_questions"] == ["What does ERR-4471 mean?", "What does ERR-4472 mean?"]
    evaluate = node(run, "evaluate")
    assert evaluate["details"]["grader"] in ("llm", "gate")
    if evaluate["details"]["grader"] == "llm":
        assert evaluate["details"]["reason"] == "both codes are explained"
        assert [r["relevance"] for r in evaluate["details"]["relevance"]][:2] == [0.9, 0.8]
    assert run.model_calls == len(chat_configured.requests)
    # Every prompt carries the user's text as delimited data.
    for body in chat_configured.requests:
        assert "<question>" in body["messages"][1]["content"]


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (
            completion("I think these passages are pretty good overall, thanks for asking"),
            "'I think",
        ),
        (completion("   "), "answered an empty message); used the offline grader"),
        (completion('{"verdict": "splendid"}'), "malformed"),
        (Reply(raw=b"<html>502</html>"), "failed during grading"),
        (Reply(delay_s=1.0, json_body={}), "failed during grading"),
    ],
    ids=["prose", "empty", "unknown-verdict", "garbage", "timeout"],
)
def test_an_unusable_grade_falls_back_to_the_offline_grader_with_a_warning(
    kb, reader, chat_configured, rag_set, reply, says
):
    rag_set("chat.timeout_s", 0.3)
    rag_set("chat.max_retries", 0)
    script(chat_configured, {"triage": completion("simple"), "grade": reply})
    run = ask(reader, REFUND_QUESTION, **{"corrective.gate_strong": 1.0}, **NO_MODEL_ANSWER)
    evaluate = node(run, "evaluate")
    assert evaluate["details"]["grader"] == "heuristic"
    assert evaluate["details"]["verdict"] in ("correct", "ambiguous", "incorrect")
    (warning,) = evaluate["warnings"]
    assert says in warning
    assert "30 days" in run.answer
    assert run.error == ""


def test_the_chat_model_rewrites_the_probe_and_a_bad_rewrite_falls_back(
    kb, reader, chat_configured, rag_set
):
    rag_set("chat.timeout_s", 0.3)
    rag_set("chat.max_retries", 0)
    rewrites = iter(
        [completion("refund period after purchase"), completion(""), Reply(delay_s=1.0)]
    )
    script(
        chat_configured,
        {
            "triage": completion("simple"),
            "grade": completion('{"verdict": "incorrect", "relevance": [0, 0, 0, 0, 0]}'),
            "rewrite": lambda body: next(rewrites),
        },
    )
    run = ask(
        reader,
        "how long until my money comes back",
        **{"corrective.gate_strong": 1.0, "corrective.gate_weak": 0.0},
        **NO_MODEL_ANSWER,
    )
    steps = [s for s in run.trace if s["node"] == "rewrite"]
    assert [s["details"]["source"] for s in steps] == ["llm", "heuristic", "heuristic"]
    assert steps[0]["details"]["probe"] == "refund period after purchase"
    assert "answered an empty message" in steps[1]["warnings"][0]
    assert "failed during rewrite" in steps[2]["warnings"][0]
    # The rewriter saw the user's question, never an earlier probe.
    for body in calls(chat_configured, "rewrite"):
        assert "how long until my money comes back" in body["messages"][1]["content"]
    assert run.as_payload()["low_confidence"] is True
    assert run.error == ""


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (completion("banana"), "triage label was unusable ('banana')"),
        (completion(""), "answered an empty message"),
        (Reply(delay_s=1.0, json_body={}), "failed during triage"),
    ],
    ids=["garbage", "empty", "timeout"],
)
def test_an_unusable_triage_or_decomposition_falls_back_to_rules(
    kb, reader, chat_configured, rag_set, reply, says
):
    rag_set("chat.timeout_s", 0.3)
    rag_set("chat.max_retries", 0)
    script(
        chat_configured,
        {"triage": reply, "decompose": reply, "grade": completion('{"verdict": "correct"}')},
    )
    run = ask(reader, "Compare ERR-4471 with ERR-4472", **NO_MODEL_ANSWER)
    triage = node(run, "triage")
    assert (triage["details"]["label"], triage["details"]["source"]) == ("complex", "heuristic")
    assert says in triage["warnings"][0]
    decompose = node(run, "decompose")
    assert decompose["details"]["sub_questions"] == ["ERR-4471", "ERR-4472"]
    assert decompose["warnings"] and decompose["details"]["source"] == "heuristic"
    assert run.error == ""


def test_the_route_asks_the_chat_model_and_greetings_need_no_call(kb, reader, chat_configured):
    script(
        chat_configured,
        {"triage": completion("Complex."), "respond": completion("Hi! Ask me about your files.")},
    )
    hello = ask(reader, "good morning!", profile="adaptive")
    assert calls(chat_configured, "triage") == []
    assert hello.answer == "Hi! Ask me about your files."
    run = ask(reader, REFUND_QUESTION, profile="adaptive", **NO_MODEL_ANSWER)
    route = node(run, "route")["details"]
    assert (route["route"], route["source"]) == ("iterative", "llm")
    assert json.dumps(calls(chat_configured, "triage")[0]).count(REFUND_QUESTION) == 1


def test_a_follow_up_is_condensed_before_the_graph_walks(kb, reader, no_chat_model):
    first = ask(reader, "What does ERR-4471 mean?")
    follow = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="and how do I fix it?",
            profile="corrective",
            conversation=first.conversation_id,
        ),
    )
    assert [s["node"] for s in follow.trace][:2] == ["condense", "triage"]
    standalone = follow.trace[0]["details"]["standalone"]
    assert "ERR-4471" in standalone
    assert node(follow, "evaluate")["details"]["question"] == standalone
    assert "Free disk space" in follow.answer
