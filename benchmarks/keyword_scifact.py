#!/usr/bin/env python
"""Keyword-leg ranking quality on BEIR SciFact: ts_rank_cd over an OR query vs BM25-style.

Inserts the 5,183 SciFact abstracts (title + text, one chunk each) into a
throwaway collection of its own database (no embeddings: the keyword leg does
not need them), refreshes the term statistics, runs the 300 test claims
through ``query_app.pipeline.keyword.keyword_search`` with each ranking and
prints nDCG@10, recall@100, latency p50/p95, and the EXPLAIN of one pool query
(GIN-backed). Also prints Postgres' AND semantics (``websearch_to_tsquery``)
as the baseline the OR query replaces.

Usage: .venv/bin/python benchmarks/keyword_scifact.py [--data DIR] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import time
from collections import defaultdict
from pathlib import Path

from _django import django_setup

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "scifact"


def load_beir(data: Path) -> tuple[list[dict], dict[str, str], dict[str, dict[str, int]]]:
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (data / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (data / "qrels" / "test.tsv").open() as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.split()
            qrels[qid][did] = int(score)
    return corpus, {q: queries[q] for q in qrels}, dict(qrels)


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _insert(corpus: list[dict], slug: str):  # type: ignore[no-untyped-def]
    from collections_app.models import Chunk, Collection, Source
    from collections_app.search_index import collection_term_stats_refresh

    started = time.perf_counter()
    collection = Collection.objects.create(name="SciFact (benchmark)", slug=slug)
    sources = Source.objects.bulk_create(
        [
            Source(
                collection=collection,
                location=f"scifact/{doc['_id']}",
                origin=Source.Origin.PATH,
                title=doc["title"],
                status=Source.Status.READY,
            )
            for doc in corpus
        ],
        batch_size=1000,
    )
    chunks = []
    for doc, source in zip(corpus, sources, strict=True):
        text = f"{doc['title']}\n\n{doc['text']}"
        chunks.append(
            Chunk(
                id=hashlib.sha256(f"scifact/{doc['_id']}".encode()).hexdigest()[:40],
                collection=collection,
                source=source,
                source_hash="-",
                ordinal=0,
                text=text,
                char_start=0,
                char_end=len(text),
                metadata={"doc_id": doc["_id"]},
            )
        )
    Chunk.objects.bulk_create(chunks, batch_size=1000)
    stats = collection_term_stats_refresh(collection=collection)
    print(
        f"inserted {len(chunks)} abstracts in {time.perf_counter() - started:.1f}s; "
        f"avg lexemes per chunk {stats['avg_lexemes']:.1f}"
    )
    return collection


def _drop(collection) -> None:  # type: ignore[no-untyped-def]
    # Raw deletes: the benchmark database holds only the corpus tables.
    from collections_app.models import Chunk, Collection, Source, TermStat

    for model in (Chunk, Source, TermStat):
        model.objects.filter(collection=collection)._raw_delete(model.objects.db)
    Collection.objects.filter(pk=collection.pk)._raw_delete(Collection.objects.db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--keep", action="store_true", help="keep the collection afterwards")
    parser.add_argument(
        "--pools",
        type=int,
        nargs="*",
        default=[20000, 500],
        help="keyword_pool sizes to measure BM25 with",
    )
    args = parser.parse_args()
    django_setup(db_name="ragsite_bench")
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call_command("migrate", "collections_app", verbosity=0)
    from collections_app.ingestion.storage import chunk_statistics_refresh
    from collections_app.models import Collection
    from query_app.pipeline.keyword import keyword_search
    from query_app.pipeline.options import RetrievalOptions

    corpus, queries, qrels = load_beir(args.data)
    slug = "bench-scifact-keyword"
    collection = Collection.objects.filter(slug=slug).first()
    if collection is None or collection.chunks.count() != len(corpus):
        if collection is not None:
            _drop(collection)
        collection = _insert(corpus, slug)
    else:
        print(f"reusing the {len(corpus)} abstracts of collection {slug!r}")
    doc_of = dict(
        (cid, meta["doc_id"]) for cid, meta in collection.chunks.values_list("id", "metadata")
    )

    # Postgres AND semantics, the baseline the OR query replaces.
    and_scores = []
    with connection.cursor() as cur:
        for qid, text in queries.items():
            cur.execute(
                "SELECT id FROM collections_app_chunk WHERE collection_id = %s AND "
                "search_vector @@ websearch_to_tsquery('english', %s) "
                "ORDER BY ts_rank_cd(search_vector, websearch_to_tsquery('english', %s)) DESC "
                "LIMIT 10",
                [collection.pk, text, text],
            )
            ranked = [doc_of[row[0]] for row in cur.fetchall()]
            and_scores.append((ndcg_at(ranked, qrels[qid]), not ranked))
    print(
        f"\nwebsearch_to_tsquery (AND): nDCG@10 {statistics.mean(s for s, _ in and_scores):.4f}; "
        f"no hit for {sum(1 for _, empty in and_scores if empty)} of {len(queries)} claims"
    )

    header = f"{'ranking':<12} {'codes':<6} {'pool':>6} {'nDCG@10':>8} {'R@100':>7}"
    print(f"\n{header} {'p50 ms':>8} {'p95 ms':>8}")
    default_pool = RetrievalOptions().keyword_pool
    configs = [
        (ranking, require_codes, default_pool)
        for ranking in ("ts_rank_cd", "bm25")
        for require_codes in (True, False)
    ] + [("bm25", True, pool) for pool in args.pools]
    pooled: dict[str, int] = {}
    for ranking, require_codes, pool in configs:
        options = RetrievalOptions(
            keyword_ranking=ranking, require_codes=require_codes, keyword_pool=pool
        )
        ndcgs, recalls, latencies = [], [], []
        for qid, text in queries.items():
            t0 = time.perf_counter()
            result = keyword_search(collection=collection, text=text, k=100, options=options)
            latencies.append((time.perf_counter() - t0) * 1000)
            ranked = [doc_of[h.chunk_id] for h in result.hits]
            pooled[text] = result.details.get("pooled", 0)
            ndcgs.append(ndcg_at(ranked, qrels[qid]))
            recalls.append(recall_at(ranked, qrels[qid]))
        print(
            f"{ranking:<12} {'must' if require_codes else 'free':<6} {pool:>6} "
            f"{statistics.mean(ndcgs):>8.4f} {statistics.mean(recalls):>7.4f} "
            f"{percentile(latencies, 50):>8.1f} {percentile(latencies, 95):>8.1f}"
        )

    # Fresh statistics, or the planner guesses the tsquery's selectivity.
    chunk_statistics_refresh()
    # The most selective claim: at scale most look like this one.
    text = min((t for t in pooled if pooled[t]), key=lambda t: pooled[t])
    with CaptureQueriesContext(connection) as captured:
        keyword_search(collection=collection, text=text, k=10, options=RetrievalOptions())
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + captured.captured_queries[-1]["sql"])
        plan = "\n".join(row[0] for row in cur.fetchall())
    print(f"\nEXPLAIN of the BM25 query for {text!r}:\n{plan}")
    # With one small collection the planner may walk the collection's btree
    # instead; in large collections the GIN index is the cheaper path.
    print("\nGIN index used:", "chunk_search_vector_gin" in plan)
    if not args.keep:
        _drop(collection)


if __name__ == "__main__":
    main()
