"""Browser pages for answering: ask (with a streamed variant), passages, history, re-runs.

Every answer is a stored ``QueryRun``; the pages render runs, so a fresh answer,
a reopened one and a re-run look the same. Bad input (empty or over-long
question, unknown profile, a model that is not configured) is a message on the
page; a collection or run the user may not read is a 404.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from collections_app.ingestion.fetch import is_web_url
from collections_app.selectors import CollectionNotFound
from query_app.exceptions import QueryError
from query_app.forms import (
    AskForm,
    HistoryFilterForm,
    ModelSettingsForm,
    RerunForm,
    ask_input_check,
)
from query_app.model_settings import (
    ModelSettingInvalid,
    chat_connection_test_change,
    is_loopback_url,
    is_model_settings_admin,
    local_chat_servers_detect,
    model_settings_overview,
    model_settings_save,
)
from query_app.models import Conversation, QueryRun
from query_app.pipeline.graph import graph_flags
from query_app.pipeline.types import MODE_LABELS, ContextEvent, StepEvent, TokenEvent
from query_app.pipeline.web import is_web_chunk
from query_app.presentation import (
    StageRow,
    answer_html,
    citation_shown,
    passage_preview,
    path_timeline_html,
    stage_summary,
    trace_html,
    trace_rows,
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
    RunEvent,
    query_answer,
    query_answer_stream,
    query_run_rerun,
)
from ragsite.web import is_htmx

logger = logging.getLogger(__name__)


def sentence(message: str) -> str:
    """An exception message as a sentence for a person."""
    message = message.strip()
    if not message:
        return "Something went wrong."
    message = message[0].upper() + message[1:]
    return message if message.endswith((".", "!", "?")) else f"{message}."


@dataclass
class AnswerView:
    """A stored run prepared for the answer partial."""

    run: QueryRun
    html: SafeString
    citations: list[dict[str, Any]]
    rows: list[StageRow]
    unsupported: list[str]
    rerun_form: RerunForm

    @property
    def trace_html(self) -> SafeString:
        return trace_html(self.rows)

    @property
    def path_html(self) -> SafeString:
        """The corrective and adaptive graphs' path (empty for a linear profile)."""
        return path_timeline_html(self.run.trace or [])

    @property
    def flags(self) -> dict[str, Any]:
        """low_confidence (with its reason) and the adaptive route, from the trace."""
        return graph_flags(self.run.trace or [])

    @property
    def target(self) -> str:
        return f"passage-{self.run.pk}"

    @property
    def mode_label(self) -> str:
        return MODE_LABELS.get(self.run.mode, self.run.get_mode_display())


def passage_url(run: QueryRun, marker: int) -> str:
    return reverse("query:passage", kwargs={"run_id": run.pk, "marker": marker})


def source_url(run: QueryRun, citation: dict[str, Any]) -> str:
    """The source page scrolled to the cited sentence (or passage), highlighted there.

    A passage the web fallback found links to its web page (http or https only).
    """
    if is_web_chunk(citation.get("chunk_id")):
        address = str(citation.get("source") or "")
        return address if is_web_url(address) else ""
    url = reverse(
        "collections:source",
        kwargs={"slug": run.collection.slug, "source_id": citation.get("source_id") or 0},
    )
    query = f"chunk={quote(str(citation.get('chunk_id', '')))}"
    spans = [s for s in citation.get("spans") or [] if "char_start" in s and "char_end" in s]
    if spans:
        query += f"&start={int(spans[0]['char_start'])}&end={int(spans[-1]['char_end'])}"
    return f"{url}?{query}#cited"


def answer_view(run: QueryRun) -> AnswerView:
    citations = [
        {
            **citation_shown(c),
            "passage_url": passage_url(run, c["marker"]),
            "source_url": source_url(run, c),
            "web": is_web_chunk(c.get("chunk_id")),
        }
        for c in run.citations
    ]
    html = answer_html(
        run.answer,
        markers=[c["marker"] for c in run.citations],
        link=lambda n: passage_url(run, n),
        target=f"#passage-{run.pk}",
    )
    grounded = run.groundedness or {}
    return AnswerView(
        run=run,
        html=html,
        citations=citations,
        rows=trace_rows(run.trace, cited={c["chunk_id"]: c["marker"] for c in run.citations}),
        unsupported=[str(s) for s in grounded.get("unsupported") or []],
        rerun_form=RerunForm(initial={"profile": run.profile}),
    )


def _conversation_id(value: str) -> int | None:
    """A posted conversation id ("" for a new question); anything else is no conversation here."""
    if not value:
        return None
    if not value.isdigit():
        raise Http404("No such conversation")
    return int(value)


def _ask_request(data: QueryDict, *, stream: bool = False) -> QueryRequest:
    """The question of a posted ask form; the service validates it all (NUL characters: 400)."""
    ask_input_check(data)
    return QueryRequest(
        collection=data.get("collection", ""),
        question=data.get("question", ""),
        profile=data.get("profile") or None,
        retrieval_only=bool(data.get("retrieval_only")),
        web_fallback=bool(data.get("web_fallback")),
        stream=stream,
        conversation=_conversation_id(data.get("conversation", "")),
    )


