"""The API's documentation pages, for signed-in users unless RAG_API_DOCS_PUBLIC is on.

The schema itself answers 401/403 JSON to an anonymous caller (drf-spectacular's
``SERVE_PERMISSIONS``, set in settings); the HTML pages send a person to the login
page and back instead.
"""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseBase
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, PermissionDenied


class _LoginFirst:
    def handle_exception(self, exc: Exception) -> HttpResponseBase:
        request = self.request  # type: ignore[attr-defined]
        refused = isinstance(exc, NotAuthenticated | AuthenticationFailed | PermissionDenied)
        if refused and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return super().handle_exception(exc)  # type: ignore[misc,no-any-return]


class SwaggerDocsView(_LoginFirst, SpectacularSwaggerSplitView):
    """Swagger UI; its script is served as a file of its own (the CSP allows no inline one)."""


class RedocDocsView(_LoginFirst, SpectacularRedocView):
    """Redoc."""
