#!/usr/bin/env python
"""Calibrate the vector leg's relevance floor (``floor.min_vector_similarity``).

An answer is declined when the best passage's cosine similarity to the
question is below the floor. This measures, for the default embedder
(all-MiniLM-L6-v2), the best cosine each question reaches over a whole corpus
(exact search), for:

- answerable questions: BEIR SciFact (300 claims) and PubMedQA (500
  questions) against their judged abstracts plus ``--extra`` random ones
  (``--full``: the whole corpora, 5,183 and 1,000 abstracts) — a refusal here
  is a false refusal;
- off-topic questions (written below) against both corpora — a refusal is right.

It prints both rates for a range of floors and the highest floor (on a 0.05
grid) whose false-refusal rate stays at or below the target on every dataset.
With ``--keyword`` it also calibrates ``floor.min_keyword_coverage`` (the
IDF-weighted share of the question's terms found in the best keyword hit) on
the SciFact collection that ``benchmarks/keyword_scifact.py --keep`` leaves in
the benchmark database. With ``--units`` it calibrates the sentence path
(``floor.min_unit_similarity``): a question whose best passage is below the
vector floor is still answered when one unit (sentence, list item, row) of its
five best passages, read as the extractive answer reads it, is this near the
question on its own; it prints, per unit floor, the answerable questions so
rescued and the off-topic ones so let through.

Usage: .venv/bin/python benchmarks/relevance_floor.py [--target 0.05] [--keyword] [--units]
Embeddings are cached under var/bench/ so reruns are fast.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path

import numpy as np
from _django import django_setup

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT.parent / "shared" / "eval"
CACHE = ROOT / "var" / "bench"

OFF_TOPIC = [
    "What is the capital of Australia?",
    "How do I bake sourdough bread at home?",
    "Who won the football world cup in 1998?",
    "What is the best way to learn the guitar?",
    "How many moons does Jupiter have?",
    "What is the boiling point of mercury at sea level?",
    "Recommend a good science fiction novel.",
    "How do I change a flat tyre on a bicycle?",
    "What time zone is Tokyo in?",
    "How do I configure a reverse proxy in nginx?",
    "What is the plot of Hamlet?",
    "How much does a one-way train ticket from Paris to Berlin cost?",
    "What is the difference between a crocodile and an alligator?",
    "Write a haiku about autumn leaves.",
    "How do I reset my router password?",
    "Which programming language should I learn first?",
    "What are the rules of chess castling?",
    "When was the Eiffel Tower built?",
    "How do I make my houseplants grow faster?",
    "What is the exchange rate between the euro and the yen?",
    "Tell me a joke about penguins.",
    "How do I file my income tax return?",
    "What is the tallest mountain in Africa?",
    "How do I remove a red wine stain from a carpet?",
    "What does a product manager do?",
    "How do I install Python packages with pip?",
    "Where can I watch the northern lights in Norway?",
    "What is a good name for a golden retriever puppy?",
    "How long should I boil an egg for a soft yolk?",
    "Explain the offside rule in football.",
    "What are the opening hours of the Louvre?",
    "How do solar panels convert light into electricity?",
    "What is the speed of sound in air?",
    "How do I write a cover letter for a job application?",
    "What is the population of Canada?",
    "Which planets have rings?",
    "How do I cook risotto?",
    "What is the meaning of the word serendipity?",
    "How do I set up two-factor authentication on my email?",
    "What are the main causes of inflation in an economy?",
]


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()]


def embed(texts: list[str], name: str) -> np.ndarray:
    """Embeddings of ``texts`` with the default embedder, cached on disk."""
    from collections_app.embedding import get_embedder

    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"{name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = get_embedder().encode(texts)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def best_cosines(questions: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    # Vectors are L2-normalised: the dot product is the cosine.
    return (questions @ corpus.T).max(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=float, default=0.05, help="max false-refusal rate")
    parser.add_argument("--keyword", action="store_true", help="also calibrate keyword coverage")
    parser.add_argument(
        "--full", action="store_true", help="embed the whole corpora (about an hour on 2 CPUs)"
    )
    parser.add_argument(
        "--units", action="store_true", help="also calibrate the one-sentence floor"
    )
    parser.add_argument(
        "--extra", type=int, default=100, help="random unjudged abstracts added per corpus"
    )
    args = parser.parse_args()
    django_setup(db_name="ragsite_bench")

    scifact_corpus = load_jsonl(EVAL / "scifact" / "corpus.jsonl")
    scifact_rels = [
        line.split()[:2]
        for line in (EVAL / "scifact" / "qrels" / "test.tsv").open().readlines()[1:]
    ]
    scifact_qids = {qid for qid, _ in scifact_rels}
    scifact_questions = [
        q["text"]
        for q in load_jsonl(EVAL / "scifact" / "queries.jsonl")
        if q["_id"] in scifact_qids
    ]
    pubmed_corpus = load_jsonl(EVAL / "pubmedqa" / "corpus.jsonl")
    pubmed_queries = load_jsonl(EVAL / "pubmedqa" / "queries.jsonl")
    pubmed_questions = [q["text"] for q in pubmed_queries]
    if not args.full:
        # The judged abstracts plus a random sample: the best cosine over a
        # subset is a lower bound of the best over the corpus, so the measured
        # false-refusal rate is an upper bound (the floor errs on the safe side).
        rng = random.Random(0)
        relevant = {did for _, did in scifact_rels}
        others = [d for d in scifact_corpus if d["_id"] not in relevant]
        scifact_corpus = [d for d in scifact_corpus if d["_id"] in relevant] + rng.sample(
            others, min(args.extra, len(others))
        )
        asked = {q["_id"] for q in pubmed_queries}
        others = [d for d in pubmed_corpus if d["_id"] not in asked]
        pubmed_corpus = [d for d in pubmed_corpus if d["_id"] in asked] + rng.sample(
            others, min(args.extra, len(others))
        )
    print(
        f"corpora: SciFact {len(scifact_corpus)} abstracts, PubMedQA {len(pubmed_corpus)}",
        flush=True,
    )

    print("embedding (cached after the first run) ...", flush=True)
    sc = embed([f"{d['title']}\n\n{d['text']}".strip() for d in scifact_corpus], "scifact-corpus")
    pc = embed([f"{d['title']}\n\n{d['text']}".strip() for d in pubmed_corpus], "pubmedqa-corpus")
    sq = embed(scifact_questions, "scifact-queries")
    pq = embed(pubmed_questions, "pubmedqa-queries")
    oq = embed(OFF_TOPIC, "off-topic")

    answerable = {
        "scifact": best_cosines(sq, sc),
        "pubmedqa": best_cosines(pq, pc),
    }
    off_topic = {
        "scifact": best_cosines(oq, sc),
        "pubmedqa": best_cosines(oq, pc),
    }
    for name, values in {
        **answerable,
        **{f"off-topic/{k}": v for k, v in off_topic.items()},
    }.items():
        p = np.percentile(values, [1, 5, 50, 95, 99])
        print(
            f"{name:<18} best cosine: p1 {p[0]:.3f}  p5 {p[1]:.3f}  p50 {p[2]:.3f}  "
            f"p95 {p[3]:.3f}  p99 {p[4]:.3f}  max {values.max():.3f}"
        )

    print(
        f"\n{'floor':>6} {'false refusals scifact':>24} {'pubmedqa':>9} {'off-topic declined':>20}"
    )
    chosen = None
    for floor in np.arange(0.10, 0.56, 0.05):
        refusals = {k: float((v < floor).mean()) for k, v in answerable.items()}
        declined = float(np.concatenate([v < floor for v in off_topic.values()]).mean())
        print(
            f"{floor:>6.2f} {refusals['scifact']:>24.1%} {refusals['pubmedqa']:>9.1%} "
            f"{declined:>20.1%}"
        )
        if all(r <= args.target for r in refusals.values()):
            chosen = round(float(floor), 2)
    print(f"\nhighest floor with false refusals <= {args.target:.0%} on every dataset: {chosen}")
    if args.keyword:
        keyword_floor(scifact_questions, args.target)
    if args.units:
        sets = {
            "scifact": (scifact_questions, sq, scifact_corpus, sc),
            "pubmedqa": (pubmed_questions, pq, pubmed_corpus, pc),
        }
        unit_floor(sets, OFF_TOPIC, oq)


def unit_floor(
    sets: dict[str, tuple[list[str], np.ndarray, list[dict], np.ndarray]],
    off_topic: list[str],
    off_vectors: np.ndarray,
    *,
    top: int = 5,
) -> None:
    """The sentence path at the default passage floor: for each question whose best
    passage is below it, the best unit of its ``top`` passages."""
    from collections_app.embedding.unit_vectors import ChunkUnits, unit_texts
    from query_app.pipeline.options import DEFAULT_MIN_VECTOR_SIMILARITY as passage_floor

    def best_units(texts: list[str], vectors: np.ndarray, docs: list[dict], corpus: np.ndarray):
        """Best unit cosine of each question below the passage floor (by index)."""
        sims = vectors @ corpus.T
        below = [i for i in range(len(texts)) if sims[i].max() < passage_floor]
        per_question = {
            i: [
                t
                for d in np.argsort(-sims[i])[:top]
                for t in unit_texts(
                    ChunkUnits(text=docs[d]["text"], title=docs[d]["title"], location="")
                )
            ]
            for i in below
        }
        unique = list(dict.fromkeys(t for ts in per_question.values() for t in ts))
        if not unique:
            return {}
        unit_vectors = dict(zip(unique, embed(unique, "units"), strict=True))
        return {
            i: max(float(unit_vectors[t] @ vectors[i]) for t in ts) if ts else 0.0
            for i, ts in per_question.items()
        }

    print(f"\nsentence path below the passage floor {passage_floor} (top {top} passages)")
    rescued: dict[str, dict[int, float]] = {}
    let_through: dict[str, dict[int, float]] = {}
    for name, (texts, vectors, docs, corpus) in sets.items():
        rescued[name] = best_units(texts, vectors, docs, corpus)
        let_through[name] = best_units(off_topic, off_vectors, docs, corpus)
        print(
            f"{name}: {len(rescued[name])} of {len(texts)} answerable and "
            f"{len(let_through[name])} of {len(off_topic)} off-topic questions below it"
        )
    off_total = len(off_topic) * len(sets)
    print(
        f"{'unit floor':>10} {'false refusals scifact':>24} {'pubmedqa':>9} "
        f"{'off-topic declined':>20} {'let through by a unit':>22}"
    )
    for floor in np.arange(0.30, 0.56, 0.05):
        refusals = {
            name: sum(best < floor for best in rescued[name].values()) / len(sets[name][0])
            for name in sets
        }
        through = sum(best >= floor for values in let_through.values() for best in values.values())
        declined = sum(best < floor for values in let_through.values() for best in values.values())
        print(
            f"{floor:>10.2f} {refusals['scifact']:>24.1%} {refusals['pubmedqa']:>9.1%} "
            f"{declined / off_total:>20.1%} {through:>22}"
        )
    for name, values in let_through.items():
        for i, best in sorted(values.items(), key=lambda kv: -kv[1])[:3]:
            print(f"  nearest off-topic unit on {name}: {best:.3f}  {off_topic[i]!r}")


def keyword_floor(questions: list[str], target: float) -> None:
    """Best keyword coverage per question on the SciFact benchmark collection."""
    from collections_app.models import Collection
    from query_app.pipeline.keyword import keyword_search
    from query_app.pipeline.options import RetrievalOptions

    collection = Collection.objects.filter(slug="bench-scifact-keyword").first()
    if collection is None:
        print("\nno SciFact collection: run benchmarks/keyword_scifact.py --keep first")
        return
    options = RetrievalOptions()

    def best(texts: list[str]) -> np.ndarray:
        values = []
        for text in texts:
            hits = keyword_search(collection=collection, text=text, k=10, options=options).hits
            values.append(max((h.coverage for h in hits), default=0.0))
        return np.array(values)

    answerable, off_topic = best(questions), best(OFF_TOPIC)
    found = answerable > 0
    print(
        f"\nclaims without any keyword hit: {float((~found).mean()):.1%} "
        "(no candidates: not the floor's doing)"
    )
    header = f"{'coverage floor':>14} {'refused by the floor':>22} {'off-topic declined':>20}"
    print(header)
    chosen = None
    for floor in np.arange(0.1, 0.96, 0.05):
        refused = float(((answerable < floor) & found).mean())
        declined = float((off_topic < floor).mean())
        print(f"{floor:>14.2f} {refused:>22.1%} {declined:>20.1%}")
        if refused <= target:
            chosen = round(float(floor), 2)
    print(f"\nhighest coverage floor with false refusals <= {target:.0%}: {chosen}")


if __name__ == "__main__":
    main()