@require_http_methods(["GET", "POST"])
@login_required
def ask(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        initial = {"collection": request.GET.get("collection", "")}
        form = AskForm(initial=initial, user=request.user)
        return render(request, "query/ask.html", {"form": form, "answer": None})
    answer, error = None, ""
    try:
        run = query_answer(user=request.user, request=_ask_request(request.POST))
    except CollectionNotFound:
        raise Http404("No such collection") from None
    except ConversationNotFound:
        raise Http404("No such conversation") from None
    except QueryError as exc:
        error = sentence(str(exc))
    else:
        answer = answer_view(run)
    if is_htmx(request):
        return render(request, "query/ask.html#answer", {"answer": answer, "error": error})
    if error:
        messages.error(request, error)
    form = AskForm(request.POST, user=request.user)
    return render(request, "query/ask.html", {"form": form, "answer": answer})


def sse(event: str, data: dict[str, Any]) -> str:
    """One Server-Sent Event; the JSON payload never contains a raw newline."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _stream(request: HttpRequest, events: Iterator[Any]) -> Iterator[str]:
    try:
        for event in events:
            if isinstance(event, StepEvent):
                step = event.step
                summary = (
                    [f"skipped: {step.details.get('reason', '')}"]
                    if step.skipped
                    else stage_summary(step.stage, step.details)
                )
                yield sse(
                    "step",
                    {
                        "stage": step.stage,
                        "duration_ms": step.duration_ms,
                        "summary": summary,
                        "skipped": step.skipped,
                        "warnings": step.warnings,
                    },
                )
            elif isinstance(event, ContextEvent):
                yield sse("context", {"passages": len(event.citations)})
            elif isinstance(event, TokenEvent):
                yield sse("token", {"text": event.text, "reset": event.reset})
            elif isinstance(event, RunEvent):
                html = render_to_string(
                    "query/ask.html#answer",
                    {"answer": answer_view(event.run)},
                    request=request,
                )
                url = reverse("query:history_detail", kwargs={"run_id": event.run.pk})
                yield sse("done", {"html": html, "url": url})
    except QueryError as exc:
        yield sse("error", {"message": sentence(str(exc))})
    except Exception:
        logger.exception("streamed answer failed")
        yield sse("error", {"message": "The answer could not be completed; the error was logged."})


@require_POST
@login_required
def ask_stream(request: HttpRequest) -> HttpResponse:
    """The ask form as Server-Sent Events: stage progress, answer tokens, then the answer HTML."""
    try:
        events = query_answer_stream(
            user=request.user, request=_ask_request(request.POST, stream=True)
        )
    except CollectionNotFound:
        raise Http404("No such collection") from None
    except ConversationNotFound:
        raise Http404("No such conversation") from None
    except QueryError as exc:
        body: Iterator[str] = iter([sse("error", {"message": sentence(str(exc))})])
    else:
        body = _stream(request, events)
    response = StreamingHttpResponse(body, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    # Proxies such as nginx would otherwise hold the tokens back.
    response["X-Accel-Buffering"] = "no"
    return response


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
        "citation": citation_shown(citation),
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


def _model_settings_admin(request: HttpRequest) -> None:
    if not is_model_settings_admin(request.user):
        raise PermissionDenied("Only administrators can see or change the model settings.")


def _fill_in(request: HttpRequest) -> dict[str, str]:
    """Values a detected local server's "Use" link fills in (shown, not saved).

    Only a loopback address is taken: a link from elsewhere cannot present a
    remote server as one found on this machine.
    """
    base_url = request.GET.get("use_base_url", "").strip()[:500]
    model = request.GET.get("use_model", "").strip()[:200]
    if not base_url or not is_loopback_url(base_url):
        return {}
    return {"chat_base_url": base_url} | ({"chat_model": model} if model else {})


@require_http_methods(["GET", "POST"])
@login_required
def model_settings(request: HttpRequest) -> HttpResponse:
    """Chat server, API key and cross-encoder; test the connection; find local servers."""
    _model_settings_admin(request)
    if request.method == "GET" and request.GET.get("detect") and is_htmx(request):
        servers = local_chat_servers_detect()
        return render(
            request, "query/model_settings.html#detected", {"servers": servers, "detected": True}
        )
    overview = model_settings_overview(user=request.user)
    context: dict[str, Any] = {"overview": overview, "test": None}
    if request.method == "GET":
        fill = _fill_in(request)
        context["form"] = ModelSettingsForm(overview=overview, fill=fill)
        context["filled"] = fill
        if request.GET.get("detect"):
            context |= {"servers": local_chat_servers_detect(), "detected": True}
        return render(request, "query/model_settings.html", context)
    form = ModelSettingsForm(request.POST, overview=overview)
    context["form"] = form
    testing = request.POST.get("action") == "test"
    if not form.is_valid():
        if testing and is_htmx(request):
            errors = "; ".join(str(e) for errors in form.errors.values() for e in errors)
            context["test"] = {"ok": False, "message": errors}
            return render(request, "query/model_settings.html#test_result", context)
        return render(request, "query/model_settings.html", context, status=400)
    if testing:
        context["test"] = chat_connection_test_change(user=request.user, change=form.change())
        if is_htmx(request):
            return render(request, "query/model_settings.html#test_result", context)
        return render(request, "query/model_settings.html", context)
    try:
        model_settings_save(user=request.user, change=form.change())
    except ModelSettingInvalid as exc:
        form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        return render(request, "query/model_settings.html", context, status=400)
    messages.success(request, "Model settings saved. The next answer uses them.")
    return redirect("query:model_settings")
