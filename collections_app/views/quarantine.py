"""The quarantine queue: documents held by the validators, approved or rejected by reviewers."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from collections_app.forms import (
    QuarantineDecisionForm,
)
from collections_app.models import QuarantineItem
from collections_app.presentation import quarantine_entry
from collections_app.selectors import (
    quarantine_queue,
)
from collections_app.services import (
    quarantine_review,
)
from collections_app.views.access import evaluation_shown
from ragsite.web import is_htmx


@require_GET
@login_required
def quarantine_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", QuarantineItem.ReviewStatus.PENDING)
    if status not in QuarantineItem.ReviewStatus.values and status != "all":
        status = QuarantineItem.ReviewStatus.PENDING
    show_evaluation = evaluation_shown(request)
    items = quarantine_queue(
        request.user,
        status="" if status == "all" else status,
        include_evaluation=show_evaluation,
    )
    page = Paginator(items, 25).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "entries": [quarantine_entry(item) for item in page],
        "status": status,
        "statuses": [*QuarantineItem.ReviewStatus.choices, ("all", "All")],
        "show_evaluation": show_evaluation,
        "evaluation_query": "&evaluation=1" if show_evaluation else "",
    }
    template = "collections/quarantine.html#queue" if is_htmx(request) else None
    return render(request, template or "collections/quarantine.html", context)


@require_POST
@login_required
def quarantine_review_view(request: HttpRequest) -> HttpResponse:
    show_evaluation = evaluation_shown(request)
    reviewable = quarantine_queue(request.user, include_evaluation=show_evaluation)
    form = QuarantineDecisionForm(
        request.POST, item_ids=list(reviewable.values_list("pk", flat=True))
    )
    back = reverse("collections:quarantine") + ("?evaluation=1" if show_evaluation else "")
    if not form.is_valid():
        for field, errors in form.errors.items():
            for error in errors:
                what = (
                    "choose at least one item still awaiting review." if field == "items" else error
                )
                messages.error(request, f"Nothing decided: {what}")
        return redirect(back)
    items = list(reviewable.filter(pk__in=form.cleaned_data["items"]))
    outcomes = quarantine_review(
        items=items,
        reviewer=request.user,
        decision=form.cleaned_data["decision"],
        reason=form.cleaned_data["reason"],
    )
    done = [o for o in outcomes if not o.error]
    for outcome in outcomes:
        if outcome.error:
            messages.error(request, f"{outcome.item.source.display_name}: {outcome.error}")
    if done:
        verb = "approved and indexed" if form.cleaned_data["decision"] == "approve" else "rejected"
        names = ", ".join(o.item.source.display_name for o in done[:5])
        more = f" and {len(done) - 5} more" if len(done) > 5 else ""
        messages.success(request, f"{len(done)} item(s) {verb}: {names}{more}.")
    return redirect(back)
