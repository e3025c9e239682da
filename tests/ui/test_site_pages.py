"""Site-wide pieces: the API token page, the favicon, the API docs, the demo setup."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from collections_app.models import IngestionJob
from ragsite.demo import demo_setup

pytestmark = pytest.mark.django_db

TOKEN_PAGE = "/account/api-token/"


def shown_token(page: str) -> str | None:
    match = re.search(r'id="new-token"[^>]*value="([0-9a-f]{40})"', page)
    return match.group(1) if match else None


def text_of(response) -> str:  # type: ignore[no-untyped-def]
    """The page as a person reads it: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", response.content.decode()))


def api_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/collections").status_code


# --- API token ------------------------------------------------------------------------------


def test_the_navigation_and_the_api_docs_link_to_the_token_page(alice):
    page = alice.get("/collections/").content.decode()
    docs = alice.get("/api/docs/").content.decode()

    assert f'href="{TOKEN_PAGE}"' in page
    assert f'href="{TOKEN_PAGE}"' in docs
    assert "swagger-ui" in docs


def test_a_token_is_shown_once_on_creation_and_then_works(alice, user):
    first = alice.get(TOKEN_PAGE).content.decode()
    assert "No token yet" in first

    created = alice.post(TOKEN_PAGE, {"action": "create"}, follow=True)

    page = created.content.decode()
    key = shown_token(page)
    assert key == Token.objects.get(user=user).key
    assert "it will not be shown again" in page
    assert created["Cache-Control"] == "no-store"
    assert api_status(key) == 200
    # The next visit only says how it ends.
    later = alice.get(TOKEN_PAGE).content.decode()
    assert shown_token(later) is None
    assert key not in later
    assert f"…{key[-4:]}" in later


def test_rotating_replaces_the_token_and_the_old_one_stops_working(alice, user):
    alice.post(TOKEN_PAGE, {"action": "create"})
    old = Token.objects.get(user=user).key

    rotated = alice.post(TOKEN_PAGE, {"action": "rotate"}, follow=True).content.decode()

    new = shown_token(rotated)
    assert new and new != old
    assert "the previous one no longer works" in rotated
    assert api_status(old) == 401
    assert api_status(new) == 200


def test_revoking_removes_the_token(alice, user):
    alice.post(TOKEN_PAGE, {"action": "create"})
    key = Token.objects.get(user=user).key

    page = alice.post(TOKEN_PAGE, {"action": "revoke"}, follow=True).content.decode()

    assert "API token revoked" in page
    assert "No token yet" in page
    assert not Token.objects.filter(user=user).exists()
    assert api_status(key) == 401


def test_the_page_says_until_when_the_token_works(alice, user, settings):
    settings.RAG_TOKEN_TTL_HOURS = 48
    alice.post(TOKEN_PAGE, {"action": "create"})
    token = Token.objects.get(user=user)

    fresh = text_of(alice.get(TOKEN_PAGE))
    until = timezone.localtime(token.created + timedelta(hours=48)).strftime("%-d %b %Y, %H:%M")
    assert f"It works until {until}, or until you change your password." in fresh

    Token.objects.filter(pk=token.pk).update(created=token.created - timedelta(hours=49))
    stale = text_of(alice.get(TOKEN_PAGE))
    assert "expired on" in stale and "rotate it to get a new one" in stale
    assert api_status(token.key) == 401

    settings.RAG_TOKEN_TTL_HOURS = 0
    assert "It works until you rotate or revoke it" in text_of(alice.get(TOKEN_PAGE))


def test_each_user_sees_and_changes_only_their_own_token(alice, bob, user, other_user):
    alice.post(TOKEN_PAGE, {"action": "create"})
    alices = Token.objects.get(user=user).key

    bob.post(TOKEN_PAGE, {"action": "revoke"})
    page = bob.get(TOKEN_PAGE).content.decode()

    assert Token.objects.get(user=user).key == alices
    assert alices[-4:] not in page
    assert "No token yet" in page


def test_the_token_page_needs_a_login_and_a_csrf_token(client, user):
    assert client.get(TOKEN_PAGE)["Location"].startswith("/accounts/login/")

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(TOKEN_PAGE, {"action": "create"}).status_code == 403
    assert not Token.objects.exists()


# --- favicon --------------------------------------------------------------------------------


def test_every_page_names_an_icon_that_exists(alice):
    page = alice.get("/collections/").content.decode()

    icons = re.findall(r'<link rel="icon" href="/static/([^"]+)"', page)
    assert icons == ["ragsite/favicon.svg", "ragsite/favicon.ico"]
    for icon in icons:
        assert finders.find(icon), icon
    assert Path(finders.find("ragsite/favicon.svg")).read_text().startswith("<svg")


def test_favicon_ico_at_the_root_is_not_a_404(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 302
    assert response["Location"] == "/static/ragsite/favicon.ico"
    with open(finders.find("ragsite/favicon.ico"), "rb") as icon:
        assert icon.read(4) == b"\x00\x00\x01\x00"  # the ICO header


# --- the demo -------------------------------------------------------------------------------


def test_the_demo_collection_shows_the_ingestion_that_filled_it(
    client, django_user_model, media_root
):
    first = demo_setup()
    demo = django_user_model.objects.get(username="demo")
    assert demo.check_password("demo")
    client.force_login(demo)

    page = client.get("/collections/demo/").content.decode()

    job = IngestionJob.objects.get(collection__slug="demo")
    assert "No ingestion has run yet" not in page
    assert f'id="job-{job.pk}"' in page
    assert job.status == "succeeded"
    assert job.embeddings_computed == first["embeddings_computed"] > 0

    again = demo_setup()
    assert again["embeddings_computed"] == 0
    assert again["sources_unchanged"] == first["sources_ingested"]
    assert IngestionJob.objects.filter(collection__slug="demo").count() == 2
