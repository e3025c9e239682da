"""Refine (corrective, ambiguous evidence): keep the relevant chunks and sentences.

Chunks the grader scored below 0.5 and below half the best chunk's relevance
are dropped (never the best one; none for a retrieval-only ranking), and each
remaining chunk is narrowed to the span from its first to its last sentence that
shares a word with the question (a matching heading brings its section) (offsets follow, so citations still point at the
exact text). The working set is never emptied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from query_app.pipeline.lexical import content_terms, split_sentences
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import Candidate, TraceStep

KEEP_RELEVANCE = 0.5


def narrow(candidate: Candidate, wanted: set[str]) -> Candidate:
    """The candidate cut to its relevant sentences (unchanged when none or offsets differ)."""
    text = candidate.text
    if candidate.char_end - candidate.char_start != len(text):
        return candidate
    sentences = split_sentences(text)
    relevant = [i for i, s in enumerate(sentences) if wanted & set(content_terms(s.text))]
    if not relevant:
        return candidate
    # A heading that matches ("Chunking strategies" for "How are chunk sizes counted?")
    # is about what follows it: the span runs to the end of its section, so a narrowed
    # passage is never a title alone (the one-line answer it made).
    last = relevant[-1]
    if sentences[last].title:
        while last + 1 < len(sentences) and not sentences[last + 1].title:
            last += 1
    start, end = sentences[relevant[0]].start, sentences[last].end
    if start == 0 and end >= len(text.rstrip()):
        return candidate
    return dataclasses.replace(
        candidate,
        text=text[start:end],
        char_start=candidate.char_start + start,
        char_end=candidate.char_start + end,
    )


class RefineStage(Stage):
    name = "refine"

    def skip_reason(self, state: PipelineState) -> str:
        return "" if state.kept else "no evidence to refine"

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        relevance: Mapping[str, float] = state.notes.get("relevance") or {}
        kept = list(state.kept)
        top = max((relevance.get(c.chunk_id, 0.0) for c in kept), default=0.0)
        if state.query.retrieval_only:
            # A ranking is asked for: every passage stays, each narrowed.
            chosen = kept
        else:
            # Chunks far below the best one (under half its relevance, and under the
            # absolute threshold) are dropped; the best one always stays.
            chosen = [
                c for c in kept if relevance.get(c.chunk_id, 1.0) >= min(KEEP_RELEVANCE, top * 0.5)
            ] or [max(kept, key=lambda c: relevance.get(c.chunk_id, 0.0))]
        wanted = set(content_terms(state.answer_question))
        # The best passage stays whole: a misspelt or paraphrased question shares few
        # words with the very sentence that answers it, which narrowing would cut off.
        best = max(chosen, key=lambda c: relevance.get(c.chunk_id, 0.0)).chunk_id
        narrowed = [c if c.chunk_id == best else narrow(c, wanted) for c in chosen]
        chars_before = sum(len(c.text) for c in chosen)
        chars_after = sum(len(c.text) for c in narrowed)
        step.details.update(
            {
                "chunks_in": len(kept),
                "chunks_kept": len(narrowed),
                "chars_before": chars_before,
                "chars_after": chars_after,
                "threshold": KEEP_RELEVANCE,
            }
        )
        return state.with_(kept=tuple(narrowed))

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        return [
            f"{details.get('chunks_in', '?')} → {details.get('chunks_kept', '?')} chunks",
            f"{details.get('chars_after', '?')} chars",
        ]
