"""Hops (multi-hop, after decompose): retrieve sub-question by sub-question, checking as it goes.

The question itself is searched first; then each sub-question in turn. After
each hop, the evidence gathered so far is checked against every sub-question left
(keyword coverage, the offline grader's thresholds): when it already covers them,
their hops are not searched (stopped early) and the passages that cover them
rank in the fusion as their lists. After a hop, the offline
grader judges whether the hop's own passages suffice for its sub-question; when
they are "incorrect" the sub-question is searched once more with an offline
rewrite (pseudo-relevance feedback or its keywords) and the better of the two
is kept. Every hop, check and re-probe is in the trace; the fuse node then
merges the lists (RRF), so the answer can cite across documents, and the evaluate
node keeps each part's best passage (``part_leads``) in the evidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from query_app.pipeline.corrective import grade_offline, part_words, rewrite_offline
from query_app.pipeline.lexical import content_terms
from query_app.pipeline.options import CorrectiveOptions
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.stages.retrieve import RetrieveStage
from query_app.pipeline.types import Candidate, TraceStep

# A later part is covered when a passage already found answers it as a whole and
# holds half of its own words (what it asks beyond the first part's subject).
PART_COVERAGE = 0.5


def evidence_covering(
    question: str,
    gathered: Sequence[Candidate],
    *,
    options: CorrectiveOptions,
    depth: int,
    own: str = "",
) -> list[Candidate]:
    """The passages found for other probes that already answer ``question``, best first.

    Those the offline grader finds "correct" on their own (none: not covered) and,
    when ``own`` names what the question adds to a borrowed subject, that hold
    ``PART_COVERAGE`` of those words too: the subject alone is found by the first
    part's search by construction. Their cosines and rerank scores were measured
    against other probes, so only the question's words found in them count here.
    """
    unique = list({c.chunk_id: c for c in reversed(gathered)}.values())[::-1]
    plain = [
        dataclasses.replace(c, vector_similarity=None, keyword_coverage=None, rerank_score=None)
        for c in unique
    ]
    grade = grade_offline(question, plain, upper=options.upper, lower=options.lower)
    if grade.verdict != "correct":
        return []
    ranked = sorted(unique, key=lambda c: -grade.relevance[c.chunk_id])
    covering = [c for c in ranked if grade.relevance[c.chunk_id] >= options.upper]
    if own:
        wanted = set(content_terms(own))
        covering = [
            c
            for c in covering
            if wanted
            and len(wanted & set(content_terms(c.text + " " + c.source_title))) / len(wanted)
            >= PART_COVERAGE
        ]
    return covering[: max(depth, 1)]


def covered_only(hops: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [h for h in hops if h.get("skipped")]


class HopsStage(Stage):
    name = "hops"
    listed = frozenset({"hops"})

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        question = state.search_question
        subs = [p for p in dict.fromkeys(state.probes) if p != question]
        c = state.options.corrective
        depth = state.options.rerank.top_n
        retrieve = RetrieveStage(node=self.node)

        def search(probe: str) -> list[Candidate]:
            scratch = TraceStep(stage="retrieve")
            found = retrieve.execute(state.with_(probes=(probe,)), scratch)
            step.warnings.extend(w for w in scratch.warnings if w not in step.warnings)
            return list(found.per_probe[0])

        def top(found: Sequence[Candidate], sub: str) -> tuple[str, float]:
            grade = grade_offline(sub, found[:depth], upper=c.upper, lower=c.lower)
            return grade.verdict, round(max(grade.relevance.values(), default=0.0), 4)

        probes = [question]
        lists = [search(question)]
        gathered = list(lists[0])
        hops: list[dict[str, Any]] = []
        stopped_early = False
        reprobes = 0
        for index, sub in enumerate(subs):
            remaining = subs[index:]
            # After a hop (the first sub-question is always searched): does the
            # evidence so far already answer every sub-question left?
            # A part is judged by its own words too: the subject it borrowed from the
            # first part is covered by the first hop's evidence by construction.
            covering = (
                [
                    evidence_covering(
                        q, gathered, options=c, depth=depth, own=part_words(q, subs[0])
                    )
                    for q in remaining
                ]
                if index
                else []
            )
            if covering and all(covering):
                # Every sub-question left is answered by what was found: no more
                # searches; each one's passages still rank in the fusion.
                for q, ranked in zip(remaining, covering, strict=True):
                    hops.append(
                        {"sub_question": q, "skipped": "covered by the evidence already found"}
                    )
                    probes.append(q)
                    lists.append(ranked)
                stopped_early = True
                break
            found = search(sub)
            verdict, relevance = top(found, sub)
            hop: dict[str, Any] = {
                "sub_question": sub,
                "probe": sub,
                "verdict": verdict,
                "top_relevance": relevance,
                "candidates": len(found),
            }
            if verdict == "incorrect":
                probe, how = rewrite_offline(sub, found, attempt=1, tried=(sub, question))
                again = search(probe)
                verdict2, relevance2 = top(again, sub)
                reprobes += 1
                hop["reprobe"] = {
                    "probe": probe,
                    "how": how,
                    "verdict": verdict2,
                    "top_relevance": relevance2,
                }
                if relevance2 > relevance:
                    found = again
                    hop["probe"] = probe
            probes.append(hop["probe"])
            lists.append(found)
            gathered += found
            hops.append(hop)
        # Each part's best passage: the evaluate node keeps it in the evidence, which
        # the fusion alone does not promise (the question's own list and the first
        # part's share their passages, so both lists outvote a later part's).
        leads = tuple(found[0] for found in lists[1:] if found)
        step.details.update(
            {
                "hops": hops,
                "searched": len(probes) - len(covered_only(hops)) + reprobes,
                "stopped_early": stopped_early,
                "reprobes": reprobes,
                "candidates": sum(len(found) for found in lists),
            }
        )
        return state.with_(
            probes=tuple(probes),
            per_probe=tuple(lists),
            probe_kind="fusion" if len(lists) > 1 else "single",
            notes={**state.notes, "part_leads": leads, "part_probes": tuple(probes)},
        )

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        parts = [f"{details.get('searched', 0)} searches"]
        if details.get("stopped_early"):
            parts.append("stopped early")
        if details.get("reprobes"):
            parts.append(f"{details['reprobes']} re-probe(s)")
        return parts
