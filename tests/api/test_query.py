"""Query, retrieve and stored query runs over the REST API, with every bad-input case."""

from __future__ import annotations

import pytest

from collections_app.models import Chunk
from query_app.models import QueryRun
from query_app.pipeline.rerankers import MODEL_ENV
from tests.support.processes import free_port

# Answers are extractive unless a test configures a chat endpoint.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_chat_model")]

QUERY = "/api/collections/docs/query"
RETRIEVE = "/api/collections/docs/retrieve"
QUESTION = "What does error ERR-4471 from the installer mean?"
CITATION_KEYS = {"marker", "chunk_id", "source", "snippet", "score", "char_start", "char_end"}


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: a chat endpoint that is down."""
    return free_port()


def test_query_answers_with_citations_into_the_collection(api, ingested):
    response = api.post(QUERY, {"question": QUESTION}, format="json")
    assert response.status_code == 200, response.content
    run = response.json()
    assert run["mode"] == "extractive"
    assert "[1]" in run["answer"] and "ERR-4471" in run["answer"]
    assert run["citations"], run
    for citation in run["citations"]:
        assert CITATION_KEYS | {"page"} <= set(citation)
        chunk = Chunk.objects.get(pk=citation["chunk_id"], collection=ingested)
        assert chunk.source.location == citation["source"]
        assert (citation["char_start"], citation["char_end"]) == (chunk.char_start, chunk.char_end)
    assert run["citations"][0]["source"] == "upload:install.md"
    stages = [step["stage"] for step in run["trace"]]
    assert {"retrieve", "generate"} <= set(stages)
    assert all(step["duration_ms"] >= 0 for step in run["trace"])
    assert run["timings"]["total_ms"] >= 0

    stored = api.get(f"/api/query-runs/{run['id']}").json()
    assert stored["answer"] == run["answer"] and stored["citations"] == run["citations"]
    listed = api.get("/api/query-runs").json()["results"]
    assert [r["id"] for r in listed] == [run["id"]]
    assert listed[0]["collection"] == "docs"


def test_retrieve_returns_passages_without_generating(api, ingested):
    response = api.post(
        RETRIEVE, {"question": "How long do refunds take?", "top_n": 1}, format="json"
    )
    assert response.status_code == 200, response.content
    run = response.json()
    assert run["mode"] == "retrieval-only"
    assert run["model_calls"] == 0
    (citation,) = run["citations"]
    assert citation["source"] == "upload:refunds.md"
    generate = next(step for step in run["trace"] if step["stage"] == "generate")
    assert generate["skipped"] is True


def test_runs_can_be_filtered_by_collection(api, ingested):
    api.post(RETRIEVE, {"question": "refunds"}, format="json")
    assert len(api.get("/api/query-runs?collection=docs").json()["results"]) == 1
    assert api.get("/api/query-runs?collection=nope").status_code == 404


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"question": ""}, "empty"),
        ({"question": "   \n "}, "empty"),
        ({"question": "why? " * 500}, "limit is 2000"),
        ({}, "send a question"),
        ({"question": QUESTION, "profile": "turbo"}, "fast"),
        ({"question": QUESTION, "overrides": {"rerank.kind": "magic"}}, "cross-encoder"),
        ({"question": QUESTION, "overrides": {"retrieval.flavour": "x"}}, "mode"),
        ({"question": QUESTION, "top_n": 0}, "top_n must be between 1 and 50"),
        ({"question": QUESTION, "top_n": 51}, "top_n must be between 1 and 50"),
        ({"question": QUESTION, "top_n": "ten"}, "must be a JSON integer"),
        (
            {"question": QUESTION, "profile": "balanced", "overrides": {"rerank.required": True}},
            MODEL_ENV,
        ),
    ],
    ids=[
        "empty",
        "blank",
        "too-long",
        "missing",
        "unknown-profile",
        "unknown-reranker",
        "unknown-option",
        "top-n-zero",
        "top-n-too-big",
        "top-n-not-a-number",
        "cross-encoder-not-configured",
    ],
)
def test_bad_input_is_a_clear_400(api, collection, body, expected):
    response = api.post(QUERY, body, format="json")
    assert response.status_code == 400, response.content
    assert expected in str(response.json())
    assert not QueryRun.objects.exists()


def test_unknown_names_come_with_the_known_ones(api, collection):
    body = api.post(QUERY, {"question": QUESTION, "profile": "turbo"}, format="json").json()
    assert body["code"] == "unknown_profile"
    assert {"fast", "balanced", "quality"} <= set(body["known"])


def test_unknown_collection_is_not_found(api, collection):
    response = api.post("/api/collections/nope/query", {"question": QUESTION}, format="json")
    assert response.status_code == 404


def test_chat_endpoint_down_is_502_without_fallback_and_extractive_with_it(
    api, ingested, settings, closed_port
):
    settings.RAG = {
        **settings.RAG,
        "chat": {
            "base_url": f"http://127.0.0.1:{closed_port}/v1",
            "model": "local-model",
            "api_key": "",
            "timeout_s": 2.0,
            "max_retries": 0,
        },
    }
    refused = api.post(QUERY, {"question": QUESTION, "allow_fallback": False}, format="json")
    assert refused.status_code == 502, refused.content
    assert "chat model" in refused.json()["detail"]
    assert refused.json()["code"] == "generation_failed"

    fallback = api.post(QUERY, {"question": QUESTION}, format="json")
    assert fallback.status_code == 200, fallback.content
    run = fallback.json()
    assert run["mode"] == "extractive"
    assert run["citations"]
    assert any("extractive" in w or "chat" in w for w in run["warnings"]), run["warnings"]
