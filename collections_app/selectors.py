"""Read-side queries over collections, with per-collection permissions."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from collections_app.models import Collection, CollectionMembership

ROLE_RANK = {
    CollectionMembership.Role.READ: 1,
    CollectionMembership.Role.WRITE: 2,
    CollectionMembership.Role.ADMIN: 3,
}


class CollectionNotFound(Exception):
    """No such collection, or the user may not see it (both look the same)."""


def collections_for_user(
    user: AbstractBaseUser | AnonymousUser, *, role: str = "read"
) -> QuerySet[Collection]:
    """Collections on which ``user`` has at least ``role`` (superusers: all)."""
    if not user.is_authenticated:
        return Collection.objects.none()
    if user.is_superuser:
        return Collection.objects.all()
    allowed = [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]
    return Collection.objects.filter(
        Q(memberships__user=user, memberships__role__in=allowed)
    ).distinct()


def collection_get_for_user(
    user: AbstractBaseUser | AnonymousUser, *, slug: str, role: str = "read"
) -> Collection:
    """The collection ``slug`` if ``user`` has ``role`` on it, else CollectionNotFound.

    A collection the user may not read is reported exactly like a missing one,
    so its existence does not leak.
    """
    return collection_and_role_for_user(user, slug=slug, role=role)[0]


def collection_and_role_for_user(
    user: AbstractBaseUser | AnonymousUser, *, slug: str, role: str = "read"
) -> tuple[Collection, str]:
    """The collection ``slug`` and the user's role on it, in one query; else CollectionNotFound.

    The role must be at least ``role``; superusers are admins of every collection.
    """
    if user.is_authenticated and user.is_superuser:
        found = Collection.objects.filter(slug=slug).first()
        if found is not None:
            return found, CollectionMembership.Role.ADMIN
    elif user.is_authenticated:
        allowed = [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]
        membership = (
            CollectionMembership.objects.select_related("collection")
            .filter(user=user, collection__slug=slug, role__in=allowed)
            .first()
        )
        if membership is not None:
            return membership.collection, membership.role
    raise CollectionNotFound(f"no collection {slug!r}")


def user_role(user: AbstractBaseUser | AnonymousUser, collection: Collection) -> str | None:
    """The user's role on the collection ("read" / "write" / "admin"), or None."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return CollectionMembership.Role.ADMIN
    membership = CollectionMembership.objects.filter(collection=collection, user=user).first()
    return membership.role if membership else None


def user_can(user: AbstractBaseUser | AnonymousUser, collection: Collection, role: str) -> bool:
    current = user_role(user, collection)
    return current is not None and ROLE_RANK[current] >= ROLE_RANK[role]
