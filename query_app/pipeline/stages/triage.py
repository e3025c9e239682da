"""Triage (corrective), route (adaptive) and respond: questions that need no retrieval.

``triage`` sorts the question into chit-chat / unsafe / simple / complex (rules
first, then the chat model); ``route`` picks none / single / iterative for the
adaptive profile. Either step's ``outcome`` picks the graph's next edge.
``respond`` answers chit-chat without retrieval and declines unsafe input with
its reason; both are traced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from query_app.chat import ChatError
from query_app.pipeline.corrective import route, triage
from query_app.pipeline.generation import GenerationResult
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import TraceStep

CHIT_CHAT_ANSWER = (
    "Hello! Ask me a question about the documents in this collection and I will answer "
    "with citations to the passages."
)
DECLINE_ANSWER = "I can't help with that request. {reason}."


class TriageStage(Stage):
    name = "triage"

    def chat_use(self, options: QueryOptions) -> str:
        return "its triage of the question"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        judged = triage(state.answer_question, chat=state.chat)
        step.details.update(
            {
                "outcome": judged.label,
                "label": judged.label,
                "reason": judged.reason,
                "source": judged.source,
                "model_calls": judged.model_calls,
            }
        )
        step.warnings += judged.warnings
        return state.with_(
            notes={**state.notes, "triage": judged.label, "triage_reason": judged.reason}
        )

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [str(details.get("label", "")), str(details.get("source", ""))]


class RouteStage(Stage):
    name = "route"

    def chat_use(self, options: QueryOptions) -> str:
        return "its complexity routing"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        judged = route(state.answer_question, chat=state.chat)
        triaged = judged.reason.split(":", 1)[0]
        step.details.update(
            {
                "outcome": judged.label,
                "route": judged.label,
                "reason": judged.reason,
                "source": judged.source,
                "model_calls": judged.model_calls,
            }
        )
        step.warnings += judged.warnings
        return state.with_(
            notes={
                **state.notes,
                "route": judged.label,
                "triage": triaged,
                "triage_reason": judged.reason,
            }
        )

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [f"route {details.get('route', '?')}", str(details.get("source", ""))]


class RespondStage(Stage):
    """Chit-chat answered without retrieval; unsafe input declined with its reason."""

    name = "respond"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        label = str(state.notes.get("triage", "chit-chat"))
        reason = str(state.notes.get("triage_reason", ""))
        step.details.update({"label": label, "reason": reason, "retrieval": "none"})
        if label == "unsafe":
            text = DECLINE_ANSWER.format(reason=reason[:1].upper() + reason[1:] or "Unsafe")
            step.details["decision"] = "declined"
            return state.with_(generation=GenerationResult(text=text, mode="not-found"))
        text = CHIT_CHAT_ANSWER
        mode: Any = "not-found"
        if state.chat is not None:
            try:
                reply = state.chat.complete(
                    [
                        {
                            "role": "system",
                            "content": "Reply briefly and kindly to the user's small talk; "
                            "say you answer questions about their documents.",
                        },
                        {"role": "user", "content": state.query.question[:500]},
                    ],
                    temperature=0.0,
                    max_tokens=80,
                )
                if reply.strip():
                    text, mode = reply.strip(), "llm"
            except ChatError as exc:
                step.warn(f"the chat model could not reply to small talk ({exc}); canned reply")
            step.details["model_calls"] = 1
        step.details["decision"] = "chit-chat"
        return state.with_(generation=GenerationResult(text=text, mode=mode))

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [str(details.get("decision", "")), "no retrieval"]
