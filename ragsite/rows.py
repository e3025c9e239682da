"""Model instances from plain statements, without Django's query building.

Every API request reads the token's user and the caller's collection and role.
``Model.objects.raw`` spares the query building but still works out, on every
call, which columns came back, where each field is and how to convert it; for
a one-row read that is about a third of the read's own CPU. Here that is done
once per model: the statement names the model's columns itself
(``ModelColumns.select``) and the row is turned into an instance with the
fields' own converters, as a queryset would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

from django.db import connection
from django.db.models import Model
from django.db.models.expressions import Col

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class ModelColumns(Generic[M]):
    """A model's concrete columns, in one order, and how to read them back."""

    model: type[M]
    select: str  # "alias.col_a, alias.col_b, ..." for the statement's SELECT list
    attnames: tuple[str, ...]
    columns: tuple[Col, ...]  # the expressions the converters are given, as in a queryset
    converters: tuple[tuple[Callable[..., Any], ...], ...]  # per column, in order

    @property
    def count(self) -> int:
        return len(self.attnames)

    def instance(self, values: Sequence[Any]) -> M:
        """The model instance of the first ``count`` values of a row (a stored row)."""
        converted = list(values[: self.count])
        for i, converters in enumerate(self.converters):
            for converter in converters:
                converted[i] = converter(converted[i], self.columns[i], connection)
        return self.model.from_db(connection.alias, self.attnames, converted)


@lru_cache(maxsize=32)
def model_columns(model: type[M], alias: str) -> ModelColumns[M]:
    """The columns of ``model`` as read through the table alias ``alias``."""
    fields = model._meta.concrete_fields
    columns = tuple(f.get_col(alias) for f in fields)
    return ModelColumns(
        model=model,
        select=", ".join(f"{alias}.{connection.ops.quote_name(f.column)}" for f in fields),
        attnames=tuple(f.attname for f in fields),
        columns=columns,
        converters=tuple(tuple(c.get_db_converters(connection)) for c in columns),
    )
