"""Translate the apps' specific exceptions into clear API responses.

Every error answer has one shape, the schema's ``Error`` component: ``{"detail":
<sentence for a person>, "code": <stable, for programs>}``; unknown-name errors
also carry ``known``, and a rejected request body names each bad field beside
them (``{"name": ["Ensure this field has no more than 200 characters."]}``, as DRF
has always put them). Bad input is never a bare 500. ``api_exception_handler`` is
DRF's ``EXCEPTION_HANDLER`` (settings), so every API view uses it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.http import Http404
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

from collections_app.ingestion.types import IngestionError
from collections_app.selectors import CollectionNotFound
from collections_app.services import CollectionExists, LastAdmin, ReviewError
from query_app.exceptions import (
    ConfigurationError,
    EmbeddingProfileMismatch,
    GenerationFailed,
    QueryError,
    UnknownComponent,
)
from query_app.selectors import ConversationNotFound, QueryRunNotFound

logger = logging.getLogger(__name__)

# First match wins, so subclasses come before their bases.
ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (CollectionNotFound, status.HTTP_404_NOT_FOUND),
    (QueryRunNotFound, status.HTTP_404_NOT_FOUND),
    (ConversationNotFound, status.HTTP_404_NOT_FOUND),
    # The chat endpoint failed and the request did not allow the extractive fallback.
    (GenerationFailed, status.HTTP_502_BAD_GATEWAY),
    # The collection's recorded embedding model is not the active one: a
    # deployment state, not something the caller can fix by rephrasing.
    (EmbeddingProfileMismatch, status.HTTP_409_CONFLICT),
    # The request asked for something this deployment lacks (e.g. a
    # cross-encoder profile without a configured model); the message names the setting.
    (ConfigurationError, status.HTTP_400_BAD_REQUEST),
    (QueryError, status.HTTP_400_BAD_REQUEST),
    (IngestionError, status.HTTP_400_BAD_REQUEST),
    (CollectionExists, status.HTTP_409_CONFLICT),
    (ReviewError, status.HTTP_409_CONFLICT),
    (LastAdmin, status.HTTP_409_CONFLICT),
)


def error_code(exc: Exception) -> str:
    """``UnknownProfile`` → ``unknown_profile``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()


def error_body(exc: Exception) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": str(exc), "code": error_code(exc)}
    if isinstance(exc, UnknownComponent):
        body["known"] = exc.known
    return body


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler that also knows the apps' exceptions."""
    for cls, code in ERROR_STATUS:
        if isinstance(exc, cls):
            if code >= 500:
                logger.warning("API request failed upstream: %s", exc)
            return Response(error_body(exc), status=code)
    response = exception_handler(exc, context)
    if response is not None:
        response.data = drf_error_body(exc, response.data)
    return response


def drf_error_body(exc: Exception, data: Any) -> dict[str, Any]:
    """DRF's error data in the ``Error`` shape: ``detail`` and ``code`` always present."""
    fields = data if isinstance(data, dict) else {"non_field_errors": data}
    body = {key: value for key, value in fields.items() if key not in ("detail", "code")}
    detail = fields.get("detail")
    if isinstance(detail, list):
        detail = " ".join(str(part) for part in detail)
    if not detail:
        detail = _first_messages(body) or "the request was refused"
    return {"detail": str(detail), "code": _code(exc), **body}


def _code(exc: Exception) -> str:
    if isinstance(exc, Http404):
        return "not_found"
    if not isinstance(exc, APIException):
        return "permission_denied"  # Django's PermissionDenied, the only other one DRF answers
    codes = exc.get_codes()
    return codes if isinstance(codes, str) and not isinstance(exc, ValidationError) else "invalid"


def _first_messages(fields: dict[str, Any]) -> str:
    """``name: Ensure this field ...; role: "x" is not a valid choice.``"""
    parts = []
    for key, value in fields.items():
        while isinstance(value, dict | list) and value:
            value = next(iter(value.values())) if isinstance(value, dict) else value[0]
        parts.append(f"{key}: {value}" if key != "non_field_errors" else str(value))
    return "; ".join(parts)
