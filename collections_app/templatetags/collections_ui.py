"""Template tags of the browser layout."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from collections_app.selectors import quarantine_pending_count

register = template.Library()


@register.simple_tag(takes_context=True)
def pending_review_count(context: dict[str, Any]) -> int:
    """Quarantine items awaiting the current user's review (0 when logged out)."""
    request = context.get("request")
    if request is None:
        return 0
    return quarantine_pending_count(request.user)


@register.filter
def ago(moment: datetime | None) -> str:
    """``"just now"`` / ``"5 minutes ago"``: how long ago something happened."""
    if moment is None:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"
