"""Template tags of the browser layout."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from collections_app.ingestion.report import names_with_counts
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


@register.filter
def signal_counts(signals: Iterable[Mapping[str, Any] | str] | None) -> str:
    """Signal names, each once with its count when repeated (see ``names_with_counts``).

    Takes stored signals (dicts with a ``name``) or plain names.
    """
    names = [s if isinstance(s, str) else str(s.get("name", "")) for s in signals or ()]
    return names_with_counts(n for n in names if n)


@register.simple_tag(takes_context=True)
def query_with(context: dict[str, Any], **changes: object) -> str:
    """The current query string with ``changes`` applied (``""`` or None drops a key).

    ``{% query_with page=2 %}`` on ``?q=fees&page=1`` gives ``?q=fees&page=2``;
    nothing left gives ``""``.
    """
    request = context.get("request")
    params = request.GET.copy() if request is not None else QueryDict(mutable=True)
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else ""


@register.simple_tag(takes_context=True)
def sort_header(
    context: dict[str, Any],
    key: str,
    label: str,
    *,
    descending_first: bool = False,
    numeric: bool = False,
) -> SafeString:
    """A column header of the sources table that sorts by ``key``; a second click reverses.

    ``descending_first`` for columns read biggest or newest first (size, date);
    ``numeric`` aligns the header with right-aligned figures.
    """
    order = str(context.get("order", ""))
    current = order.lstrip("-") == key
    descending = order.startswith("-")
    if current:
        next_order = key if descending else f"-{key}"
    else:
        next_order = f"-{key}" if descending_first else key
    href = query_with(context, sort=next_order, page=None)
    sort_state = ("descending" if descending else "ascending") if current else ""
    arrow = ("▼" if descending else "▲") if current else ""
    return format_html(
        '<th scope="col"{}{}><a href="{}#sources" hx-get="{}" hx-target="#sources" '
        'hx-swap="outerHTML" hx-push-url="true">{}</a>{}</th>',
        format_html(' class="num"') if numeric else "",
        format_html(' aria-sort="{}"', sort_state) if sort_state else "",
        href,
        href,
        label,
        format_html(' <span aria-hidden="true">{}</span>', arrow) if arrow else "",
    )
