"""Follow-up questions over the REST API: the conversation id, its owner, its collection."""

from __future__ import annotations

import pytest

from collections_app.services import collection_create
from query_app.models import QueryRun

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_chat_model")]

QUERY = "/api/collections/docs/query"
QUESTION = "What does error ERR-4471 from the installer mean?"
FOLLOW_UP = "And how do I fix it?"


def test_an_answer_names_its_conversation_and_a_follow_up_continues_it(api, ingested):
    first = api.post(QUERY, {"question": QUESTION}, format="json").json()
    assert first["conversation"] and first["standalone_question"] == ""

    response = api.post(
        QUERY, {"question": FOLLOW_UP, "conversation": first["conversation"]}, format="json"
    )

    assert response.status_code == 200, response.content
    follow = response.json()
    assert follow["conversation"] == first["conversation"]
    assert follow["question"] == FOLLOW_UP
    condense = follow["trace"][0]
    assert condense["stage"] == "condense"
    assert "ERR-4471" in condense["details"]["carried"]
    assert follow["standalone_question"] == condense["details"]["standalone"]
    assert follow["citations"][0]["source"] == "upload:install.md"
    stored = api.get(f"/api/query-runs/{follow['id']}").json()
    assert stored["conversation"] == first["conversation"]


def test_someone_elses_conversation_is_not_found(api, reader, ingested):
    first = api.post(QUERY, {"question": QUESTION}, format="json").json()

    response = reader.post(
        QUERY, {"question": FOLLOW_UP, "conversation": first["conversation"]}, format="json"
    )

    assert response.status_code == 404
    assert response.json()["code"] == "conversation_not_found"
    assert QueryRun.objects.count() == 1


def test_a_conversation_of_another_collection_is_a_clear_400(api, user, ingested):
    first = api.post(QUERY, {"question": QUESTION}, format="json").json()
    collection_create(name="Notes", slug="notes", user=user)

    response = api.post(
        "/api/collections/notes/query",
        {"question": FOLLOW_UP, "conversation": first["conversation"]},
        format="json",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "conversation_mismatch"
    assert "about the collection 'docs'" in body["detail"]


@pytest.mark.parametrize("value", ["abc", 0, -3])
def test_a_malformed_conversation_id_is_a_400(api, ingested, value):
    response = api.post(QUERY, {"question": FOLLOW_UP, "conversation": value}, format="json")

    assert response.status_code == 400
    assert "conversation" in response.json()
    assert QueryRun.objects.count() == 0


def test_the_schema_documents_the_conversation_field(api):
    schema = api.get("/api/schema/?format=json").json()

    request = schema["components"]["schemas"]["QueryRequest"]["properties"]
    assert "conversation" in request and "standalone" in request["conversation"]["description"]
    run = schema["components"]["schemas"]["QueryRun"]["properties"]
    assert {"conversation", "standalone_question"} <= set(run)
