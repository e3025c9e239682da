"""What an attacker found in the API (issue 13): 500s any reader could trigger, and leaks.

Every test here failed before its fix.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

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


# --- logins, throttles, tokens (item 9) -------------------------------------------------

TOKEN = "/api/auth/token"


def _login(client, username: str, password: str):  # type: ignore[no-untyped-def]
    return client.post(TOKEN, {"username": username, "password": password}, format="json")


def test_wrong_passwords_lock_that_username_out_of_the_token_endpoint(db, user, other_user):
    """The fifth wrong password locks; then even the right one is refused, for that username."""
    client = APIClient()
    for _ in range(4):
        assert _login(client, "alice", "wrong").status_code == 400
    assert _login(client, "alice", "wrong").status_code == 429
    locked = _login(client, "alice", "pw-alice")
    assert locked.status_code == 429
    assert locked["Content-Type"].startswith("application/json")
    assert "Too many failed logins" in locked.json()["detail"]
    assert int(locked["Retry-After"]) > 0
    assert "token" not in locked.json()
    # Another username from the same address is not affected.
    assert _login(client, "bob", "pw-bob").status_code == 200


def test_a_right_password_clears_the_count(db, user):
    client = APIClient()
    for _ in range(4):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", "pw-alice").status_code == 200
    for _ in range(4):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", "pw-alice").status_code == 200


@pytest.fixture
def rates(monkeypatch):  # type: ignore[no-untyped-def]
    """Set throttle rates for a test (DRF reads them once, into the throttle class)."""
    from rest_framework.throttling import ScopedRateThrottle

    def set_rates(**scopes: str) -> None:
        monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", dict(scopes))

    return set_rates


def test_the_query_api_is_throttled_per_user(api, ingested, reader, rates):
    rates(query="2/min")
    body = {"question": QUESTION}
    assert api.post(RETRIEVE, body, format="json").status_code == 200
    assert api.post(RETRIEVE, body, format="json").status_code == 200
    refused = api.post(QUERY, body, format="json")
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("application/json")
    assert "throttled" in refused.json()["detail"].lower()
    assert int(refused["Retry-After"]) > 0
    # Another user has a budget of their own.
    assert reader.post(RETRIEVE, body, format="json").status_code == 200


def test_uploads_are_throttled_per_user(api, collection, media_root, rates):
    from tests.support.documents import INSTALL, upload

    rates(upload="1/min")
    url = "/api/collections/docs/sources/upload"
    first = api.post(url, {"files": [upload("a.md", INSTALL)]}, format="multipart")
    assert first.status_code == 202, first.content
    second = api.post(url, {"files": [upload("b.md", INSTALL)]}, format="multipart")
    assert second.status_code == 429


def test_the_token_endpoint_is_throttled_per_address(db, user, rates):
    rates(login="3/min")
    client = APIClient()
    for _ in range(3):
        assert _login(client, "alice", "pw-alice").status_code == 200
    assert _login(client, "alice", "pw-alice").status_code == 429


def test_a_forged_forwarded_for_header_does_not_dodge_the_lockout(db, user):
    client = APIClient()
    for n in range(5):
        client.post(
            TOKEN,
            {"username": "alice", "password": "wrong"},
            format="json",
            HTTP_X_FORWARDED_FOR=f"203.0.113.{n}",
        )
    assert _login(client, "alice", "pw-alice").status_code == 429


def test_an_api_token_expires(api, user, collection, settings):
    from rest_framework.authtoken.models import Token

    assert api.get("/api/collections").status_code == 200
    settings.RAG_TOKEN_TTL_HOURS = 24
    Token.objects.filter(user=user).update(created=timezone.now() - timedelta(hours=25))
    expired = api.get("/api/collections")
    assert expired.status_code == 401
    assert "expired" in expired.json()["detail"]
    # Logging in again gives a new token that works.
    fresh = _login(APIClient(), "alice", "pw-alice").json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {fresh['token']}")
    assert client.get("/api/collections").status_code == 200
    assert fresh["expires"]


def test_an_api_token_ends_when_the_password_changes(api, user, collection):
    assert api.get("/api/collections").status_code == 200
    user.set_password("a-new-long-passphrase")
    user.save()
    refused = api.get("/api/collections")
    assert refused.status_code == 401
    assert refused["Content-Type"].startswith("application/json")


def test_the_api_schema_and_docs_are_for_signed_in_users(client, user):
    schema = client.get("/api/schema/")
    assert schema.status_code in (401, 403)
    assert b"paths" not in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith("/accounts/login/")
    client.force_login(user)
    assert client.get("/api/schema/").status_code == 200
    page = client.get("/api/docs/")
    assert page.status_code == 200
    # Swagger UI's script is a file of its own: the CSP allows no inline script.
    assert "<script>" not in page.content.decode()


# --- small leaks (item 10) ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/etc", "/no/such/model/dir"])
def test_only_administrators_may_name_a_reranker_model_path(api, ingested, path):
    """The override loaded any local path and told whether it exists; now it is refused alike."""
    response = api.post(
        RETRIEVE,
        {"question": QUESTION, "overrides": {"rerank.kind": "cross-encoder", "rerank.model": path}},
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "option_not_allowed"
    assert "administrators only" in body["detail"]
    assert path not in body["detail"]


def test_an_administrator_may_still_name_a_reranker_model(ingested, django_user_model):
    from tests.support.clients import token_client

    root = django_user_model.objects.create_superuser(username="root", password="pw-root-long")
    response = token_client(root).post(
        RETRIEVE,
        {"question": QUESTION, "overrides": {"rerank": {"model": "/no/such/model/dir"}}},
        format="json",
    )
    assert response.json().get("code") != "option_not_allowed", response.content


def test_a_taken_slug_is_answered_like_a_malformed_one(api, stranger, collection):
    taken = stranger.post("/api/collections", {"name": "Mine", "slug": "docs"}, format="json")
    malformed = stranger.post(
        "/api/collections", {"name": "Mine", "slug": "no good!"}, format="json"
    )
    assert taken.status_code == malformed.status_code == 400
    assert taken.json() == malformed.json()
    assert "docs" not in str(taken.json())
    # Its own collection's slug is no secret to alice.
    again = api.post("/api/collections", {"name": "Docs again", "slug": "docs"}, format="json")
    assert "already exists" in again.json()["slug"][0]


def test_adding_a_member_does_not_tell_which_usernames_exist(api, collection, django_user_model):
    django_user_model.objects.create_user(username="gone", password="pw-gone", is_active=False)
    url = "/api/collections/docs/members"
    unknown = api.post(url, {"username": "nobody", "role": "read"}, format="json")
    inactive = api.post(url, {"username": "gone", "role": "read"}, format="json")
    assert unknown.status_code == inactive.status_code == 400
    assert unknown.json()["username"][0].replace("nobody", "X") == inactive.json()["username"][
        0
    ].replace("gone", "X")
    removed_unknown = api.delete(f"{url}/nobody")
    django_user_model.objects.create_user(username="carl", password="pw-carl")
    removed_stranger = api.delete(f"{url}/carl")
    assert removed_unknown.status_code == removed_stranger.status_code == 404
    assert removed_unknown.json()["detail"].replace("nobody", "X") == removed_stranger.json()[
        "detail"
    ].replace("carl", "X")


def test_citations_never_show_the_servers_absolute_path(api, collection, tmp_path, rag_set):
    from collections_app.services import collection_ingest
    from query_app.models import QueryRun
    from tests.support.documents import INSTALL

    folder = tmp_path / "srv" / "handbook"
    folder.mkdir(parents=True)
    (folder / "install.md").write_text(INSTALL, encoding="utf-8")
    collection_ingest(collection=collection, locations=[str(folder / "install.md")])

    outside = api.post(RETRIEVE, {"question": QUESTION}, format="json").json()
    assert {c["source"] for c in outside["citations"]} == {"install.md"}
    rag_set("ingestion.roots", [str(tmp_path / "srv")])
    inside = api.post(RETRIEVE, {"question": QUESTION}, format="json").json()
    assert {c["source"] for c in inside["citations"]} == {"handbook/install.md"}
    stored = api.get(f"/api/query-runs/{inside['id']}").json()
    assert str(tmp_path) not in str(stored)
    # The stored run keeps the location itself (evaluation matches references on it).
    assert QueryRun.objects.get(pk=inside["id"]).citations[0]["source"] == str(
        folder / "install.md"
    )


def test_an_unknown_token_or_a_deactivated_user_is_refused(api, user, collection):
    from rest_framework.authtoken.models import Token

    assert api.get("/api/collections").status_code == 200
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    refused = forged.get("/api/collections")
    assert refused.status_code == 401
    assert refused.json()["detail"] == "Invalid token."
    user.is_active = False
    user.save(update_fields=["is_active"])
    inactive = api.get("/api/collections")
    assert inactive.status_code == 401
    assert inactive.json()["detail"] == "User inactive or deleted."
    # The token itself is untouched: only its user was turned away.
    assert Token.objects.filter(user=user).count() == 1


def test_a_request_knows_its_user_and_token_as_stored(user, collection, rf):
    from rest_framework.authtoken.models import Token
    from rest_framework.request import Request

    from ragsite.api.authentication import ExpiringTokenAuthentication

    stored = Token.objects.create(user=user)
    request = Request(rf.get("/api/collections", HTTP_AUTHORIZATION=f"Token {stored.key}"))
    found_user, token = ExpiringTokenAuthentication().authenticate(request)
    assert found_user.pk == user.pk and found_user.username == user.username
    assert token.key == stored.key and token.user_id == user.pk
    assert token.created == stored.created
    # It is the stored row: revoking it through the request's token deletes it.
    token.delete()
    assert not Token.objects.filter(key=stored.key).exists()
