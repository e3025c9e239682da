"""Stage 1, transform: the probes retrieval searches with (the question, variants, or HyDE)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from query_app.pipeline.index_memo import index_key
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.spelling import spelling_correct
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.transforms import TRANSFORMS, TransformResult
from query_app.pipeline.types import TraceStep


class TransformDetails(TypedDict, total=False):
    transform: str  # the configured transform
    kind: str  # how the probes' results combine: single | union | fusion | replacement
    source: str  # none | llm | heuristic
    probes: list[str]
    model_calls: int
    reason: str
    cache: str
    spelling: dict[str, str]  # misspelt word → its correction
    corrected: str  # the question as retrieval and the answer read it


class TransformStage(Stage):
    name = "transform"
    listed = frozenset({"probes", "variants"})
    cacheable = True

    def chat_use(self, options: QueryOptions) -> str:
        kind = options.transform.kind
        return f"its transform {kind!r}" if TRANSFORMS.get(kind).uses_chat else ""

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options.transform
        question = state.search_question
        details: TransformDetails = {}
        collection = state.query.collection
        if o.spelling and collection is not None:
            spelled = spelling_correct(
                question, collection_id=int(collection.pk), index=index_key(collection)
            )
            if spelled.fixes:
                question = spelled.question
                details["spelling"] = spelled.fixes
                details["corrected"] = question
                state = state.with_(standalone=question)
        if o.kind == "none":
            result = TransformResult(probes=[question], kind="single")
            # Not skipped when the spelling was corrected: the step changed the probe.
            step.skipped = not details.get("spelling")
            details["reason"] = "transform 'none': the question is the only probe"
        else:
            calls_before = state.chat_calls
            result = TRANSFORMS.get(o.kind).apply(
                question,
                variants=o.variants,
                chat=state.chat,
                allow_fallback=state.query.allow_fallback,
            )
            details["model_calls"] = state.chat_calls - calls_before
            step.warnings += result.warnings
        details.update(
            {
                "transform": o.kind,
                "kind": result.kind,
                "source": result.source,
                "probes": result.probes,
            }
        )
        step.details.update(details)
        return state.with_(probes=tuple(result.probes), probe_kind=result.kind)

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(TransformDetails, details)
        fixes = d.get("spelling") or {}
        spelled = (
            [f"spelling: {', '.join(f'{a} → {b}' for a, b in fixes.items())}"] if fixes else []
        )
        return [f"{len(d.get('probes') or []) or 1} probe(s)", d.get("transform", ""), *spelled]
