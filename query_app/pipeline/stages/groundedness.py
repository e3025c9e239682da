"""Stage 7, groundedness: is every sentence of the answer supported by its passages?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from query_app.pipeline.assembly import AssembledContext
from query_app.pipeline.groundedness import CHECKERS, check_groundedness
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import TraceStep


class GroundednessDetails(TypedDict, total=False):
    grounded: bool
    score: float
    unsupported: list[str]
    checker: str
    model_calls: int
    reason: str


class GroundednessStage(Stage):
    name = "groundedness"
    listed = frozenset({"unsupported"})

    def chat_use(self, options: QueryOptions) -> str:
        o = options.groundedness
        uses = o.enabled and CHECKERS.get(o.checker).uses_chat
        return f"its groundedness checker {o.checker!r}" if uses else ""

    def skip_reason(self, state: PipelineState) -> str:
        result = state.generation
        if not state.options.groundedness.enabled:
            return "disabled by the profile"
        if result is None:
            return "retrieval-only request: nothing was generated"
        if result.mode == "not-found":
            return "the fixed not-found answer has nothing to check"
        return ""

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options.groundedness
        assert state.generation is not None  # skip_reason covers it
        verdict = check_groundedness(
            answer=state.generation.text,
            context=state.context or AssembledContext(),
            checker=o.checker,
            chat=state.chat,
            min_support=o.min_support,
        )
        step.details.update(verdict.as_dict())
        details: GroundednessDetails = {"model_calls": verdict.model_calls}
        step.details.update(details)
        step.warnings += verdict.warnings
        return state.with_(groundedness=verdict.as_dict())

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(GroundednessDetails, details)
        if "grounded" not in d:
            return []
        return [
            "grounded" if d["grounded"] else "not grounded",
            f"score {_score(d.get('score'))}",
            f"{len(d.get('unsupported') or [])} unsupported",
        ]


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"
