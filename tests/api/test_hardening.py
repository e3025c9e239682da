"""What an attacker found in the API (issue 13): 500s any reader could trigger, and leaks.

Every test here failed before its fix.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_chat_model")]

QUERY = "/api/collections/docs/query"
RETRIEVE = "/api/collections/docs/retrieve"
QUESTION = "What does error ERR-4471 from the installer mean?"


def test_a_large_candidate_k_is_answered_not_a_500(api, ingested):
    """candidate_k 501 derived an ef_search of 1,002, which pgvector refuses."""
    response = api.post(
        RETRIEVE,
        {"question": QUESTION, "overrides": {"retrieval.candidate_k": 501}},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["citations"]


def test_an_ef_search_over_pgvectors_limit_is_a_clear_400(api, ingested):
    response = api.post(
        QUERY, {"question": QUESTION, "overrides": {"retrieval.ef_search": 1001}}, format="json"
    )
    assert response.status_code == 400
    assert "retrieval.ef_search" in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/no-such-endpoint"),
        ("get", "/api/collections/docs/sources/999999/nothing-here"),
        ("delete", "/api/auth/token"),
        ("put", "/api/collections"),
    ],
)
def test_api_errors_are_json_never_html(api, collection, method, path):
    response = getattr(api, method)(path)
    assert response.status_code in (404, 405), response.content
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert response.json()["detail"]
