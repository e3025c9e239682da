"""Decompose (multi-hop): a complex question searched as 1-3 sub-questions at once.

The chat model splits it when configured; offline, rules split comparisons
("compare A with B") and conjunctions ("X and Y"). Retrieval searches the
question and every sub-question (fused by RRF), so evidence from each document
reaches the answer, which cites across them; the evaluate node then checks
that the merged evidence suffices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from query_app.pipeline.corrective import decompose
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import TraceStep


class DecomposeStage(Stage):
    name = "decompose"
    listed = frozenset({"sub_questions"})

    def chat_use(self, options: QueryOptions) -> str:
        return "its question decomposition"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        question = state.search_question
        calls_before = state.chat_calls
        judged = decompose(question, chat=state.chat)
        parts = [p for p in judged.label.split("\n") if p.strip()]
        step.warnings += judged.warnings
        probes = tuple(dict.fromkeys([question, *parts]))
        step.details.update(
            {
                "sub_questions": parts,
                "source": judged.source,
                "reason": judged.reason,
                "model_calls": state.chat_calls - calls_before,
            }
        )
        kind = "fusion" if len(probes) > 1 else "single"
        return state.with_(probes=probes, probe_kind=kind)

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [f"{len(details.get('sub_questions') or [])} sub-question(s)"]
