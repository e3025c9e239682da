"""The OpenAPI schema says every answer an operation can give.

``ContractSchema`` (DRF's ``DEFAULT_SCHEMA_CLASS``) adds to each operation the
error answers its view can give, all with the one ``Error`` body of
``ragsite.api.errors``: 400 for a request that can be checked and is wrong, 401
without credentials, 403 for a role too low, 404 for a path naming nothing the
caller may see, 409 for a state that refuses the request, 415 for a body that is
not JSON (or multipart for uploads), 429 past a throttle or quota, 503 while the
database is down. A view states the ones only it gives in ``schema_errors``
(``{"POST": {409: "why"}}``). Schemathesis checks the result in
``tests/api/test_contract.py``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


class ErrorSerializer(serializers.Serializer):
    """Every API error: a sentence for a person, a code for programs, the fields at fault."""

    detail = serializers.CharField(help_text="What went wrong, in a sentence for a person.")
    code = serializers.CharField(
        help_text="Stable, for programs: invalid, not_found, not_authenticated, "
        "permission_denied, throttled, quota_exceeded, unknown_profile, ..."
    )
    known = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="For an unknown name (profile, reranker, ...): the names that exist.",
    )


def error_response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


class ContractSchema(AutoSchema):
    """drf-spectacular's AutoSchema, with each operation's error answers declared."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for status, description in self.error_statuses().items():
            responses[str(status)] = self._get_response_for_code(
                error_response(description), str(status), direction=direction
            )
        return dict(sorted(responses.items()))

    def _get_request_body(self, direction: Any = "request") -> dict[str, Any] | None:
        body: dict[str, Any] | None = super()._get_request_body(direction)
        if body is not None and isinstance(
            self.get_request_serializer(), PolymorphicProxySerializer
        ):
            # drf-spectacular cannot tell from a oneOf whether a body is needed: each shape
            # has required fields, so it is.
            body["required"] = True
        return body

    def _map_serializer_field(
        self, field: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        trims = isinstance(field, serializers.CharField) and field.trim_whitespace
        if (
            direction == "request"
            and trims
            and not field.allow_blank
            and schema.get("type") == "string"
            and not {"pattern", "enum", "format"} & set(schema)
        ):
            # DRF strips the value first: a value of spaces only is blank, and refused.
            schema["pattern"] = r"\S"
        return schema

    def error_statuses(self) -> dict[int, str]:
        """The error answers of this operation, by status."""
        view, method, path = self.view, self.method, self.path
        public = any(p is AllowAny for p in view.permission_classes) or not (
            view.permission_classes
        )
        statuses: dict[int, str] = {}
        if method in ("POST", "PUT", "PATCH") or self._has_query_parameters():
            statuses[400] = (
                "The request is malformed or a value is out of range; `detail` says which, "
                "and each field at fault is named beside it."
            )
        if not public:
            statuses[401] = "No credentials, or an unknown or expired token."
        if not public and "{slug}" in path and (method in UNSAFE or _admin_read(path)):
            statuses[403] = "Your role on the collection does not allow this."
        if "{" in path or getattr(view, "schema_not_found", False):
            statuses[404] = "No such collection (or no read access), or nothing at this id."
        if method in ("POST", "PUT", "PATCH"):
            statuses[415] = "The body is not in a media type the operation accepts."
        if getattr(view, "throttle_scope", None):
            statuses[429] = "Too many requests (or over a quota); try again later."
        statuses[503] = "The database is temporarily unavailable; retry after `Retry-After`."
        extra: dict[str, dict[int, str]] = getattr(view, "schema_errors", {})
        statuses.update(extra.get(method, {}))
        return statuses

    def _has_query_parameters(self) -> bool:
        return any(p.get("in") == "query" for p in self._get_parameters() if isinstance(p, dict))


def _admin_read(path: str) -> bool:
    """Reads that need more than the read role: members and the quarantine."""
    return "/members" in path or "/quarantine" in path
