#!/usr/bin/env python
"""Retrieval latency at 10k / 100k / 1M chunks, HNSW recall, and the fast profile end to end.

Corpus: real text of Debian's PostgreSQL 15 documentation (postgresql-doc-15),
loaded and chunked by ragsite's own loaders and recursive chunker, each base
chunk embedded with the demo embedder (all-MiniLM-L6-v2). Larger collections
are made of those real chunks plus *synthetic variants*: the text of two base
chunks spliced together, with the normalised sum of their real vectors as the
embedding (embedding 1M texts would take many hours on this machine). Every
collection is written with COPY, then indexed exactly as ingestion does
(per-collection HNSW index, tsvector GIN, term statistics).

For each size and each retrieval mode (vector / keyword / hybrid), 200 queries
run through the real pipeline in retrieval-only mode (query embedding included,
cache off); the script prints p50/p95, the hybrid/vector p95 ratio, the
1M/10k p95 ratio, EXPLAIN plans, HNSW recall@10 against exact search at 100k,
and the end-to-end `fast` profile (extractive generation) at 100k.

Usage: .venv/bin/python benchmarks/retrieval_scale.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
from _django import django_setup

ROOT = Path(__file__).resolve().parent.parent
DOCS = Path("/usr/share/doc/postgresql-doc-15/html")
CACHE = ROOT / "var" / "bench" / "pgdoc_chunks.npz"
QUERIES = 200


def setup_django() -> None:
    django_setup(db_name="ragsite_bench")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def base_chunks() -> tuple[list[str], np.ndarray]:
    """Real chunks of the PostgreSQL documentation and their real embeddings (cached)."""
    if CACHE.exists():
        data = np.load(CACHE, allow_pickle=False)
        return [str(t) for t in data["texts"]], data["vectors"]
    from collections_app.models import Chunk

    # benchmarks/ingest_throughput.py leaves the same corpus ingested and embedded.
    ingested = Chunk.objects.filter(collection__slug="bench-ingest").order_by("id")
    if ingested.count() > 5000:
        rows = [
            (c.text, c.embedding) for c in ingested.only("text", "embedding") if len(c.text) > 80
        ]
        texts = [t for t, _ in rows]
        vectors = np.array([v for _, v in rows], dtype=np.float32)
        print(f"reusing {len(texts)} chunks embedded by ingest_throughput.py", flush=True)
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        np.savez(CACHE, texts=np.array(texts), vectors=vectors)
        return texts, vectors
    if not DOCS.is_dir():
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "postgresql-doc-15"], check=True, env=env
        )
    from collections_app.embedding import get_embedder
    from collections_app.ingestion.chunking import get_chunker
    from collections_app.ingestion.fetch import read_path
    from collections_app.ingestion.limits import IngestionLimits
    from collections_app.ingestion.loaders import load_document

    embedder = get_embedder()
    chunker = get_chunker("recursive", embedder=embedder)
    limits = IngestionLimits.from_settings()
    texts: list[str] = []
    for path in sorted(DOCS.glob("*.html")):
        doc = load_document(read_path(path, limits=limits), limits=limits)
        texts += [c.text for c in chunker.chunk(doc) if len(c.text) > 80]
    print(f"embedding {len(texts)} real documentation chunks ...", flush=True)
    started = time.perf_counter()
    vectors = embedder.encode(texts)
    print(f"  {len(texts) / (time.perf_counter() - started):.1f} chunks/s", flush=True)
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, texts=np.array(texts), vectors=vectors)
    return texts, vectors


def build(size: int, texts: list[str], vectors: np.ndarray) -> object:
    """Write a collection of ``size`` chunks with COPY and index it like ingestion does."""
    from django.db import connection

    from collections_app.ingestion.storage import chunk_statistics_refresh
    from collections_app.models import Collection, Source
    from collections_app.search_index import collection_term_stats_refresh, vector_index_ensure
    from collections_app.services import collection_create, collection_delete

    slug = f"bench-{size}"
    existing = Collection.objects.filter(slug=slug).first()
    if existing is not None and existing.keyword_stats.get("chunks") == size:
        print(f"{slug}: reusing the collection built earlier", flush=True)
        return existing
    if existing is not None:
        collection_delete(collection=existing)
    collection = collection_create(name=slug, slug=slug)
    rng = np.random.default_rng(size)
    n_base = len(texts)
    per_source = 1000
    stamp = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime())
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("SET maintenance_work_mem = '2GB'")
        raw = cur.connection
        for first in range(0, size, per_source):
            source = Source.objects.create(
                collection=collection,
                location=f"bench://{slug}/{first // per_source}",
                origin="path",
                kind="html",
                status="ready",
                content_hash=f"{first:064d}",
            )
            buf = io.StringIO()
            for i in range(first, min(size, first + per_source)):
                if i < n_base:
                    text, vec = texts[i], vectors[i]
                else:
                    a, b = rng.integers(0, n_base, size=2)
                    ta, tb = texts[a], texts[b]
                    text = ta[: len(ta) // 2] + " " + tb[len(tb) // 2 :]
                    v = vectors[a] + vectors[b]
                    vec = v / np.linalg.norm(v)
                text = (
                    text.replace("\\", "\\\\")
                    .replace("\t", " ")
                    .replace("\n", "\\n")
                    .replace("\r", " ")
                )
                emb = "[" + ",".join(f"{x:.6f}" for x in vec) + "]"
                buf.write(
                    f"{slug}-{i}\t{collection.pk}\t{source.pk}\t{source.content_hash}\t{i - first}\t"
                    f"{text}\t0\t{len(text)}\t\\N\t[]\t0\t{{}}\t{emb}\t{stamp}\n"
                )
            buf.seek(0)
            with raw.cursor().copy(
                "COPY collections_app_chunk (id, collection_id, source_id, source_hash, ordinal, text, "
                "char_start, char_end, page, section_path, token_count, metadata, embedding, created_at) "
                "FROM STDIN"
            ) as copy:
                copy.write(buf.getvalue())
            if (first // per_source) % 50 == 0:
                print(f"  {slug}: {min(size, first + per_source)} rows written", flush=True)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    vector_index_ensure(collection_id=collection.pk, dimensions=vectors.shape[1])
    indexed = time.perf_counter() - started
    collection_term_stats_refresh(collection=collection)
    Collection.objects.filter(pk=collection.pk).update(
        embedding_provider="sentence-transformers",
        embedding_model="all-MiniLM-L6-v2",
        embedding_dimensions=vectors.shape[1],
        index_version=1,
    )
    chunk_statistics_refresh()
    print(f"{slug}: loaded in {loaded:.0f} s, HNSW built in {indexed:.0f} s", flush=True)
    collection.refresh_from_db()
    return collection


def make_queries(texts: list[str]) -> list[str]:
    """Questions made from real sentences of the documentation (first 12 words)."""
    rng = random.Random(7)
    picks = rng.sample(range(len(texts)), QUERIES)
    return [" ".join(texts[i].replace("#", " ").split()[:12]) for i in picks]


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.array(values), p))


def time_mode(
    collection: object, queries: list[str], mode: str, *, retrieval_only: bool = True
) -> list[float]:
    from django.contrib.auth import get_user_model

    from query_app.services import QueryRequest, query_answer

    user = get_user_model().objects.filter(
        is_superuser=True
    ).first() or get_user_model().objects.create_superuser("bench", password="bench")
    overrides = {"retrieval": {"mode": mode}, "cache": {"enabled": False}}
    timings = []
    query_answer(
        user=user,
        request=QueryRequest(
            collection=collection,
            question=queries[0],
            overrides=overrides,
            retrieval_only=retrieval_only,
        ),
        store=False,
    )
    for q in queries:
        started = time.perf_counter()
        query_answer(
            user=user,
            request=QueryRequest(
                collection=collection,
                question=q,
                overrides=overrides,
                retrieval_only=retrieval_only,
            ),
            store=False,
        )
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def explain(collection: object, query: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from collections_app.embedding import get_embedder
    from collections_app.search_index import vector_distance_sql, vector_index_predicate
    from query_app.pipeline.keyword import keyword_search
    from query_app.pipeline.options import RetrievalOptions

    vec = get_embedder().encode([query])[0]
    literal = "[" + ",".join(f"{x:.6f}" for x in vec) + "]"
    dims = len(vec)
    with connection.cursor() as cur:
        cur.execute("SET hnsw.ef_search = 100")
        cur.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT id FROM collections_app_chunk WHERE "
            + vector_index_predicate(collection_id=collection.pk, dimensions=dims)
            + " ORDER BY "
            + vector_distance_sql(dimensions=dims)
            + " LIMIT 50",
            [literal],
        )
        print("    vector plan: " + " | ".join(r[0].strip()[:100] for r in cur.fetchall()[:4]))
    # The keyword leg's own scoring query, exactly as the pipeline sends it.
    with CaptureQueriesContext(connection) as captured:
        keyword_search(
            collection=collection, text=query, k=50, options=RetrievalOptions(mode="keyword")
        )
    with connection.cursor() as cur:
        cur.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + captured.captured_queries[-1]["sql"]
        )
        plan = [r[0].strip() for r in cur.fetchall()]
        scans = [line[:100] for line in plan if "Scan" in line or "Index Cond" in line]
        print("    keyword plan: " + " | ".join(scans[:4]))


def hnsw_recall(collection: object, queries: list[str], k: int = 10) -> float:
    from django.db import connection, transaction

    from collections_app.embedding import get_embedder
    from collections_app.search_index import vector_distance_sql, vector_index_predicate

    vectors = get_embedder().encode(queries)
    dims = vectors.shape[1]
    sql = (
        "SELECT id FROM collections_app_chunk WHERE "
        + vector_index_predicate(collection_id=collection.pk, dimensions=dims)
        + " ORDER BY "
        + vector_distance_sql(dimensions=dims)
        + f" LIMIT {k}"
    )
    hits = 0
    for vec in vectors:
        literal = "[" + ",".join(f"{x:.6f}" for x in vec) + "]"
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET LOCAL hnsw.ef_search = 100")
            cur.execute(sql, [literal])
            approx = {r[0] for r in cur.fetchall()}
            cur.execute("SET LOCAL enable_indexscan = off")
            cur.execute("SET LOCAL enable_bitmapscan = off")
            cur.execute(sql, [literal])
            exact = {r[0] for r in cur.fetchall()}
        hits += len(approx & exact)
    return hits / (k * len(vectors))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    setup_django()
    texts, vectors = base_chunks()
    print(f"base: {len(texts)} real chunks with real embeddings", flush=True)
    queries = make_queries(texts)
    sizes = [int(s) for s in args.sizes.split(",")]
    p95: dict[tuple[int, str], float] = {}
    for size in sizes:
        collection = build(size, texts, vectors)
        print(f"\n== {size} chunks ==", flush=True)
        explain(collection, queries[0])
        for mode in ("vector", "keyword", "hybrid"):
            t = time_mode(collection, queries, mode)
            p95[(size, mode)] = pct(t, 95)
            print(
                f"  {mode:8s} retrieval-only: p50 {pct(t, 50):7.1f} ms  p95 {pct(t, 95):7.1f} ms",
                flush=True,
            )
        print(f"  hybrid p95 / vector p95 = {p95[(size, 'hybrid')] / p95[(size, 'vector')]:.2f}")
        if size == 100_000:
            print(
                f"  HNSW recall@10 vs exact (ef_search 100): {hnsw_recall(collection, queries[:100]):.3f}"
            )
            t = time_mode(collection, queries, "vector", retrieval_only=False)
            print(
                f"  fast profile end to end (extractive): p50 {pct(t, 50):.1f} ms  p95 {pct(t, 95):.1f} ms"
            )
    if 10_000 in sizes and 1_000_000 in sizes:
        for mode in ("vector", "keyword", "hybrid"):
            ratio = p95[(1_000_000, mode)] / p95[(10_000, mode)]
            print(f"p95 at 1M / p95 at 10k ({mode}): {ratio:.2f}")
    print("median of all timings:", statistics.median(p95.values()))


if __name__ == "__main__":
    main()
