"""Token authentication: exchange a username and password for an API token; tokens expire.

Wrong passwords count towards the login lockout (django-axes) like the login page's,
and the endpoint is throttled per address. A token works for ``RAG_TOKEN_TTL_HOURS``
after it was made (0: until revoked) and ends when its user's password changes
(``ragsite.passwords``).
"""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in
from django.db import transaction
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import parsers, serializers
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ragsite.api.authentication import token_expired, token_expires_at


def api_token_for_login(*, user: object) -> Token:
    """The user's working token, made anew when there is none or it has expired."""
    with transaction.atomic():
        token = Token.objects.select_for_update().filter(user=user).first()
        if token is not None and token_expired(token):
            token.delete()
            token = None
        return token or Token.objects.create(user=user)


@extend_schema(
    tags=["auth"],
    summary="Obtain an API token",
    description=(
        "Send `username` and `password`; use the returned token as "
        "`Authorization: Token <token>` on every other request. The same token is "
        "returned until it expires (`expires`) or the password changes. After "
        "repeated wrong passwords the username is locked out for this address (429)."
    ),
    request=AuthTokenSerializer,
    responses=inline_serializer(
        "TokenResponse",
        {
            "token": serializers.CharField(),
            "expires": serializers.DateTimeField(allow_null=True),
        },
    ),
)
class TokenView(APIView):
    """The user's API token (created on first use)."""

    authentication_classes: list[type] = []
    permission_classes: list[type] = []
    # JSON, or a form as `curl -d username=... -d password=...` sends it.
    parser_classes = [parsers.JSONParser, parsers.FormParser, parsers.MultiPartParser]
    throttle_scope = "login"

    def post(self, request: Request) -> Response:
        # django-axes marks a locked-out login on the Django request it is given,
        # where its middleware finds it (DRF's Request would hide the mark).
        params = AuthTokenSerializer(data=request.data, context={"request": request._request})
        params.is_valid(raise_exception=True)
        user = params.validated_data["user"]
        # A login like the login page's: last_login is kept and the lockout count cleared.
        user_logged_in.send(sender=type(user), request=request._request, user=user)
        token = api_token_for_login(user=user)
        expires = token_expires_at(token)
        return Response({"token": token.key, "expires": expires.isoformat() if expires else None})
