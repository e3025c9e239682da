"""How API requests authenticate: DRF's token, which expires.

A module of its own, without views: DRF imports the authentication classes named in
settings while it builds its views.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from ragsite.rows import ModelColumns, model_columns


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
        # DRF's own read (``select_related("user").get(key=key)``), as one plain
        # statement: every API request makes it, and Django's query building cost
        # more than the read (about a third of a CPU-ms a request under load).
        columns = model_columns(get_user_model(), "u")
        with connection.cursor() as cur:
            cur.execute(_token_user_sql(columns), [key])
            row = cur.fetchone()
        if row is None:
            raise AuthenticationFailed(_("Invalid token."))
        user = columns.instance(row)
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        token = Token(key=key, user=user, created=row[columns.count])
        token._state.adding = False  # the stored row, not a new one
        token._state.db = user._state.db
        expires = token_expires_at(token)
        if expires is not None and expires <= timezone.now():
            raise AuthenticationFailed(
                f"This API token expired on {expires:%Y-%m-%d %H:%M} UTC; get a new one "
                "with POST /api/auth/token or on the API token page."
            )
        return user, token


def _token_user_sql(columns: ModelColumns) -> str:
    """The user holding a token key, with the token's creation time."""
    users = columns.model
    return (
        f"SELECT {columns.select}, t.created FROM {users._meta.db_table} u "
        f"JOIN {Token._meta.db_table} t ON t.user_id = u.{users._meta.pk.column} "
        "WHERE t.key = %s"
    )
