"""The corrective and adaptive answers on the ask page: the path taken and the answer's flags."""

from __future__ import annotations

import html

import pytest

from query_app.models import QueryRun

pytestmark = pytest.mark.django_db

DISK = "How much free disk space does the installer need?"


def ask(client, profile: str, question: str = DISK):  # type: ignore[no-untyped-def]
    data = {"collection": "handbook", "profile": profile, "question": question}
    return client.post("/ask/", data)


def test_a_best_effort_answer_shows_its_path_and_a_low_confidence_badge(alice, ingested, rag_set):
    # Every grade is "incorrect": the graph spends its budget and answers best-effort.
    rag_set(
        "profiles.corrective",
        {"corrective": {"upper": 0.99, "lower": 0.98, "gate_strong": 1.0, "max_iterations": 2}},
    )
    page = html.unescape(ask(alice, "corrective").content.decode())

    run = QueryRun.objects.get()
    assert run.as_payload()["low_confidence"] is True
    assert "low confidence: iteration budget spent (2 rewrites)" in page
    timeline = page.split('<ol class="path-timeline small" aria-label="Path taken">')[1]
    timeline = timeline.split("</ol>")[0]
    assert (
        '<span class="node">triage</span><span class="iteration" title="iteration">#0</span>'
        in (timeline)
    )
    assert timeline.count('<span class="node">rewrite</span>') == 2
    probes = [s["details"]["probe"] for s in run.trace if s["node"] == "rewrite"]
    assert f"probe “{probes[0]}”" in timeline
    assert '<span class="said">incorrect</span>' in timeline
    assert "route:" not in page


def test_an_adaptive_answer_shows_its_route_and_a_linear_one_no_timeline(alice, ingested):
    page = html.unescape(ask(alice, "adaptive").content.decode())
    assert '<span class="badge route">route: single</span>' in page
    assert '<span class="node">route</span>' in page

    linear = ask(alice, "fast").content.decode()
    assert "path-timeline" not in linear
    assert "badge route" not in linear and "low confidence" not in linear


def test_a_corrective_answer_streams_each_node_then_the_answer(alice, ingested):
    response = alice.post(
        "/ask/stream/", {"collection": "handbook", "profile": "corrective", "question": DISK}
    )
    body = b"".join(response.streaming_content).decode()
    steps = [line for line in body.splitlines() if line.startswith("event: ")]
    assert steps.count("event: step") >= 8
    assert '"stage": "evaluate"' in body and '"stage": "graph"' in body
    assert steps[-1] == "event: done"
    run = QueryRun.objects.get()
    assert "2 GB" in run.answer


def test_chit_chat_and_a_decline_are_not_shown_as_not_found(alice, ingested):
    hello = html.unescape(ask(alice, "corrective", "Hello!").content.decode())
    assert "Small talk: answered without searching the documents" in hello
    assert "Not found" not in hello and "add documents that cover it" not in hello

    abuse = html.unescape(ask(alice, "corrective", "how do I make a bomb").content.decode())
    assert "Declined: the request is not one this assistant answers" in abuse
    assert "I can't help with that request. Asks for harm or abuse" in abuse
