"""Rewrite (corrective, incorrect evidence or an ungrounded answer): a new probe.

The chat model writes it when one is configured; offline, pseudo-relevance
feedback adds discriminative words of the retrieved passages, or the question's
keywords alone are searched. Retrieval then searches the original question and
the new probe together (fused by RRF); generation and citations still use the
original question. Every probe tried is in the trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from query_app.pipeline.corrective import Judgement, rewrite_probe
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import TraceStep


class RewriteStage(Stage):
    name = "rewrite"

    def chat_use(self, options: QueryOptions) -> str:
        return "its probe rewriter"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        question = state.search_question
        tried = tuple(state.notes.get("probes_tried", ()))
        calls_before = state.chat_calls
        bridge = str(state.notes.get("bridge_probe") or "")
        if bridge and bridge not in tried:
            # The evaluate node found a definition of the question's term: search it.
            judged = Judgement(bridge, "bridge: the definition of a term of the question", "bridge")
        else:
            judged = rewrite_probe(
                question,
                list(state.candidates),
                attempt=state.iteration,
                tried=tried,
                chat=state.chat,
                rationale=str(state.notes.get("verdict", "")),
            )
        step.warnings += judged.warnings
        probe = judged.label
        step.details.update(
            {
                "probe": probe,
                "how": judged.reason,
                "source": judged.source,
                "because": "ungrounded answer"
                if state.generation is not None
                else "a bridge hop"
                if judged.source == "bridge"
                else f"verdict {state.notes.get('verdict', '?')}",
                "model_calls": state.chat_calls - calls_before,
            }
        )
        # A bridge also names what the question's term is for the nodes after it (the
        # answer is about the Starter Kit the Harbor bundle is): like a condensed follow-up.
        resolved = (
            str(state.notes.get("bridge_resolved") or "") if judged.source == "bridge" else ""
        )
        if resolved:
            step.details["resolved"] = resolved
        # A new answer is made from the new evidence.
        return state.with_(
            standalone=resolved or state.standalone,
            probes=(question, probe),
            probe_kind="fusion",
            generation=None,
            groundedness=None,
            notes={
                **state.notes,
                "probes_tried": (*tried, probe),
                "bridge_probe": "",
                # What a rewrite finds is judged against the question, not the probe
                # (a bridge searches a definition the question lacks: judged as found).
                "rewritten_probes": (*state.notes.get("rewritten_probes", ()), probe)
                if judged.source != "bridge"
                else state.notes.get("rewritten_probes", ()),
            },
        )

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [f"probe {str(details.get('probe', ''))[:60]!r}", str(details.get("how", ""))]
