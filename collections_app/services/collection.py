"""Collections and who may use them: create, update, delete, roles, index version."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils.text import slugify

from collections_app.models import Collection, CollectionMembership
from collections_app.search_index import vector_index_drop
from collections_app.selectors import user_can


class CollectionExists(Exception):
    """A collection with that slug already exists."""


# Said of a slug that is malformed and of one that another user's collection holds
# alike, so trying slugs tells nobody which collections exist.
SLUG_UNAVAILABLE = (
    "This slug cannot be used: choose another, made of letters, digits, hyphens or underscores."
)


def member_unavailable(username: str) -> str:
    """Said alike of a username nobody has and of an account that cannot be given a role."""
    return f"{username!r} cannot be given a role here: check the username."


class LastAdmin(Exception):
    """The change would leave the collection without an admin."""


def collection_create(
    *,
    name: str,
    slug: str = "",
    description: str = "",
    user: User | None = None,
    chunking_strategy: str = "",
    chunking_options: dict[str, Any] | None = None,
    embedding_config: dict[str, Any] | None = None,
    purpose: str = Collection.Purpose.WORKSPACE,
) -> Collection:
    """Create a collection; its creator becomes its admin.

    ``purpose`` "evaluation" is for the evaluation harness's own corpora, which
    stay out of the workspace's lists, pickers and quarantine queue.
    """
    from django.conf import settings

    from collections_app.ingestion.chunking import CHUNKERS

    # A long name makes a slug no longer than the column holds (not a database error).
    slug = slug or slugify(name)[: Collection._meta.get_field("slug").max_length].strip("-_")
    if not slug:
        raise ValueError("a collection needs a name made of letters or digits")
    strategy = chunking_strategy or settings.RAG["ingestion"]["default_chunking"]
    CHUNKERS.get(strategy)  # UnknownChunker for an unknown name
    taken = Collection.objects.filter(slug=slug).first()
    if taken is not None:
        if user is not None and user_can(user, taken, "read"):
            raise CollectionExists(
                f"a collection with the slug {slug!r} already exists (you can open it)"
            )
        raise CollectionExists(SLUG_UNAVAILABLE)
    with transaction.atomic():
        collection = Collection.objects.create(
            name=name,
            slug=slug,
            description=description,
            created_by=user if user is not None and user.is_authenticated else None,
            chunking_strategy=strategy,
            chunking_options=chunking_options or {},
            embedding_config=embedding_config or {},
            purpose=purpose,
        )
        if user is not None and user.is_authenticated:
            CollectionMembership.objects.create(
                collection=collection, user=user, role=CollectionMembership.Role.ADMIN
            )
    return collection


def collection_update(
    *, collection: Collection, name: str, description: str, chunking_strategy: str
) -> Collection:
    """Rename or re-describe a collection, or change how new documents are chunked.

    The chunking strategy applies to the next ingestion; the manifest notices the
    new chunker settings and re-chunks each source then.
    """
    from collections_app.ingestion.chunking import CHUNKERS

    CHUNKERS.get(chunking_strategy)  # UnknownChunker for an unknown name
    collection.name = name
    collection.description = description
    collection.chunking_strategy = chunking_strategy
    collection.save(update_fields=["name", "description", "chunking_strategy", "updated_at"])
    return collection


def collection_web_fallback_set(*, collection: Collection, enabled: bool) -> Collection:
    """Allow or forbid the web fallback of corrective and adaptive answers on ``collection``.

    Off by default: a request that asks for it on a collection that does not allow
    it is refused. Nothing the web fallback finds is ever stored in the collection.
    """
    collection.web_fallback = enabled
    collection.save(update_fields=["web_fallback", "updated_at"])
    return collection


def collection_delete(*, collection: Collection) -> None:
    """Delete a collection with its sources, chunks and vector index."""
    collection_id = collection.pk
    for source in collection.sources.exclude(file=""):
        source.file.delete(save=False)
    collection.delete()
    vector_index_drop(collection_id=collection_id)


def collection_index_bump(*, collection_id: int) -> int:
    """Bump the collection's index version (caches key on it); return the new value."""
    Collection.objects.filter(pk=collection_id).update(index_version=F("index_version") + 1)
    return Collection.objects.values_list("index_version", flat=True).get(pk=collection_id)


def membership_set(*, collection: Collection, user: User, role: str | None) -> None:
    """Give ``user`` a role on the collection, or remove it (role None)."""
    if role is None:
        CollectionMembership.objects.filter(collection=collection, user=user).delete()
        return
    if role not in CollectionMembership.Role.values:
        raise ValueError(
            f"unknown role {role!r}; known: {', '.join(CollectionMembership.Role.values)}"
        )
    CollectionMembership.objects.update_or_create(
        collection=collection, user=user, defaults={"role": role}
    )


def membership_change(*, collection: Collection, user: User, role: str | None) -> None:
    """Set ``user``'s role on the collection (None removes it); the last admin stays admin."""
    current = CollectionMembership.objects.filter(collection=collection, user=user).first()
    is_admin = current is not None and current.role == CollectionMembership.Role.ADMIN
    if is_admin and role != CollectionMembership.Role.ADMIN:
        admins = CollectionMembership.objects.filter(
            collection=collection, role=CollectionMembership.Role.ADMIN
        ).count()
        if admins <= 1:
            raise LastAdmin(
                f"{user} is the only admin of {collection}; make someone else admin first"
            )
    membership_set(collection=collection, user=user, role=role)
