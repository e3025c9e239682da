"""What every page of the corpus checks first: the collection the user may read, the role an
action needs (a lacking role is a message on the page), and whether evaluation is shown."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest

from collections_app.models import Collection
from collections_app.selectors import (
    CollectionNotFound,
    collection_get_for_user,
    user_can,
)

ROLE_WORDS = {"read": "read", "write": "change", "admin": "administer"}


def collection_or_404(request: HttpRequest, slug: str) -> Collection:
    try:
        return collection_get_for_user(request.user, slug=slug)
    except CollectionNotFound:
        raise Http404("No such collection") from None


def role_allowed(request: HttpRequest, collection: Collection, role: str) -> bool:
    """Whether the user has ``role``; if not, say so in a message."""
    if user_can(request.user, collection, role):
        return True
    messages.error(
        request, f"You may not {ROLE_WORDS[role]} “{collection.name}”; ask one of its admins."
    )
    return False


def evaluation_shown(request: HttpRequest) -> bool:
    """Whether staff asked to see the evaluation harness's collections (``?evaluation=1``).

    Those hold planted prompt injections on purpose; they stay out of the
    workspace's lists and quarantine queue unless asked for.
    """
    user = request.user
    staff = user.is_authenticated and (user.is_staff or user.is_superuser)
    return staff and (request.GET.get("evaluation") or request.POST.get("evaluation")) == "1"
