"""Source pages: uploads and URLs taken in, a job's progress, a source with its cited sentence
highlighted, its original file, re-ingest and removal."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from collections_app.forms import (
    UploadForm,
    UrlForm,
    new_request_key,
)
from collections_app.highlight import MarkedSpan, text_view
from collections_app.models import Chunk
from collections_app.presentation import job_panel
from collections_app.selectors import (
    quarantine_pending_count,
    user_role,
)
from collections_app.services import (
    Intake,
    OriginalUnavailable,
    QuotaExceeded,
    ingestion_job_refresh,
    source_download_name,
    source_original_open,
    source_reingest,
    source_remove,
    uploads_accept,
    urls_accept,
)
from collections_app.views.access import collection_or_404, role_allowed
from ragsite.web import is_htmx


def urls_to_retry(request: HttpRequest, slug: str) -> str:
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
    collection = collection_or_404(request, slug)
    if not role_allowed(request, collection, "write"):
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
    collection = collection_or_404(request, slug)
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
    collection = collection_or_404(request, slug)
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
    collection = collection_or_404(request, slug)
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
    collection = collection_or_404(request, slug)
    source = get_object_or_404(collection.sources, pk=source_id)
    if not role_allowed(request, collection, "write"):
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
    collection = collection_or_404(request, slug)
    source = get_object_or_404(collection.sources.defer("text"), pk=source_id)
    if not role_allowed(request, collection, "write"):
        return redirect("collections:source", slug=slug, source_id=source_id)
    if request.method == "POST":
        name = source.display_name
        source_remove(source=source)
        messages.success(request, f"“{name}” and its passages were removed.")
        return redirect("collections:detail", slug=slug)
    return render(
        request, "collections/source_remove.html", {"collection": collection, "source": source}
    )
