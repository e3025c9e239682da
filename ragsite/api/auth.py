"""Token authentication: exchange a username and password for an API token."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken


@extend_schema(
    tags=["auth"],
    summary="Obtain an API token",
    description=(
        "Send `username` and `password`; use the returned token as "
        "`Authorization: Token <token>` on every other request."
    ),
    responses=inline_serializer("TokenResponse", {"token": serializers.CharField()}),
)
class TokenView(ObtainAuthToken):
    """The user's API token (created on first use)."""
