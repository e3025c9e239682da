"""Per-collection access for API views.

A collection the caller may not read answers 404 exactly like a missing one
(its existence never leaks); a reader asking for a write or admin action gets
403 with the role it needs.
"""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Model, QuerySet
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request

from collections_app.models import Collection, IngestionJob
from collections_app.selectors import (
    CollectionNotFound,
    collection_and_role_for_user,
    role_allows,
)

M = TypeVar("M", bound=Model)

IDEMPOTENCY_HEADER = "Idempotency-Key"
REQUEST_KEY_MAX_LENGTH = IngestionJob._meta.get_field("request_key").max_length or 64


def collection_for(request: Request, slug: str, *, role: str = "read") -> Collection:
    """The collection ``slug`` if the caller may act on it with ``role``.

    Raises CollectionNotFound (→ 404) when the caller cannot even read it, and
    PermissionDenied (→ 403) when it can read it but lacks ``role``.
    """
    return collection_and_role_for(request, slug, role=role)[0]


def collection_and_role_for(
    request: Request, slug: str, *, role: str = "read"
) -> tuple[Collection, str]:
    """``collection_for``'s collection and the caller's role on it, read together."""
    if "\x00" in slug:
        # PostgreSQL text cannot hold NUL: no collection is called that.
        raise CollectionNotFound(f"no collection {slug!r}")
    collection, current = collection_and_role_for_user(request.user, slug=slug, role="read")
    if not role_allows(current, role):
        raise PermissionDenied(
            f"this needs the {role} role on collection {slug!r}; you have the {current} role"
        )
    return collection, current


def object_or_404(queryset: QuerySet[M], *, pk: int, what: str, collection: Collection) -> M:
    """One row of ``queryset`` (already scoped to the collection) or a clear 404."""
    found = queryset.filter(pk=pk).first()
    if found is None:
        raise NotFound(f"no {what} {pk} in collection {collection.slug!r}")
    return found


def request_key(request: Request) -> str:
    """The ``Idempotency-Key`` header, checked to fit the job's request key."""
    key = (request.headers.get(IDEMPOTENCY_HEADER) or "").strip()
    if not (key.isascii() and key.isprintable()):
        raise ValidationError(
            {"detail": f"the {IDEMPOTENCY_HEADER} header may hold printable ASCII only"}
        )
    if len(key) > REQUEST_KEY_MAX_LENGTH:
        raise ValidationError(
            {
                "detail": f"the {IDEMPOTENCY_HEADER} header is {len(key)} characters long; "
                f"at most {REQUEST_KEY_MAX_LENGTH} are allowed"
            }
        )
    return key
