"""Evaluate (corrective): grade the evidence against the original question.

The verdict (correct / ambiguous / incorrect) is the step's ``outcome``, which
picks the graph's next edge; every kept chunk gets a relevance in 0..1. A score
gate answers without the grader when the top passage is clearly strong or
clearly weak. With a chat model the grader is one structured call; a malformed
reply falls back to the offline grader with a warning. An "incorrect" verdict
keeps the best evidence any earlier iteration found, so a worse rewrite never
replaces a better retrieval. Evidence that defines a term of the question (a
glossary line: "Tier B: the Priority plan"), or names a thing the question only
describes ("the dock that a Q3 uses": "QD-2"), makes the outcome ``bridge`` once:
the rewrite node searches those words next to the question (multi-hop). After the
hops of a multi-part question, each part's best passage is kept right after the
best passage overall. At the adaptive single shot's node (``single:evaluate``,
always offline), "incorrect" evidence makes the outcome ``retry`` once: one
rewritten search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from query_app.pipeline.bridging import bridge_for
from query_app.pipeline.corrective import Grade, grade, grade_offline, score_gate
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import Candidate, TraceStep

GRADERS = ("auto", "offline", "llm")
# What the evaluate node may decide: a verdict, or a bridge hop before answering.
OUTCOMES = ("correct", "ambiguous", "incorrect", "bridge", "retry")


def cover_parts(
    kept: Sequence[Candidate], leads: Sequence[Candidate], fused: Sequence[Candidate]
) -> tuple[list[Candidate], list[str]]:
    """``kept`` with each part's best passage right after the best passage overall.

    A multi-part question is answered from every part's evidence: the fusion ranks
    a passage found by two lists (the question's and its first part's) above one
    that only a later part found, however well, and the cut to the top passages
    may then drop that part altogether. The set keeps its size (the weakest go);
    nothing is added to an empty set (the relevance floor emptied it). Returns the
    new set and the chunk ids moved up or brought in.
    """
    if not kept or not leads:
        return list(kept), []
    known = {c.chunk_id: c for c in fused} | {c.chunk_id: c for c in kept}
    head = [kept[0]]
    for lead in leads:
        if all(c.chunk_id != lead.chunk_id for c in head):
            head.append(known.get(lead.chunk_id, lead))
    ids = {c.chunk_id for c in head}
    merged = [*head, *(c for c in kept if c.chunk_id not in ids)][: len(kept)]
    old_rank = {c.chunk_id: i for i, c in enumerate(kept)}
    promoted = [c.chunk_id for i, c in enumerate(merged) if old_rank.get(c.chunk_id, len(kept)) > i]
    return merged, promoted


class EvaluateStage(Stage):
    name = "evaluate"
    listed = frozenset({"relevance"})

    def chat_use(self, options: QueryOptions) -> str:
        return "its evidence grader" if options.corrective.grader != "offline" else ""

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        o = state.options.corrective
        question = state.answer_question
        kept = list(state.kept)
        if state.notes.get("part_leads") and state.notes.get("part_probes") == state.probes:
            # The hops' evidence, merged: every part of the question keeps its best passage.
            kept, promoted = cover_parts(kept, state.notes["part_leads"], state.candidates)
            if promoted:
                step.details["part_leads_promoted"] = promoted
        gated = score_gate(kept, strong=o.gate_strong, weak=o.gate_weak)
        calls_before = state.chat_calls
        result: Grade
        if gated:
            # The gate still scores each chunk (no model call) for refine.
            result = grade_offline(question, kept, upper=o.upper, lower=o.lower)
            result.verdict, result.source = gated, "gate"
            result.reason = (
                "no passage cleared the relevance floor"
                if not kept
                else f"score gate: top cosine is clearly {'strong' if gated == 'correct' else 'weak'}"
            )
        else:
            # The adaptive single shot is checked offline: never a model call there.
            single = self.node.startswith("single:")
            chat = state.chat if o.grader != "offline" and not single else None
            if o.grader == "llm" and chat is None and not single:
                step.warn("grader 'llm' asked for but no chat model is configured; graded offline")
            result = grade(question, kept, chat=chat, upper=o.upper, lower=o.lower)
        step.warnings += result.warnings
        top = max(result.relevance.values(), default=0.0)
        notes: dict[str, Any] = {**state.notes, "verdict": result.verdict}
        notes["relevance"] = result.relevance
        best_top = float(state.notes.get("best_top", -1.0))
        if kept and top > best_top:
            notes["best_top"], notes["best_kept"] = top, tuple(kept)
        elif result.verdict == "incorrect" and state.notes.get("best_kept"):
            # An earlier iteration found better evidence: keep it for the answer.
            kept = list(state.notes["best_kept"])
            step.details["kept_from_earlier"] = True
        outcome = result.verdict
        single = self.node.startswith("single:")
        if single and outcome == "incorrect" and state.iteration == 0 and o.max_iterations:
            # The adaptive single shot's one correction: a rewritten search (graph.py).
            outcome = "retry"
        # Multi-hop: evidence that defines a term of the question (a glossary line) sends
        # its definition to the rewrite node once, as a bridge probe (bridging.py).
        # A question that describes a thing instead of naming it ("the dock that a Q3
        # uses") searches the name the evidence gives it ("QD-2") the same way.
        bridge = (
            bridge_for(question, kept)
            if not state.notes.get("bridged") and state.iteration < o.max_iterations
            else None
        )
        if bridge is not None:
            notes.update(bridged=True, bridge_probe=bridge.probe, bridge_resolved=bridge.resolved)
            outcome = "bridge" if result.verdict != "incorrect" else outcome
            step.details["bridge"] = {
                "term": bridge.term,
                "definition": bridge.definition,
                "probe": bridge.probe,
                "resolved": bridge.resolved,
                "chunk_id": bridge.chunk_id,
            }
        step.details.update(
            {
                "outcome": outcome,
                "verdict": result.verdict,
                "grader": result.source,
                "reason": result.reason,
                "question": question,
                "top_relevance": round(top, 4),
                "relevance": [
                    {"chunk_id": cid, "relevance": score} for cid, score in result.relevance.items()
                ],
                "model_calls": state.chat_calls - calls_before,
            }
        )
        return state.with_(kept=tuple(kept), notes=notes)

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [
            str(details.get("verdict", "")) + (" · bridge" if details.get("bridge") else ""),
            f"by {details.get('grader', '?')}",
            f"top {details.get('top_relevance', 0)}",
        ]
