"""Helpers the apps' HTML views share."""

from __future__ import annotations

from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent this request (it then expects a page's fragment, not the page)."""
    return request.headers.get("HX-Request") == "true"
