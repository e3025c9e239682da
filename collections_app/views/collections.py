"""Collection pages: the list, create, edit, delete, members, the web-fallback switch and a
collection's page with its sources and jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from collections_app.forms import (
    CollectionForm,
    MemberForm,
    UploadForm,
    UrlForm,
    WebFallbackForm,
    new_request_key,
)
from collections_app.ingestion.types import IngestionError
from collections_app.models import Chunk, Collection
from collections_app.presentation import job_panel, max_file_size
from collections_app.selectors import (
    DEFAULT_SOURCE_ORDER,
    SOURCE_ORDERS,
    collection_jobs,
    collection_last_ingested,
    collection_overviews,
    collection_source_count,
    collection_sources,
    user_role,
)
from collections_app.services import (
    CollectionExists,
    LastAdmin,
    collection_create,
    collection_delete,
    collection_summary_tree_set,
    collection_update,
    collection_web_fallback_set,
    membership_change,
)
from collections_app.views.access import collection_or_404, evaluation_shown, role_allowed
from collections_app.views.sources import urls_to_retry
from ragsite.web import is_htmx


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    return redirect("collections:list")


@require_GET
@login_required
def collection_list(request: HttpRequest) -> HttpResponse:
    show_evaluation = evaluation_shown(request)
    collections = collection_overviews(request.user, include_evaluation=show_evaluation)
    return render(
        request,
        "collections/list.html",
        {"collections": collections, "show_evaluation": show_evaluation},
    )


@require_http_methods(["GET", "POST"])
@login_required
def collection_create_view(request: HttpRequest) -> HttpResponse:
    form = CollectionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        summary_tree = bool(data.pop("summary_tree", False))
        try:
            collection = collection_create(user=request.user, **data)
        except (CollectionExists, ValueError, IngestionError) as exc:
            form.add_error(None, str(exc))
        else:
            collection_summary_tree_set(
                collection=collection, enabled=summary_tree, user=request.user
            )
            messages.success(request, f"Collection “{collection.name}” created. Add documents.")
            return redirect("collections:detail", slug=collection.slug)
    return render(request, "collections/form.html", {"form": form, "collection": None})


@require_http_methods(["GET", "POST"])
@login_required
def collection_edit(request: HttpRequest, slug: str) -> HttpResponse:
    collection = collection_or_404(request, slug)
    if not role_allowed(request, collection, "admin"):
        return redirect("collections:detail", slug=slug)
    initial = {
        "name": collection.name,
        "description": collection.description,
        "chunking_strategy": collection.chunking_strategy,
        "summary_tree": collection.summary_tree,
    }
    form = CollectionForm(request.POST or None, initial=initial, editing=True)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        summary_tree = bool(data.pop("summary_tree", False))
        collection_update(collection=collection, **data)
        collection_summary_tree_set(collection=collection, enabled=summary_tree, user=request.user)
        messages.success(request, "Collection saved.")
        return redirect("collections:detail", slug=slug)
    context = {
        "form": form,
        "collection": collection,
        "web_form": WebFallbackForm(initial={"web_fallback": collection.web_fallback}),
    }
    return render(request, "collections/form.html", context)


@require_POST
@login_required
def collection_web_fallback(request: HttpRequest, slug: str) -> HttpResponse:
    """The settings page's web-fallback switch (collection admins only)."""
    collection = collection_or_404(request, slug)
    if not role_allowed(request, collection, "admin"):
        return redirect("collections:detail", slug=slug)
    form = WebFallbackForm(request.POST)
    if form.is_valid():
        enabled = form.cleaned_data["web_fallback"]
        collection_web_fallback_set(collection=collection, enabled=enabled)
        messages.success(
            request,
            "Web fallback allowed: corrective and adaptive answers may search the web when asked."
            if enabled
            else "Web fallback turned off for this collection.",
        )
    return redirect("collections:edit", slug=slug)


@require_http_methods(["GET", "POST"])
@login_required
def collection_delete_view(request: HttpRequest, slug: str) -> HttpResponse:
    collection = collection_or_404(request, slug)
    if not role_allowed(request, collection, "admin"):
        return redirect("collections:detail", slug=slug)
    if request.method == "POST":
        name = collection.name
        collection_delete(collection=collection)
        messages.success(request, f"Collection “{name}” and all its passages were deleted.")
        return redirect("collections:list")
    counts = {
        "sources": collection.sources.count(),
        "chunks": collection.chunks.filter(kind=Chunk.Kind.PASSAGE).count(),
    }
    return render(request, "collections/delete.html", {"collection": collection, **counts})


@require_http_methods(["GET", "POST"])
@login_required
def collection_members(request: HttpRequest, slug: str) -> HttpResponse:
    collection = collection_or_404(request, slug)
    if not role_allowed(request, collection, "admin"):
        return redirect("collections:detail", slug=slug)
    form = MemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        member = form.cleaned_data["username"]
        role = form.cleaned_data["role"] or None
        try:
            membership_change(collection=collection, user=member, role=role)
        except LastAdmin as exc:
            messages.error(request, str(exc))
        else:
            done = f"now has {role} access" if role else "no longer has access"
            messages.success(request, f"{member.get_username()} {done}.")
        return redirect("collections:members", slug=slug)
    memberships = collection.memberships.select_related("user").order_by("user__username")
    return render(
        request,
        "collections/members.html",
        {"collection": collection, "memberships": memberships, "form": form},
    )


@require_GET
@login_required
def collection_detail(request: HttpRequest, slug: str) -> HttpResponse:
    collection = collection_or_404(request, slug)
    listing = _source_listing(request, collection)
    if is_htmx(request):
        return render(
            request, "collections/detail.html#sources", {"collection": collection, **listing}
        )
    jobs = collection_jobs(collection)
    shown = request.GET.get("job")
    if shown and shown.isdigit():
        chosen = collection.jobs.filter(pk=int(shown)).first()
        if chosen is not None and chosen not in jobs:
            jobs.insert(0, chosen)
    key = new_request_key()
    context = {
        "collection": collection,
        "role": user_role(request.user, collection),
        **listing,
        "panels": [job_panel(job) for job in jobs[:3]],
        "last_ingested": collection_last_ingested(collection) if not jobs else None,
        "upload_form": UploadForm(initial={"request_key": key}),
        "url_form": UrlForm(
            initial={"request_key": new_request_key(), "urls": urls_to_retry(request, slug)}
        ),
        "max_file_bytes": max_file_size(),
    }
    return render(request, "collections/detail.html", context)


def _source_listing(request: HttpRequest, collection: Collection) -> dict[str, object]:
    """One page of the sources table: searched (``q``), sorted (``sort``), paginated (``page``)."""
    search = request.GET.get("q", "").strip()[:200]
    order = request.GET.get("sort", "")
    if order not in SOURCE_ORDERS:
        order = DEFAULT_SOURCE_ORDER
    sources = collection_sources(collection, search=search, order=order)
    page = Paginator(sources, settings.RAG["ui"]["sources_per_page"]).get_page(
        request.GET.get("page")
    )
    return {
        "sources_page": page,
        "search": search,
        "order": order,
        "sources_total": collection_source_count(collection) if search else page.paginator.count,
    }
