"""Translate the apps' specific exceptions into clear API responses.

An app exception becomes ``{"detail": <sentence for a person>, "code": <stable,
for programs>}`` (unknown-name errors also carry ``known``); DRF's own errors
(serializer validation, authentication) keep DRF's shape. Bad input is never a
bare 500. ``api_exception_handler`` is DRF's ``EXCEPTION_HANDLER`` (settings), so
every API view uses it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from rest_framework import status
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
    return exception_handler(exc, context)
