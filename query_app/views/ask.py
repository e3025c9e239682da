"""The ask page and its streamed variant (server-sent events: stages, tokens, the stored run)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from collections_app.selectors import CollectionNotFound
from query_app.exceptions import QueryError
from query_app.forms import (
    AskForm,
    ask_input_check,
)
from query_app.pipeline.types import ContextEvent, StepEvent, TokenEvent
from query_app.presentation import (
    stage_summary,
)
from query_app.selectors import (
    ConversationNotFound,
)
from query_app.services import (
    QueryRequest,
    RunEvent,
    query_answer,
    query_answer_stream,
)
from query_app.views.answers import answer_view, sentence
from ragsite.web import is_htmx

logger = logging.getLogger(__name__)


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
        # Written off the request path like the API's (run_writer.py): the id and the
        # permalink are known at once, and a read of the run by id waits for it.
        run = query_answer(user=request.user, request=_ask_request(request.POST), store_later=True)
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
