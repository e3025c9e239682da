"""Passwords and logins: API tokens end with the password; locked-out logins answer 429.

``ApiTokenEndsWithPassword`` sits in ``AUTH_PASSWORD_VALIDATORS`` for Django's
``password_changed`` hook, which every path that sets a password calls (the
password page, the admin, ``manage.py changepassword``): a token made with the old
password stops working the moment it changes, as the user's sessions do.
``lockout_response`` is django-axes' answer once a username and address pair has
failed too often (``AXES_*`` settings).
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.authtoken.models import Token

from ragsite.error_views import is_api


def api_tokens_end(*, user: AbstractBaseUser) -> int:
    """Delete ``user``'s API tokens; how many there were."""
    deleted, _ = Token.objects.filter(user_id=user.pk).delete()
    return deleted


class ApiTokenEndsWithPassword:
    """Not a rule for passwords: ends the user's API token when the password changes."""

    def validate(self, password: str, user: AbstractBaseUser | None = None) -> None:
        return None

    def password_changed(self, password: str, user: AbstractBaseUser | None = None) -> None:
        if user is not None and user.pk is not None:
            api_tokens_end(user=user)

    def get_help_text(self) -> str:
        return "Changing your password also ends your API token."


def lockout_minutes() -> int:
    """How long a locked-out username and address pair waits, in whole minutes."""
    return max(1, math.ceil(float(settings.AXES_COOLOFF_TIME) * 60))


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any
) -> HttpResponse:
    """429 for a locked-out login: JSON under /api/, the login page with the reason elsewhere."""
    minutes = lockout_minutes()
    message = (
        f"Too many failed logins for this username from your address: try again in "
        f"{minutes} minute{'s' if minutes != 1 else ''}. Each further try restarts the wait."
    )
    response: HttpResponse
    if is_api(request):
        response = JsonResponse({"detail": message, "code": "login_locked"}, status=429)
    else:
        response = render(request, "registration/locked_out.html", {"message": message}, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response
