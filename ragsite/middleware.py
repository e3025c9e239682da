"""While the database is unreachable, answer 503 instead of an error page.

A stopped or restarting database server makes every view fail with a
connection error. The API answers JSON (``{"detail", "code"}`` with
``Retry-After``), the pages a short plain page saying the site is temporarily
unavailable; neither is a 500. Only the loss of the database is handled here:
other errors are left to the API's exception handler and Django's own pages.
The next request reconnects by itself (``CONN_HEALTH_CHECKS``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from ragsite.error_views import is_api

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 30
MESSAGE = "The database is temporarily unavailable; try again in a moment."

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Temporarily unavailable · ragsite</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto; padding: 0 1rem">
<h1>Temporarily unavailable</h1>
<p>ragsite cannot reach its database right now, so this page cannot be shown and
anything this request sent was not saved. Please try again in a moment.</p>
</body></html>
"""


def is_database_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (not a bad query)."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    # Django wraps psycopg's errors; a connection failure has no SQLSTATE of its
    # own or one of class 08 (connection exception) or 57P (operator intervention:
    # admin shutdown, crash shutdown, cannot connect now).
    cause = exc.__cause__
    sqlstate = str(getattr(cause, "sqlstate", "") or "")
    return not sqlstate or sqlstate.startswith(("08", "57P"))


class DatabaseUnavailableMiddleware:
    """Turns a lost database into a 503: JSON under /api/, a plain page elsewhere."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_lost(exception):
            return None
        logger.warning(
            "database unavailable during %s %s: %s", request.method, request.path, exception
        )
        # A broken connection is not reused by the next request on this thread.
        for conn in connections.all(initialized_only=True):
            conn.close_if_unusable_or_obsolete()
        if is_api(request):
            response: HttpResponse = JsonResponse(
                {"detail": MESSAGE, "code": "database_unavailable"}, status=503
            )
        else:
            response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_S)
        response["Cache-Control"] = "no-store"
        return response
