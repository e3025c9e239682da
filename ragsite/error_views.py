"""Error responses for requests no view answered: JSON under ``/api/``, pages elsewhere.

DRF turns the errors of its own views into JSON (``ragsite.api.errors``); these
handlers (``handler400`` ... ``handler500`` in ``ragsite/urls.py``) cover the rest:
an unknown API address, a request Django refused before any view (a bad Host
header), and a crash.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from ragsite.web import BadInput

API_PREFIX = "/api/"


def is_api(request: HttpRequest) -> bool:
    """Whether ``request`` was meant for the REST API (whose answers are always JSON)."""
    return request.path.startswith(API_PREFIX) or request.path == API_PREFIX.rstrip("/")


def _json(detail: str, code: str, status: int) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json("the request could not be read", "bad_request", 400)
    if isinstance(exception, BadInput):
        # Our own message for the person; other 400s (a forged Host header, a
        # suspicious operation) keep Django's page, which says nothing of why.
        return render(request, "400.html", {"message": str(exception)}, status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json("you do not have permission to do this", "permission_denied", 403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api(request):
        return _json(
            f"no API endpoint {request.method} {request.path}; see /api/docs/", "not_found", 404
        )
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return _json("the server failed to answer; the error was logged", "server_error", 500)
    return defaults.server_error(request)
