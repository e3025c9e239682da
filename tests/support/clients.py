"""Clients as a user drives the site: an API token client, a page form's one-time key."""

from __future__ import annotations

import re

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def token_client(user) -> APIClient:  # type: ignore[no-untyped-def]
    """An API client that authenticates as ``user`` with its token."""
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def request_key_of(html: str, action: str) -> str:
    """The one-time token of the form posting to ``action`` on a rendered page."""
    form = html[html.index(f'action="{action}"') :]
    match = re.search(r'name="request_key" value="([^"]+)"', form)
    assert match, f"no request_key in the form posting to {action}"
    return match.group(1)
