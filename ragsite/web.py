"""Helpers the apps' HTML views share."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent this request (it then expects a page's fragment, not the page)."""
    return request.headers.get("HX-Request") == "true"


class BadInput(BadRequest):
    """A 400 whose message is written for the person who sent the form (the 400 page shows it)."""


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or the X-Forwarded-For entry the trusted proxies
    vouch for (``RAG_TRUSTED_PROXIES`` of them in front). A client's own X-Forwarded-For
    is never believed: it would let one address pose as many (login lockouts, throttles).
    """
    from django.conf import settings

    trusted = int(getattr(settings, "RAG_TRUSTED_PROXIES", 0) or 0)
    remote = str(request.META.get("REMOTE_ADDR", ""))
    if trusted <= 0:
        return remote
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [a for a in forwarded if a]
    # Each trusted proxy appends the address it saw; the last proxy's is REMOTE_ADDR.
    return forwarded[-trusted] if len(forwarded) >= trusted else remote


def csp_nonce(request: HttpRequest) -> str:
    """This response's Content-Security-Policy nonce, for an inline ``<script nonce=…>``.

    Asking for it puts it in the response's policy (django-csp); "" without the middleware.
    """
    nonce = getattr(request, "csp_nonce", None)
    # str() makes it: the lazy object counts as false until it is made.
    return str(nonce) if nonce is not None else ""
