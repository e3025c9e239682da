"""Each user's API token, managed in the browser: create, rotate, revoke.

The token is the one DRF's ``TokenAuthentication`` reads (``Authorization: Token …``).
A new token is shown once, on the page that follows its creation; afterwards the
page only says that one exists, how it ends, when it was made and until when it
works (``RAG_TOKEN_TTL_HOURS``).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from ragsite.api.authentication import token_expires_at

# Where a new token waits, in the session, for the one page that shows it.
NEW_TOKEN_SESSION_KEY = "api-token-new"


def api_token_of(user: AbstractBaseUser) -> Token | None:
    """The user's current API token, if any."""
    return Token.objects.filter(user=user).first()


def api_token_issue(*, user: AbstractBaseUser) -> str:
    """Give ``user`` a new API token and return it; an earlier one stops working at once."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        token: Token = Token.objects.create(user=user)
    return str(token.key)


def api_token_revoke(*, user: AbstractBaseUser) -> bool:
    """Delete the user's API token; False when there was none."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return bool(deleted)


@require_http_methods(["GET", "POST"])
@login_required
def api_token_page(request: HttpRequest) -> HttpResponse:
    """The signed-in user's API token: create, rotate or revoke it."""
    user = request.user
    assert isinstance(user, AbstractBaseUser)
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action in {"create", "rotate"}:
            existed = api_token_of(user) is not None
            request.session[NEW_TOKEN_SESSION_KEY] = api_token_issue(user=user)
            if existed:
                messages.success(request, "New token created; the previous one no longer works.")
            else:
                messages.success(request, "API token created.")
        elif action == "revoke":
            if api_token_revoke(user=user):
                messages.success(request, "API token revoked; requests using it are refused.")
            else:
                messages.info(request, "You had no API token.")
        else:
            messages.error(request, "Nothing changed: choose create, rotate or revoke.")
        return redirect("api_token")
    token = api_token_of(user)
    new_key = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    expires = token_expires_at(token) if token is not None else None
    context = {
        "token": token,
        "expires": expires,
        "expired": expires is not None and expires <= timezone.now(),
        # Shown only on the page right after it was made, and only if still current.
        "new_key": new_key if token is not None and new_key == token.key else None,
        "api_base": request.build_absolute_uri("/api/"),
    }
    response = render(request, "ragsite/api_token.html", context)
    # The page may carry a secret: never keep it in a cache or the back-button history.
    response["Cache-Control"] = "no-store"
    return response
