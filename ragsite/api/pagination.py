"""``?limit=&offset=`` pages that refuse what they cannot read.

DRF's ``LimitOffsetPagination`` quietly reads ``?offset=null`` or ``?limit=-5`` as
its defaults; here each is a 400 that says which parameter is wrong and what is
allowed, and the schema declares the same bounds.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 500
# PostgreSQL reads OFFSET as a bigint; past this a page is empty anyway.
MAX_OFFSET = 2**31 - 1


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """Limit/offset pages (50 a page unless ``?limit=``); malformed values are a 400."""

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int | None:
        value = _integer(request, self.limit_query_param, low=1, high=MAX_LIMIT)
        return self.default_limit if value is None else value

    def get_offset(self, request: Request) -> int:
        value = _integer(request, self.offset_query_param, low=0, high=MAX_OFFSET)
        return 0 if value is None else value

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": MAX_LIMIT},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters


def _integer(request: Request, name: str, *, low: int, high: int) -> int | None:
    """The query parameter ``name`` as an int in ``low..high``; None when it is absent."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise ValidationError({name: [f"give {name} once"]})
    raw = values[0].strip()
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise ValidationError({name: [f"{name} must be a whole number from {low} to {high}"]})
    return int(raw)
