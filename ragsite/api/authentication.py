"""How API requests authenticate: DRF's token, which expires.

A module of its own, without views: DRF imports the authentication classes named in
settings while it builds its views.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def token_expires_at(token: Token) -> datetime | None:
    """When ``token`` stops working (None: it does not expire; RAG_TOKEN_TTL_HOURS)."""
    hours = float(settings.RAG_TOKEN_TTL_HOURS)
    return token.created + timedelta(hours=hours) if hours > 0 else None


def token_expired(token: Token) -> bool:
    expires = token_expires_at(token)
    return expires is not None and expires <= timezone.now()


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's ``Authorization: Token …``, refused once the token is older than its lifetime.

    A token also ends when its user's password changes (``ragsite.passwords``).
    """

    def authenticate_credentials(self, key: str) -> tuple[object, Token]:
        user, token = super().authenticate_credentials(key)
        expires = token_expires_at(token)
        if expires is not None and expires <= timezone.now():
            raise AuthenticationFailed(
                f"This API token expired on {expires:%Y-%m-%d %H:%M} UTC; get a new one "
                "with POST /api/auth/token or on the API token page."
            )
        return user, token
