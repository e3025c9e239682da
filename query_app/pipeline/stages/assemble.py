"""Stage 5, assemble: admit the kept passages under the context budget and number them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from query_app.pipeline.assembly import assemble
from query_app.pipeline.context_window import windows_for
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import ContextEvent, PipelineEvent, TraceStep


class AssembleDetails(TypedDict, total=False):
    chunks: int
    dropped_by_budget: int
    tokens: int
    budget: int
    ordering: str
    layout: list[int]
    token_estimate: str
    expand: dict[str, Any]  # small-to-big: kind, counts, each expanded passage's window


class AssembleStage(Stage):
    name = "assemble"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options.context
        kept = list(state.kept)
        # Small-to-big: the windows around the passages the budget could admit.
        windows = windows_for(
            kept,
            expand=o.expand,
            size=o.window,
            max_chars=int(o.expand_max_tokens * o.chars_per_token),
        )
        context, details, warnings = assemble(kept, options=o, windows=windows)
        step.details.update(details)
        step.warnings += warnings
        return state.with_(context=context, citations=tuple(context.citations()))

    def events_after(self, state: PipelineState) -> list[PipelineEvent]:
        # The citations reach the browser before the answer streams.
        return [ContextEvent(list(state.citations))]

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(AssembleDetails, details)
        parts = [
            f"{d.get('chunks', 0)} passages",
            f"{d.get('dropped_by_budget', 0)} dropped by budget",
            f"{d.get('tokens', '?')}/{d.get('budget', '?')} tokens",
        ]
        expand = d.get("expand")
        if expand:
            parts.append(f"{expand.get('expanded', 0)} given as {expand.get('kind')}")
        return parts
