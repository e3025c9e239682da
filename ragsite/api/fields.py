"""Serializer fields whose schema says what the service behind them accepts.

The answering service and the registries check these values themselves (so the
API, the command line and the browser give the same message); these fields
declare the same rules in the OpenAPI schema, computed when the schema is built
(a registry may have grown since import): the names a registry knows, a
question's length, ``top_n``'s range, and the options of ``overrides``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.http import QueryDict
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers
from rest_framework.fields import empty

from query_app.pipeline.options import QueryLimits
from ragsite.api.options_schema import overrides_check, overrides_schema


class RegistryNameField(serializers.CharField):
    """A name from a registry (profiles, chunkers); the schema lists the known ones."""

    def __init__(self, *, names: Callable[[], Iterable[str]], **kwargs: Any) -> None:
        self.names = names
        super().__init__(**kwargs)


class QuestionField(serializers.CharField):
    """A question: some non-space text, at most RAG query_limits.max_question_chars long.

    Kept as sent, empty included: the answering service refuses an empty or
    over-long one in the words the command line and the browser use too.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_blank=False, trim_whitespace=False, **kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        if data == "":
            return data
        return super().run_validation(data)


class TopNField(serializers.IntegerField):
    """How many passages to cite: 1 to RAG query_limits.max_top_n (checked by the service)."""


class OverridesField(serializers.DictField):
    """Option overrides, held to the types, names and ranges the schema declares."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value: dict[str, Any] = super().to_internal_value(data)
        overrides_check(value)
        return value


class _Extension(OpenApiSerializerFieldExtension):
    def schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = self.schema()
        if self.target.help_text and "description" not in schema:
            schema["description"] = str(self.target.help_text)
        return schema


class RegistryNameFieldExtension(_Extension):
    target_class = RegistryNameField

    def schema(self) -> dict[str, Any]:
        names = sorted(self.target.names())
        return {"type": "string", "enum": ["", *names] if self.target.allow_blank else names}


class QuestionFieldExtension(_Extension):
    target_class = QuestionField

    def schema(self) -> dict[str, Any]:
        limit = QueryLimits.from_settings().max_question_chars
        return {"type": "string", "minLength": 1, "maxLength": limit, "pattern": r"\S"}


class TopNFieldExtension(_Extension):
    target_class = TopNField

    def schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": 1, "maximum": QueryLimits.from_settings().max_top_n}


class OverridesFieldExtension(_Extension):
    target_class = OverridesField

    def schema(self) -> dict[str, Any]:
        return overrides_schema()


class StrictJsonSerializer(serializers.Serializer):
    """A request body whose JSON values have the types the schema declares.

    DRF reads ``0`` as the text "0", ``"12"`` as 12 and ``"yes"`` as true; in a
    JSON body each of those is refused here, naming the field and the JSON type
    it needs. Form and multipart bodies carry text only and are read by DRF as
    before.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and not isinstance(data, QueryDict):
            errors = {}
            for name, field in self.fields.items():
                if field.read_only or name not in data:
                    continue
                problem = json_type_problem(field, data[name])
                if problem:
                    errors[name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def json_type_problem(field: serializers.Field, value: Any) -> str:
    """Why ``value`` is not of the JSON type ``field`` takes ("" when it is)."""
    if value is None or isinstance(field, serializers.FileField | serializers.JSONField):
        return ""
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return "must be a JSON array"
        problems = (json_type_problem(field.child, item) for item in value)
        return next((f"each item {p}" for p in problems if p), "")
    expected = _json_type(field)
    if expected and not JSON_CHECKS[expected](value):
        return f"must be a JSON {expected}"
    return ""


def _json_type(field: serializers.Field) -> str:
    if isinstance(field, serializers.BooleanField):
        return "boolean"
    if isinstance(field, serializers.IntegerField):
        return "integer"
    if isinstance(field, serializers.FloatField):
        return "number"
    if isinstance(field, serializers.DictField):
        return "object"
    if isinstance(field, serializers.ChoiceField):
        return "string" if all(isinstance(c, str) for c in field.choices) else ""
    if isinstance(field, serializers.CharField):
        return "string"
    return ""


JSON_CHECKS: dict[str, Callable[[Any], bool]] = {
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}
