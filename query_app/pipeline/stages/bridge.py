"""Bridge (linear profiles): one more search when the evidence renames the question's thing.

A question may name a thing by a name its answer's document never uses ("the
Harbor bundle" is the sales name of the Q3 Starter Kit), or describe it instead
of naming it ("the dock that a Q3 of revision C uses": QD-2). The first search
then finds the glossary line or the table row that gives the other name, not the
answer. When the kept evidence defines a term of the question, or names the thing
it describes (``pipeline/bridging.py``, the same rules as the corrective graph's
bridge hop), the definition's words are searched next to the question once, the
two rankings are fused (RRF) and the relevance floor is applied again; the answer
is then written for the question read with the name ("How much does the Harbor
bundle (Quillmate Q3 Starter Kit) cost?").

The hop is cheap (regular expressions over the top passages; a search only when
one matches) and never calls a model. It does not run for retrieval only: `rag
retrieve` and the ranking metrics read the question's own ranking. Evidence the
offline grader judges irrelevant, or an empty kept set, never triggers it, and a
hop whose search keeps nothing leaves the first evidence in place. ``retrieval.bridge``
turns it off.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, TypedDict, cast

from query_app.pipeline.bridging import bridge_for
from query_app.pipeline.corrective import grade_offline, score_gate
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.stages.fuse import FuseStage
from query_app.pipeline.stages.rerank import RerankStage
from query_app.pipeline.stages.retrieve import RetrieveStage
from query_app.pipeline.types import Candidate, PipelineEvent, TraceStep


class BridgeDetails(TypedDict, total=False):
    hopped: bool
    reason: str
    term: str
    definition: str
    chunk_id: str
    probe: str
    resolved: str
    verdict: str
    # The passages before and after the hop (the trace shows them as tables).
    kept_before: list[dict[str, str]]
    kept: list[dict[str, str]]
    # The hop's own stages: retrieve, fuse and rerank, each with its time and summary.
    hop: list[dict[str, Any]]


def _listing(candidates: Sequence[Candidate]) -> list[dict[str, str]]:
    return [
        {"chunk_id": c.chunk_id, "source": c.source_title or c.source_location} for c in candidates
    ]


class BridgeStage(Stage):
    name = "bridge"

    def skip_reason(self, state: PipelineState) -> str:
        if not state.options.retrieval.bridge:
            return "off (option retrieval.bridge)"
        if state.query.retrieval_only:
            return "retrieval only: the question's own ranking"
        if not state.kept:
            return "no passage cleared the relevance floor"
        return ""

    def stream(
        self, state: PipelineState, step: TraceStep
    ) -> Generator[PipelineEvent, None, PipelineState]:
        details = cast(BridgeDetails, step.details)
        kept = list(state.kept)
        bridge = bridge_for(state.answer_question, kept)
        if bridge is None:
            details.update(
                {
                    "hopped": False,
                    "reason": "no term of the question is defined or named in the evidence",
                }
            )
            return state
        o = state.options.corrective
        verdict = score_gate(kept, strong=o.gate_strong, weak=o.gate_weak) or (
            grade_offline(state.answer_question, kept, upper=o.upper, lower=o.lower).verdict
        )
        details.update(
            {
                "term": bridge.term,
                "definition": bridge.definition,
                "chunk_id": bridge.chunk_id,
                "probe": bridge.probe,
                "verdict": verdict,
                "kept_before": _listing(kept),
            }
        )
        if verdict == "incorrect":
            details.update({"hopped": False, "reason": "the evidence was judged irrelevant"})
            return state
        question = state.search_question
        hop = state.with_(
            standalone=bridge.resolved or state.standalone,
            probes=(question, bridge.probe),
            probe_kind="fusion",
        )
        steps: list[dict[str, Any]] = []
        for stage in (RetrieveStage(), FuseStage(), RerankStage()):
            stage.node = f"bridge:{stage.name}"
            hop, sub = yield from stage.run(hop)
            if sub.stage == "retrieve":
                # The search's own trouble is news; the reranker's notes (a cross-encoder
                # not configured) repeat the rerank step's and stay on the hop's row.
                step.warnings += sub.warnings
            steps.append(
                {
                    "stage": sub.stage,
                    "duration_ms": round(sub.duration_ms, 3),
                    "summary": [s for s in stage.summary(sub.details) if s],
                    "warnings": list(sub.warnings),
                }
            )
        details["hop"] = steps
        if not hop.kept:
            details.update(
                {"hopped": False, "reason": "the bridge probe's search kept no passage", "kept": []}
            )
            return state
        details.update({"hopped": True, "kept": _listing(hop.kept)})
        if bridge.resolved:
            details["resolved"] = bridge.resolved
        return hop

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(BridgeDetails, details)
        if not d.get("hopped"):
            return [str(d.get("reason", ""))]
        named = d.get("term") or d.get("definition", "")
        return [
            f"{str(named)[:40]!r} → probe {str(d.get('probe', ''))[:60]!r}",
            f"{len(d.get('kept', []))} kept",
        ]
