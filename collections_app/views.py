"""Browser pages of the corpus: collections, members, uploads, jobs, sources, quarantine.

Views parse the form, call one service or selector and render. A collection the
user may not read is a 404 (its existence does not leak); a lacking role for an
action is a message on the page, never an error page. Requests sent by htmx get
the page's named partial instead of the whole page.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from collections_app.forms import (
    CollectionForm,
    MemberForm,
    QuarantineDecisionForm,
    UploadForm,
    UrlForm,
    WebFallbackForm,
    new_request_key,
)
from collections_app.highlight import MarkedSpan, text_view
from collections_app.ingestion.types import IngestionError
from collections_app.models import Chunk, Collection, QuarantineItem
from collections_app.presentation import job_panel, max_file_size, quarantine_entry
from collections_app.selectors import (
    DEFAULT_SOURCE_ORDER,
    SOURCE_ORDERS,
    CollectionNotFound,
    collection_get_for_user,
    collection_jobs,
    collection_last_ingested,
    collection_overviews,
    collection_source_count,
    collection_sources,
    quarantine_pending_count,
    quarantine_queue,
    user_can,
    user_role,
)
from collections_app.services import (
    CollectionExists,
    Intake,
    LastAdmin,
    OriginalUnavailable,
    QuotaExceeded,
    collection_create,
    collection_delete,
    collection_summary_tree_set,
    collection_update,
    collection_web_fallback_set,
    ingestion_job_refresh,
    membership_change,
    quarantine_review,
    source_download_name,
    source_original_open,
    source_reingest,
    source_remove,
    uploads_accept,
    urls_accept,
)
from ragsite.web import is_htmx

ROLE_WORDS = {"read": "read", "write": "change", "admin": "administer"}


def _collection(request: HttpRequest, slug: str) -> Collection:
    try:
        return collection_get_for_user(request.user, slug=slug)
    except CollectionNotFound:
        raise Http404("No such collection") from None


def _allowed(request: HttpRequest, collection: Collection, role: str) -> bool:
    """Whether the user has ``role``; if not, say so in a message."""
    if user_can(request.user, collection, role):
        return True
    messages.error(
        request, f"You may not {ROLE_WORDS[role]} “{collection.name}”; ask one of its admins."
    )
    return False


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    return redirect("collections:list")


def _show_evaluation(request: HttpRequest) -> bool:
    """Whether staff asked to see the evaluation harness's collections (``?evaluation=1``).

    Those hold planted prompt injections on purpose; they stay out of the
    workspace's lists and quarantine queue unless asked for.
    """
    user = request.user
    staff = user.is_authenticated and (user.is_staff or user.is_superuser)
    return staff and (request.GET.get("evaluation") or request.POST.get("evaluation")) == "1"


@require_GET
@login_required
def collection_list(request: HttpRequest) -> HttpResponse:
    show_evaluation = _show_evaluation(request)
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
    collection = _collection(request, slug)
    if not _allowed(request, collection, "admin"):
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
    collection = _collection(request, slug)
    if not _allowed(request, collection, "admin"):
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
    collection = _collection(request, slug)
    if not _allowed(request, collection, "admin"):
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
    collection = _collection(request, slug)
    if not _allowed(request, collection, "admin"):
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
    collection = _collection(request, slug)
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
            initial={"request_key": new_request_key(), "urls": _urls_to_retry(request, slug)}
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


def _urls_to_retry(request: HttpRequest, slug: str) -> str:
    """The addresses of the last URL form that were refused, to correct and send again."""
    return "\n".join(request.session.pop(f"urls-refused:{slug}", []))


def _report_intake(request: HttpRequest, intake: Intake) -> None:
    for refused in intake.refused:
        messages.error(request, f"Not accepted: {refused.reason}")
    if intake.repeated:
        messages.info(request, "That form was already submitted; here is the job it started.")
    elif intake.job is not None:
        count = len(intake.accepted)
        noun = "document" if count == 1 else "documents"
        messages.success(
            request, f"Ingesting {count} {noun} in the background (job {intake.job.pk})."
        )


def _after_intake(slug: str, intake: Intake) -> HttpResponse:
    url = reverse("collections:detail", kwargs={"slug": slug})
    if intake.job is not None:
        url += f"?job={intake.job.pk}#jobs"
    return redirect(url)


def _intake_view(
    request: HttpRequest,
    slug: str,
    form: UploadForm | UrlForm,
    *,
    accept: Callable[..., Intake],
    items: str,
    refused: str,
) -> HttpResponse:
    """One form that starts an ingestion job: check role and form, accept, report, redirect.

    ``items`` names the form field handed to ``accept`` (files or URLs);
    ``refused`` opens each form error's message.
    """
    collection = _collection(request, slug)
    if not _allowed(request, collection, "write"):
        return redirect("collections:detail", slug=slug)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, f"{refused}: {error}")
        return redirect("collections:detail", slug=slug)
    try:
        intake = accept(
            collection=collection,
            user=request.user,
            chunking=form.cleaned_data["chunking"],
            request_key=form.cleaned_data["request_key"],
            **{items: form.cleaned_data[items]},
        )
    except QuotaExceeded as exc:
        messages.error(request, f"{refused}: {exc}")
        return redirect("collections:detail", slug=slug)
    _report_intake(request, intake)
    if items == "urls" and intake.refused and not intake.repeated:
        # Nothing typed is lost: the refused addresses wait in the form, to correct.
        request.session[f"urls-refused:{slug}"] = [r.name for r in intake.refused]
        messages.info(request, "The refused addresses are back in the form below to correct.")
    return _after_intake(slug, intake)


@require_POST
@login_required
def collection_upload(request: HttpRequest, slug: str) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    return _intake_view(
        request, slug, form, accept=uploads_accept, items="files", refused="Upload not started"
    )


@require_POST
@login_required
def collection_add_urls(request: HttpRequest, slug: str) -> HttpResponse:
    form = UrlForm(request.POST)
    return _intake_view(
        request, slug, form, accept=urls_accept, items="urls", refused="Addresses not added"
    )


@require_GET
@login_required
def job_detail(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    collection = _collection(request, slug)
    job = get_object_or_404(collection.jobs.select_related("created_by"), pk=job_id)
    # A job whose worker died is resumed (or failed) now, not shown running forever.
    job = ingestion_job_refresh(job=job)
    context = {"collection": collection, "panel": job_panel(job)}
    if is_htmx(request):
        if job.is_finished:
            # The job may have sent documents to the quarantine: update the count.
            context.update(
                refresh_count=True, pending_review=quarantine_pending_count(request.user)
            )
        response = render(request, "collections/job.html#job_panel", context)
        if job.is_finished:
            # Tells the sources table on the collection page to refresh itself.
            response["HX-Trigger"] = "jobFinished"
        return response
    return render(request, "collections/job.html", context)


@require_GET
@login_required
def source_download(request: HttpRequest, slug: str, source_id: int) -> HttpResponse:
    """The source's original file, as an attachment (everyone who may read the collection)."""
    collection = _collection(request, slug)
    source = get_object_or_404(collection.sources.defer("text"), pk=source_id)
    try:
        original = source_original_open(source=source)
    except OriginalUnavailable as exc:
        messages.error(request, f"The original file cannot be downloaded: {exc}.")
        return redirect("collections:source", slug=slug, source_id=source_id)
    response = FileResponse(
        original.content,
        as_attachment=True,
        filename=original.filename,
        content_type=original.content_type,
    )
    # Opened by mistake in a tab, an uploaded HTML page runs no script here.
    response["Content-Security-Policy"] = "sandbox"
    return response


