"""What an attacker found in the pages (issue 13): 500s from odd input, missing protections.

Every test here failed before its fix.
"""

from __future__ import annotations

import html

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "field",
    ["question", "collection"],
)
def test_a_nul_character_in_the_ask_form_is_a_clear_400(alice, ingested, field):
    data = {"collection": "handbook", "profile": "fast", "question": "How much disk space?"}
    data[field] = data[field][:4] + "\x00" + data[field][4:]
    for url in ("/ask/", "/ask/stream/"):
        response = alice.post(url, data)
        assert response.status_code == 400, (url, response.status_code)
        page = response.content.decode()
        assert "The question was not asked" in page
        assert f"the {field} field: null characters are not allowed" in page


# --- logins, passwords, Content-Security-Policy (item 9) --------------------------------


def test_the_login_page_locks_a_username_out_after_five_wrong_passwords(client, user):
    for _ in range(4):
        wrong = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
        assert wrong.status_code == 200
    locked = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert locked.status_code == 429
    right = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert right.status_code == 429
    page = right.content.decode()
    assert "Too many failed logins for this username" in page
    assert int(right["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session


def test_the_admin_login_counts_towards_the_same_lockout(client, django_user_model):
    django_user_model.objects.create_superuser(username="root", password="pw-root-long")
    for _ in range(3):
        client.post("/accounts/login/", {"username": "root", "password": "nope"})
    for _ in range(2):
        client.post("/admin/login/", {"username": "root", "password": "nope"})
    locked = client.post("/admin/login/", {"username": "root", "password": "pw-root-long"})
    assert locked.status_code == 429


def test_pages_carry_a_content_security_policy_without_inline_scripts(alice, collection):
    response = alice.get("/collections/handbook/")
    policy = response["Content-Security-Policy"]
    directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
    assert "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in directives["script-src"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["object-src"] == ["'none'"]


def test_changing_the_password_checks_it_and_ends_the_api_token(alice, user):
    from rest_framework.authtoken.models import Token

    Token.objects.create(user=user)
    form = alice.get("/accounts/password/").content.decode()
    assert "be a commonly used password" in form
    weak = alice.post(
        "/accounts/password/",
        {"old_password": "pw-alice", "new_password1": "password", "new_password2": "password"},
    )
    assert weak.status_code == 200
    assert "This password is too common" in weak.content.decode()
    assert Token.objects.filter(user=user).exists()
    new = "quiet-harbour-lantern-47"
    changed = alice.post(
        "/accounts/password/",
        {"old_password": "pw-alice", "new_password1": new, "new_password2": new},
    )
    assert changed.status_code == 302 and changed["Location"] == "/accounts/password/done/"
    assert not Token.objects.filter(user=user).exists()
    done = alice.get("/accounts/password/done/").content.decode()
    assert "API token have ended" in done


# --- small leaks (item 10) ---------------------------------------------------------------


def test_the_members_page_answers_alike_for_unknown_and_inactive_usernames(
    alice, collection, django_user_model
):
    django_user_model.objects.create_user(username="gone", password="pw-gone", is_active=False)
    url = "/collections/handbook/members/"
    unknown = html.unescape(
        alice.post(url, {"username": "nobody", "role": "read"}).content.decode()
    )
    inactive = html.unescape(alice.post(url, {"username": "gone", "role": "read"}).content.decode())
    assert "'nobody' cannot be given a role here: check the username." in unknown
    assert "'gone' cannot be given a role here: check the username." in inactive
    assert not collection.memberships.filter(user__username__in=["nobody", "gone"]).exists()


def test_a_slug_another_user_holds_is_refused_like_a_malformed_one(bob, collection):
    data = {"name": "Mine", "chunking_strategy": "recursive"}
    taken = bob.post("/collections/new/", {**data, "slug": "handbook"}).content.decode()
    malformed = bob.post("/collections/new/", {**data, "slug": "no good!"}).content.decode()
    message = "This slug cannot be used: choose another"
    assert message in taken and message in malformed
    assert "already exists" not in taken
