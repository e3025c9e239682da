"""Stored answers: a run's passages, the history of runs and conversations, follow-ups, re-runs."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from collections_app.selectors import CollectionNotFound
from query_app.exceptions import QueryError
from query_app.forms import (
    AskForm,
    HistoryFilterForm,
    ask_input_check,
)
from query_app.models import Conversation, QueryRun
from query_app.pipeline.web import is_web_chunk
from query_app.presentation import (
    citation_shown,
    passage_preview,
    section_shown,
)
from query_app.selectors import (
    ConversationNotFound,
    QueryRunNotFound,
    conversation_get_for_user,
    conversation_turns,
    conversations_search_for_user,
    query_run_get_for_user,
    query_run_passage_text,
    query_run_source_exists,
)
from query_app.services import (
    QueryRequest,
    query_answer,
    query_run_rerun,
)
from query_app.views.answers import answer_view, sentence, source_url
from ragsite.web import is_htmx


def _run(request: HttpRequest, run_id: int) -> QueryRun:
    try:
        return query_run_get_for_user(request.user, run_id=run_id)
    except QueryRunNotFound:
        raise Http404("No such answer") from None


@require_GET
@login_required
def passage(request: HttpRequest, run_id: int, marker: int) -> HttpResponse:
    run = _run(request, run_id)
    citation = next((c for c in run.citations if c.get("marker") == marker), None)
    if citation is None:
        raise Http404("No such citation")
    web = is_web_chunk(citation.get("chunk_id"))
    # A web passage was never stored: its snippet is all there is, its page is on the web.
    source_exists = web or query_run_source_exists(run, source_id=citation.get("source_id"))
    text = None if web else query_run_passage_text(run, chunk_id=str(citation.get("chunk_id", "")))
    context = {
        "run": run,
        "citation": {**citation_shown(citation), "section": section_shown(citation)},
        "web": web,
        "source_url": source_url(run, citation) if source_exists else "",
        # The cited sentence(s) highlighted with some context; the snippet otherwise.
        "preview": passage_preview(text, citation.get("spans") or []) if text else None,
    }
    if is_htmx(request):
        return render(request, "query/passage.html#passage", context)
    return render(request, "query/passage.html", context)


@require_GET
@login_required
def history(request: HttpRequest) -> HttpResponse:
    """The user's conversations, last active first, each with its questions."""
    form = HistoryFilterForm(request.GET or None, user=request.user)
    filters = form.cleaned_data if form.is_valid() else {}
    conversations = conversations_search_for_user(
        request.user,
        text=filters.get("q") or "",
        collection_slug=filters.get("collection") or "",
    )
    page = Paginator(conversations, 25).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "page": page,
        "filtered": bool(form.is_bound and any(form.data.get(k) for k in ("q", "collection"))),
        "query": query.urlencode(),
        "has_collections": bool(form.collections),
    }
    if is_htmx(request):
        return render(request, "query/history.html#results", context)
    return render(request, "query/history.html", context)


@require_GET
@login_required
def history_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run(request, run_id)
    before = None
    beside = request.GET.get("beside", "")
    if beside.isdigit():
        try:
            before = query_run_get_for_user(request.user, run_id=int(beside))
        except QueryRunNotFound:
            messages.warning(request, "The earlier answer to compare with is not available.")
    context = {
        "run": run,
        "answer": answer_view(run),
        "before": answer_view(before) if before is not None else None,
    }
    return render(request, "query/run.html", context)


def _conversation(request: HttpRequest, conversation_id: int) -> Conversation:
    try:
        return conversation_get_for_user(request.user, conversation_id=conversation_id)
    except ConversationNotFound:
        raise Http404("No such conversation") from None


def _conversation_page(
    request: HttpRequest, conversation: Conversation, *, data: QueryDict | None = None
) -> HttpResponse:
    turns = list(conversation_turns(conversation))
    initial = {
        "collection": conversation.collection.slug,
        "profile": turns[-1].profile if turns else None,
    }
    form = AskForm(data, initial=initial, user=request.user)
    form.fields["question"].widget.attrs["placeholder"] = (
        "A follow-up, e.g. “and how long is it kept?”"
    )
    context = {
        "conversation": conversation,
        "turns": [answer_view(run) for run in turns],
        "form": form,
    }
    return render(request, "query/conversation.html", context)


@require_GET
@login_required
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """A conversation's permalink: its questions in order, and a box for the next follow-up."""
    return _conversation_page(request, _conversation(request, conversation_id))


@require_POST
@login_required
def conversation_ask(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The follow-up box posted without JavaScript (ask.js streams it through ask_stream)."""
    found = _conversation(request, conversation_id)
    ask_input_check(request.POST)
    try:
        run = query_answer(
            user=request.user,
            request=QueryRequest(
                collection=found.collection,
                question=request.POST.get("question", ""),
                profile=request.POST.get("profile") or None,
                retrieval_only=bool(request.POST.get("retrieval_only")),
                conversation=found.pk,
            ),
        )
    except (CollectionNotFound, ConversationNotFound):
        raise Http404("No such conversation") from None
    except QueryError as exc:
        messages.error(request, sentence(str(exc)))
        return _conversation_page(request, found, data=request.POST)
    url = reverse("query:conversation", kwargs={"conversation_id": found.pk})
    return redirect(f"{url}#run-{run.pk}")


@require_POST
@login_required
def rerun(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run(request, run_id)
    profile = request.POST.get("profile", "")[:50] or run.profile
    try:
        new = query_run_rerun(user=request.user, run=run, profile=profile)
    except CollectionNotFound:
        raise Http404("No such collection") from None
    except ConversationNotFound:
        raise Http404("No such conversation") from None
    except QueryError as exc:
        messages.error(request, sentence(str(exc)))
        return redirect("query:history_detail", run_id=run.pk)
    url = reverse("query:history_detail", kwargs={"run_id": new.pk})
    return redirect(f"{url}?beside={run.pk}")


# --- model settings (administrators) ------------------------------------------------