def _cited_sentence(request: HttpRequest, cited: Chunk | None) -> MarkedSpan | None:
    """The cited sentence (``?start=&end=``, offsets in the source) when it lies in the passage."""
    if cited is None:
        return None
    try:
        start, end = int(request.GET["start"]), int(request.GET["end"])
    except (KeyError, ValueError):
        return None
    if not cited.char_start <= start < end <= cited.char_end:
        return None
    return MarkedSpan(start, end, f"cited sentence of passage {cited.ordinal + 1}")


@require_GET
@login_required
def source_detail(request: HttpRequest, slug: str, source_id: int) -> HttpResponse:
    collection = _collection(request, slug)
    source = get_object_or_404(collection.sources, pk=source_id)
    cited = None
    chunk_id = request.GET.get("chunk", "")
    if chunk_id:
        cited = source.chunks.defer("embedding").filter(pk=chunk_id).first()
        if cited is None:
            messages.warning(
                request, "That passage is no longer part of this document (it was re-ingested)."
            )
    span = (
        MarkedSpan(cited.char_start, cited.char_end, f"passage {cited.ordinal + 1}")
        if cited
        else None
    )
    sentence = _cited_sentence(request, cited)
    # The passages only: summary-tree nodes are not part of the document's text.
    passages = source.chunks.filter(kind=Chunk.Kind.PASSAGE)
    chunks = Paginator(passages.defer("embedding", "metadata").order_by("ordinal"), 50)
    page = chunks.get_page(request.GET.get("page"))
    context = {
        "collection": collection,
        "source": source,
        "role": user_role(request.user, collection),
        "cited": cited,
        "sentence": sentence,
        "text": text_view(source.text, sentence or span) if source.text else None,
        "chunk_page": page,
        "reingest_key": new_request_key(),
        "quarantine": source.quarantine_items.select_related("reviewer").first(),
        "download_name": source_download_name(source),
    }
    return render(request, "collections/source.html", context)


@require_POST
@login_required
def source_reingest_view(request: HttpRequest, slug: str, source_id: int) -> HttpResponse:
    collection = _collection(request, slug)
    source = get_object_or_404(collection.sources, pk=source_id)
    if not _allowed(request, collection, "write"):
        return redirect("collections:source", slug=slug, source_id=source_id)
    try:
        intake = source_reingest(
            source=source, user=request.user, request_key=request.POST.get("request_key", "")[:64]
        )
    except QuotaExceeded as exc:
        messages.error(request, f"Not re-ingested: {exc}")
        return redirect("collections:source", slug=slug, source_id=source_id)
    _report_intake(request, intake)
    return _after_intake(slug, intake)


@require_http_methods(["GET", "POST"])
@login_required
def source_remove_view(request: HttpRequest, slug: str, source_id: int) -> HttpResponse:
    collection = _collection(request, slug)
    source = get_object_or_404(collection.sources.defer("text"), pk=source_id)
    if not _allowed(request, collection, "write"):
        return redirect("collections:source", slug=slug, source_id=source_id)
    if request.method == "POST":
        name = source.display_name
        source_remove(source=source)
        messages.success(request, f"“{name}” and its passages were removed.")
        return redirect("collections:detail", slug=slug)
    return render(
        request, "collections/source_remove.html", {"collection": collection, "source": source}
    )


@require_GET
@login_required
def quarantine_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", QuarantineItem.ReviewStatus.PENDING)
    if status not in QuarantineItem.ReviewStatus.values and status != "all":
        status = QuarantineItem.ReviewStatus.PENDING
    show_evaluation = _show_evaluation(request)
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
    show_evaluation = _show_evaluation(request)
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
