"""Every API error is a JSON ``Error`` body with a reason; checkable input is a 4xx, never a 500."""

from __future__ import annotations

import pytest
from django.db import connection

from collections_app.models import Collection
from tests.support.clients import token_client

pytestmark = pytest.mark.django_db

QUERY = "/api/collections/docs/query"


def _error(response, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json", response.content[:200]
    body = response.json()
    assert body["detail"] and body["code"], body
    return body


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "words"),
    [
        ("post", "/api/collections", {"name": "n" * 201}, "name", "200 characters"),
        ("patch", "/api/collections/docs", {"name": "n" * 201}, "name", "200 characters"),
        ("post", QUERY, {"question": "q", "top_n": None}, "top_n", "may not be null"),
        ("post", QUERY, {"question": "q", "top_n": "5"}, "top_n", "JSON integer"),
        ("post", QUERY, {"question": "q", "allow_fallback": "no"}, "allow_fallback", "boolean"),
        (
            "post",
            QUERY,
            {"question": "q", "overrides": {"rerank.top_n": None}},
            "overrides",
            "null",
        ),
        (
            "post",
            QUERY,
            {"question": "q", "overrides": {"retrieval": {"candidate_k": "9"}}},
            "overrides",
            "JSON integer",
        ),
        ("post", QUERY, {"question": "q", "conversation": 2**31}, "conversation", "less than"),
        ("post", "/api/collections", {"name": "Docs", "description": 0}, "description", "string"),
    ],
)
def test_a_value_of_the_wrong_kind_or_size_is_a_400_naming_the_field(
    api, collection, method, path, body, field, words
):
    found = _error(getattr(api, method)(path, body, format="json"), 400)
    assert found["code"] == "invalid"
    assert words in str(found[field]), found
    assert field in found["detail"]


@pytest.mark.parametrize(
    "query",
    ["offset=null", "offset=-1", "limit=0", "limit=501", "limit=ten", "offset=1&offset=2"],
)
def test_a_page_out_of_range_is_a_400_naming_the_parameter(api, collection, query):
    for path in ("/api/collections", "/api/collections/docs/sources", "/api/query-runs"):
        found = _error(api.get(f"{path}?{query}"), 400)
        name = query.split("=")[0]
        assert name in found, found


def test_a_long_name_makes_a_collection_with_a_slug_that_fits(api):
    """A 200-character name used to make a 200-character slug: a database error, a 500."""
    response = api.post("/api/collections", {"name": "Handbook " * 22}, format="json")
    assert response.status_code == 201, response.content
    slug = response.json()["slug"]
    assert len(slug) <= 100 and slug.startswith("handbook-handbook")
    assert Collection.objects.filter(slug=slug).exists()


def test_a_body_that_is_not_json_is_refused_in_json(api, collection):
    found = _error(api.post(QUERY, "question=why", content_type="text/plain"), 415)
    assert found["code"] == "unsupported_media_type"
    broken = _error(api.post(QUERY, "{not json", content_type="application/json"), 400)
    assert broken["code"] == "parse_error"


def test_ids_past_what_the_database_holds_match_nothing(api, collection):
    _error(api.get(f"/api/collections/docs/sources/{2**31}"), 404)
    _error(api.get("/api/query-runs/99999999999"), 404)


def test_a_crash_under_the_api_is_a_json_500(user, collection):
    """A real database failure (the table is renamed inside this test's transaction)."""
    client = token_client(user)
    client.raise_request_exception = False
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE collections_app_source RENAME TO source_moved_away")
    found = _error(client.get("/api/collections/docs/sources"), 500)
    assert found["code"] == "server_error"
