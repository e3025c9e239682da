"""Fuse and assemble semantics on hand-made candidates (no database needed)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from query_app.pipeline.assembly import assemble, edges_layout, estimate_tokens
from query_app.pipeline.extractive import extract
from query_app.pipeline.fusion import fuse
from query_app.pipeline.groundedness import check_heuristic
from query_app.pipeline.options import ContextOptions
from query_app.pipeline.prompts import answer_messages
from query_app.pipeline.types import Candidate


def cand(cid: str, score: float, probe: int = 0, rank: int = 1, text: str = "", **kw) -> Candidate:
    return Candidate(
        chunk_id=cid,
        source_id=1,
        source_location=f"/docs/{cid}.md",
        source_title="",
        text=text or f"Passage {cid} about backups.",
        char_start=0,
        char_end=len(text or f"Passage {cid} about backups."),
        retrieval_score=score,
        probe_ranks={probe: rank},
        **kw,
    )


def test_union_keeps_the_maximum_score_of_duplicates():
    probe0 = [cand("a", 0.9, 0, 1), cand("b", 0.5, 0, 2)]
    probe1 = [cand("b", 0.8, 1, 1), cand("c", 0.4, 1, 2)]
    result = fuse([probe0, probe1], kind="union", rrf_k=60)
    assert [(c.chunk_id, c.fused_score) for c in result.candidates] == [
        ("a", 0.9),
        ("b", 0.8),
        ("c", 0.4),
    ]
    assert result.candidates[1].probe_ranks == {0: 2, 1: 1}
    assert result.details == {
        "method": "union-max",
        "probes": 2,
        "in": 4,
        "out": 3,
        "duplicates": 1,
        "mmr": False,
    }


def test_rag_fusion_ranks_by_reciprocal_rank_fusion_over_probes():
    probe0 = [cand("a", 0.99, 0, 1), cand("b", 0.98, 0, 2), cand("c", 0.97, 0, 3)]
    probe1 = [cand("c", 0.2, 1, 1), cand("b", 0.1, 1, 2)]
    probe2 = [cand("c", 0.3, 2, 1)]
    result = fuse([probe0, probe1, probe2], kind="fusion", rrf_k=60)
    fused = {c.chunk_id: c.fused_score for c in result.candidates}
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 62)
    assert fused["a"] == pytest.approx(1 / 61)
    assert [c.chunk_id for c in result.candidates] == ["c", "b", "a"]


def test_mmr_moves_a_near_duplicate_down():
    base = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    twin = np.array([0.99, 0.05, 0.0], dtype=np.float32)
    other = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    candidates = [
        cand("a", 0.9, rank=1, embedding=base),
        cand("a-twin", 0.85, rank=2, embedding=twin),
        cand("b", 0.8, rank=3, embedding=other),
    ]
    plain = fuse([candidates], kind="single", rrf_k=60)
    assert [c.chunk_id for c in plain.candidates] == ["a", "a-twin", "b"]
    diverse = fuse([candidates], kind="single", rrf_k=60, mmr=True, mmr_lambda=0.7)
    assert [c.chunk_id for c in diverse.candidates] == ["a", "b", "a-twin"]
    assert diverse.details["mmr"] == {"lambda": 0.7, "similarity": "embedding-cosine"}


def test_mmr_falls_back_to_word_overlap_without_embeddings():
    candidates = [
        cand("a", 0.9, text="Backup jobs run nightly on the storage server."),
        cand("b", 0.85, text="Backup jobs run nightly on the storage server cluster."),
        cand("c", 0.8, text="Invoices are emailed on the first of the month."),
    ]
    result = fuse([candidates], kind="single", rrf_k=60, mmr=True)
    assert [c.chunk_id for c in result.candidates] == ["a", "c", "b"]
    assert result.details["mmr"]["similarity"] == "word-jaccard"


def test_edges_layout():
    assert edges_layout(6) == [0, 2, 4, 5, 3, 1]
    assert edges_layout(5) == [0, 2, 4, 3, 1]
    assert edges_layout(1) == [0]
    assert edges_layout(0) == []


@pytest.mark.parametrize("seed", range(5))
def test_the_token_budget_is_never_overrun(seed):
    rng = random.Random(seed)
    candidates = [
        cand(f"c{i}", 1 - i / 100, text=" ".join(["word"] * rng.randint(5, 300))) for i in range(20)
    ]
    budget = rng.randint(60, 1500)
    context, details, _ = assemble(candidates, options=ContextOptions(max_tokens=budget))
    messages = answer_messages(question="q", passages=context.blocks())
    prompt_passages = messages[1]["content"].split("<question>")[0]
    assert estimate_tokens(prompt_passages, 4.0) <= budget
    assert details["tokens"] <= budget
    assert details["chunks"] + details["dropped_by_budget"] == 20
    assert [p.marker for p in context.passages] == list(range(1, len(context.passages) + 1))
    scores = [p.candidate.retrieval_score for p in context.passages]
    assert scores == sorted(scores, reverse=True)


def test_extractive_answer_prefers_sentences_sharing_the_question_words():
    candidates = [
        cand("a", 0.9, text="Our office is in Lyon. Backups run nightly at two. Lunch is at noon."),
        cand("b", 0.8, text="Restores take an hour. Backups are kept for ninety days."),
    ]
    context, _, _ = assemble(candidates, options=ContextOptions())
    found = extract("When do backups run?", context, encode=None, max_sentences=1, floor=None)
    assert found.text() == "Backups run nightly at two. [1]"
    assert found.details["sentences"] == 1


@pytest.mark.parametrize(
    "title",
    [
        "## Backups run nightly at two\n",  # a Markdown heading, right above its text
        "Backups run nightly at two\n\n",  # a short line standing alone
    ],
)
def test_extractive_answer_never_quotes_a_title(title):
    text = title + "Backups of the database run nightly at two and are kept for ninety days."
    context, _, _ = assemble([cand("a", 0.9, text=text)], options=ContextOptions())
    found = extract(
        "When do backups run nightly at two?", context, encode=None, max_sentences=2, floor=None
    )
    answer = found.text()
    # The title shares more words with the question, but it is not an answer;
    # it does not run into the sentence under it either.
    assert answer == "Backups of the database run nightly at two and are kept for ninety days. [1]"


def test_heuristic_groundedness_flags_unsupported_sentences():
    candidates = [cand("a", 0.9, text="Backups run nightly at two and are kept for ninety days.")]
    context, _, _ = assemble(candidates, options=ContextOptions())
    good = check_heuristic("Backups run nightly at two [1].", context, min_support=0.6)
    bad = check_heuristic(
        "Backups run nightly [1]. Restores are instant and free of charge [1].",
        context,
        min_support=0.6,
    )
    assert (good.grounded, good.score, good.unsupported) == (True, 1.0, [])
    assert bad.grounded is False
    assert bad.score == 0.5
    assert bad.unsupported == ["Restores are instant and free of charge."]


def test_heuristic_groundedness_does_not_judge_markdown_headings():
    context, _, _ = assemble(
        [cand("a", 0.9, text="Backups run nightly at two.")], options=ContextOptions()
    )
    result = check_heuristic(
        "## Schedule overview\nBackups run nightly at two [1].", context, min_support=0.6
    )
    assert (result.grounded, result.score, result.unsupported) == (True, 1.0, [])
