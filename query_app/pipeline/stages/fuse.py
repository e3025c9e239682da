"""Stage 3, fuse: one ranked candidate list from the probes' lists (max, union or RRF; MMR)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from query_app.pipeline.fusion import fuse
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import Candidate, TraceStep

# Candidates whose place in every leg the trace keeps.
RANKING_IN_TRACE = 50


# "in" and "out": candidates before and after fusion (set by fusion itself).
FuseDetails = TypedDict(
    "FuseDetails",
    {"method": str, "in": int, "out": int, "ranking": list[dict[str, Any]], "cache": str},
    total=False,
)


def ranking_entry(candidate: Candidate) -> dict[str, Any]:
    """Where a candidate stood in each leg and probe (trace view, evaluation)."""
    return {
        "chunk_id": candidate.chunk_id,
        "legs": {name: hit.as_dict() for name, hit in candidate.legs.items()},
        "retrieval_score": candidate.retrieval_score,
        "fused_score": candidate.fused_score,
        "probe_ranks": {str(k): v for k, v in candidate.probe_ranks.items()},
    }


class FuseStage(Stage):
    name = "fuse"
    cacheable = True

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options
        fused = fuse(
            list(state.per_probe),
            kind=state.probe_kind,
            rrf_k=o.retrieval.rrf_k,
            mmr=o.fusion.mmr,
            mmr_lambda=o.fusion.mmr_lambda,
        )
        step.details.update(fused.details)
        # Where each candidate stood in each leg, for the trace view and for
        # evaluation (retrieved but ranked out vs never retrieved).
        details: FuseDetails = {
            "ranking": [ranking_entry(c) for c in fused.candidates[:RANKING_IN_TRACE]]
        }
        step.details.update(details)
        for cand in fused.candidates:
            cand.embedding = None  # not needed downstream, not cached
        return state.with_(candidates=tuple(fused.candidates), per_probe=())

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        d = cast(FuseDetails, details)
        return [f"{d.get('in', '?')} → {d.get('out', '?')}", str(d.get("method", ""))]
