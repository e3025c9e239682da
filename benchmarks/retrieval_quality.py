#!/usr/bin/env python
"""The retrieval lab: profiles and option sets on every public dataset, one table.

Each dataset (a BEIR directory) is run through the evaluation harness
(``eval_run_create`` + ``eval_run_execute``: import, incremental ingestion into
``eval-<name>``, retrieval-only ranking, offline), so every result is stored
as an EvalRun and the evaluation dashboard shows it over time. Later runs
ingest nothing while the sources and the embedding profile are unchanged.

Prints per dataset and system: nDCG@10, recall@10, recall@100 and MRR with
95% bootstrap intervals, the index size (chunks, and bytes of the chunk table
for the collection) and the ingestion and ranking times.

``--grid chunk`` runs the chunk size and overlap study instead: every dataset
once per chunk setting (``--chunks``, tokens/overlap in the embedding model's
tokens; default 200/0, 200/50, 128/0, 128/32, 256/0, 256/64), each setting in a
collection of its own (``eval-<dataset>-c<tokens>-o<overlap>-test``, so each index
is built once and kept), ranked by ``--compare`` (default: ``fast``), with each
setting's paired nDCG@10 difference to the first one.

Usage:
  .venv/bin/python benchmarks/retrieval_quality.py \
      [--datasets scifact,pubmedqa,pubmedqa_faq,pubmedqa_faq_wh,scifact_sample] \
      [--compare fast,fast:retrieval.mode=vector+retrieval.per_document=0] \
      [--limit N] [--depth N] [--grid chunk [--chunks 200/0,128/24]]
Runs in its own database (``RAGSITE_DB_NAME``, default ragsite_retrieval_lab).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from _django import django_setup

ROOT = Path(__file__).resolve().parent.parent
DATASETS = {
    "scifact": ROOT.parent / "shared" / "eval" / "scifact",
    "pubmedqa": ROOT.parent / "shared" / "eval" / "pubmedqa",
    "pubmedqa_faq": ROOT / "eval" / "pubmedqa_faq",
    # The same corpus with 60 hand-written answerable wh-questions (what, which, how).
    "pubmedqa_faq_wh": ROOT / "eval" / "pubmedqa_faq_wh",
    # The manual shape: the same short answers among 100 long pages of ten abstracts each.
    "pubmedqa_manual": ROOT / "eval" / "pubmedqa_manual",
    # A fixed-seed SciFact sample (eval/scifact_sample/make.py writes it), where
    # embedding all 5,183 abstracts is too slow; compare systems on it, not to published figures.
    "scifact_sample": ROOT / "var" / "eval" / "scifact_sample",
}
# The default (hybrid, fused by the keyword leg's evidence), each leg alone, and equal-weight RRF.
DEFAULT_COMPARE = (
    "fast,fast:retrieval.mode=vector,fast:retrieval.mode=keyword,fast:retrieval.fusion=rrf"
)
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr")
# The chunk study's settings (tokens, overlap tokens): the shipped default first, then
# all-MiniLM-L6-v2's window (256 wordpieces, 254 after [CLS]/[SEP]) and a smaller
# budget, each without and with a quarter of the budget repeated (the overlap repeats
# whole sentences: one longer than the overlap budget is not repeated at all).
CHUNK_GRID = ((200, 0), (200, 50), (128, 0), (128, 32), (256, 0), (256, 64))


def _cell(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "-"
    return f"{entry['value']:.3f} [{entry['low']:.3f},{entry['high']:.3f}]"


def _index_size(slug: str) -> tuple[int, int]:
    """(chunks, bytes of their rows) of the eval collection ``slug``."""
    from django.db import connection

    from collections_app.models import Chunk

    chunks = Chunk.objects.filter(collection__slug=slug).count()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(pg_column_size(c.*)), 0) FROM collections_app_chunk c "
            "JOIN collections_app_collection k ON k.id = c.collection_id WHERE k.slug = %s",
            [slug],
        )
        size = int(cursor.fetchone()[0])
    return chunks, size


def _jsonl(path: Path) -> list[dict[str, Any]]:
    import json

    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def plain_baseline(path: Path, *, words: int = 200, overlap: int = 50) -> tuple[list[str], float]:
    """The plain model on ``words``-word passages (``overlap`` repeated), document = best passage.

    No chunker, no index: every passage of every document is embedded with the
    collection's model (embeddings cached under /tmp by the corpus' digest) and
    each query ranks documents by their best passage's cosine. Returns the
    table cells and the passages embedded per second (raw model encode).
    """
    import hashlib

    import numpy as np

    from collections_app.embedding import get_embedder
    from eval_app.metrics import bootstrap_ci, mrr, ndcg_at_k, recall_at_k

    corpus = _jsonl(path / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in _jsonl(path / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with (path / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, grade = line.split()
            if int(grade) > 0:
                qrels.setdefault(qid, {})[did] = int(grade)
    passages: list[str] = []
    owners: list[int] = []
    step = words - overlap
    for index, doc in enumerate(corpus):
        tokens = f"{doc.get('title') or ''}\n\n{doc.get('text') or ''}".split()
        for start in range(0, max(len(tokens) - overlap, 1), step):
            passages.append(" ".join(tokens[start : start + words]))
            owners.append(index)
    embedder = get_embedder()
    digest = hashlib.sha256(
        ("\x00".join(passages) + embedder.profile.model).encode("utf-8")
    ).hexdigest()[:16]
    cache = Path("/tmp") / f"ragsite-plain-{digest}.npy"
    rate = 0.0
    if cache.exists():
        matrix = np.load(cache)
    else:
        started = time.perf_counter()
        matrix = np.asarray(embedder.encode(passages), dtype=np.float32)
        rate = len(passages) / (time.perf_counter() - started)
        np.save(cache, matrix)
    judged = [qid for qid in queries if qid in qrels]
    vectors = np.asarray(embedder.encode([queries[q] for q in judged]), dtype=np.float32)
    owner = np.asarray(owners)
    ids = [doc["_id"] for doc in corpus]
    scores: dict[str, list[float]] = {m: [] for m in METRICS}
    for qid, vector in zip(judged, vectors, strict=True):
        sims = matrix @ vector
        best = np.full(len(corpus), -2.0, dtype=np.float32)
        np.maximum.at(best, owner, sims)
        ranked = [ids[i] for i in np.argsort(-best, kind="stable")[:100]]
        relevant = qrels[qid]
        scores["ndcg@10"].append(ndcg_at_k(ranked, relevant, 10) or 0.0)
        scores["recall@10"].append(recall_at_k(ranked, relevant, 10) or 0.0)
        scores["recall@100"].append(recall_at_k(ranked, relevant, 100) or 0.0)
        scores["mrr"].append(mrr(ranked, relevant) or 0.0)
    cells = []
    for metric in METRICS:
        mean, low, high = bootstrap_ci(scores[metric], iterations=2000, seed=0)
        cells.append(_cell({"value": mean, "low": low, "high": high}))
    return cells, rate


def chunk_settings_parse(text: str) -> list[tuple[int, int]]:
    """``"200/0,128/24"`` as [(200, 0), (128, 24)]: chunk tokens / overlap tokens."""
    settings: list[tuple[int, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        tokens, _, overlap = item.partition("/")
        try:
            pair = (int(tokens), int(overlap or 0))
        except ValueError:
            raise ValueError(f"chunk setting {item!r} is not TOKENS/OVERLAP") from None
        if pair[0] < 1 or not 0 <= pair[1] < pair[0]:
            raise ValueError(f"chunk setting {item!r}: need 0 <= overlap < tokens")
        settings.append(pair)
    if not settings:
        raise ValueError("no chunk setting given")
    return settings


def chunk_variant(path: Path, *, tokens: int, overlap: int) -> Path:
    """The BEIR directory ``path`` as ingested with chunks of ``tokens`` (``overlap`` repeated).

    The collection default is ``path`` itself (its usual collection). Any other
    setting is a directory under the var folder linking to the dataset's files, so
    the harness names it, and so its collection, after the setting
    (``eval-<name>-c<tokens>-o<overlap>-test``); that collection is created here
    with the setting as its chunking options before the harness ingests it.
    """
    from django.conf import settings

    from eval_app.datasets import beir_load
    from eval_app.harness.corpus_ingest import eval_collection_get_or_create

    defaults = settings.RAG["ingestion"]
    if (tokens, overlap) == (defaults["chunk_tokens"], defaults["chunk_overlap_tokens"]):
        return path
    name = f"{path.resolve().name}-c{tokens}-o{overlap}"
    variant = Path(settings.VAR_DIR) / "eval" / "chunk_grid" / name
    for relative in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        link = variant / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to((path / relative).resolve())
    dataset = beir_load(variant, check_corpus=False)
    collection = eval_collection_get_or_create(
        dataset_name=dataset.name,
        description=f"{dataset.description}, chunks of {tokens} tokens, {overlap} repeated",
    )
    options = {"chunk_tokens": tokens, "chunk_overlap_tokens": overlap}
    strategy = defaults["default_chunking"]
    if collection.chunking_options != options or collection.chunking_strategy != strategy:
        # The manifest sees the chunker's new fingerprint and re-chunks every source.
        collection.chunking_options = options
        collection.chunking_strategy = strategy
        collection.save(update_fields=["chunking_options", "chunking_strategy"])
    return variant


def case_scores(run: Any, label: str, metric: str = "ndcg@10") -> dict[str, float]:
    """Each case's ``metric`` for the system ``label`` of a stored run."""
    scores = {}
    for case_id, metrics in run.results.filter(profile=label).values_list("case_id", "metrics"):
        value = (metrics or {}).get(metric)
        if value is not None:
            scores[case_id] = float(value)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--datasets",
        default="scifact,pubmedqa,pubmedqa_faq",
        help=f"names ({', '.join(DATASETS)}) or BEIR dirs",
    )
    parser.add_argument(
        "--compare", default=None, help="profiles / option sets (default: the four systems; fast)"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N judged queries")
    parser.add_argument("--depth", type=int, default=300, help="chunks of each ranking scored")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="also the plain model on 200-word passages (50 overlap), document = best passage",
    )
    parser.add_argument("--skip-harness", action="store_true", help="only the --plain baseline")
    parser.add_argument(
        "--grid", choices=["chunk"], default=None, help="chunk: the chunk size and overlap study"
    )
    parser.add_argument(
        "--chunks",
        default=",".join(f"{t}/{o}" for t, o in CHUNK_GRID),
        help="--grid chunk's settings, TOKENS/OVERLAP (first: the one compared with)",
    )
    args = parser.parse_args()

    os.environ["RAG_MAX_TOP_N"] = str(max(args.depth, 50))
    os.environ["RAG_MAX_CANDIDATE_K"] = str(max(args.depth, 1000))
    django_setup(db_name="ragsite_retrieval_lab")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from eval_app.harness import eval_run_create, eval_run_execute
    from eval_app.harness.corpus_ingest import eval_collection_slug

    grid: list[tuple[int, int] | None] = [None]
    if args.grid == "chunk":
        grid = [*chunk_settings_parse(args.chunks)]
    compare = [
        c for c in (args.compare or ("fast" if args.grid else DEFAULT_COMPARE)).split(",") if c
    ]
    rows: list[tuple[str, str, list[str], str]] = []
    # (dataset, system) -> each setting's per-case nDCG@10, for the paired differences.
    per_case: dict[tuple[str, str], list[tuple[str, dict[str, float]]]] = {}
    names = [d for d in args.datasets.split(",") if d]
    for name in names if args.plain else []:
        cells, rate = plain_baseline(DATASETS.get(name, Path(name)))
        label = "plain model, 200-word passages, 50 overlap"
        info = f"raw encode {rate:.1f} passages/s" if rate else "cached embeddings"
        print(f"{name}: {label}: {info}: " + " ".join(cells), flush=True)
        rows.append((name, label, cells, info))
    # Setting by setting, so that a study stopped early has every dataset of the
    # settings it finished (each run is stored as it ends).
    for setting in [] if args.skip_harness else grid:
        suffix = "" if setting is None else f" chunk {setting[0]}/{setting[1]}"
        for name in names:
            path = DATASETS.get(name, Path(name))
            source = path
            if setting is not None:
                source = chunk_variant(path, tokens=setting[0], overlap=setting[1])
            started = time.perf_counter()
            run = eval_run_create(
                dataset_path=source,
                beir=True,
                limit=args.limit,
                compare=compare,
                offline=True,
                retrieval_only=True,
                k_values=[10, 100],
                depth=args.depth,
            )
            run = eval_run_execute(run=run)
            total = time.perf_counter() - started
            if run.status != "succeeded":
                sys.exit(f"{name}{suffix}: run {run.pk} {run.status}: {run.error}")
            chunks, size = _index_size(
                run.collection.slug if run.collection else eval_collection_slug(name)
            )
            ingest_s = run.timings.get("ingest_s", 0.0)
            info = (
                f"{chunks} chunks, {size / 1e6:.1f} MB; ingest {ingest_s:.0f} s "
                f"({run.ingestion.get('sources_ingested', 0)} ingested); ranking "
                f"{run.timings.get('cases_s', 0.0):.0f} s; total {total:.0f} s; run {run.pk}"
            )
            print(f"{name}{suffix}: {info}", flush=True)
            # The harness labels each system by its normalised spec (options sorted).
            for label, aggregate in run.aggregates.items():
                metrics = aggregate["metrics"]
                cells = [_cell(metrics.get(m)) for m in METRICS]
                print(f"  {label}{suffix}: " + " ".join(cells), flush=True)
                rows.append((name, label + suffix, cells, info))
                per_case.setdefault((name, label), []).append((suffix, case_scores(run, label)))
    rows.sort(key=lambda row: names.index(row[0]))  # stable: settings stay in order

    width = max([44, *(len(row[1]) for row in rows)])
    data_width = max([14, *(len(row[0]) for row in rows)])
    header = f"{'dataset':{data_width}} {'system':{width}} " + " ".join(f"{m:>21}" for m in METRICS)
    print()
    print(header)
    print("-" * len(header))
    for name, label, cells, _info in rows:
        print(f"{name:{data_width}} {label:{width}} " + " ".join(f"{c:>21}" for c in cells))
    if len(compare) > 1:
        print("\npaired nDCG@10 difference to the first system (95% bootstrap)")
        for name in names:
            systems = [(label, s[0][1]) for (n, label), s in per_case.items() if n == name]
            for label, scores in systems[1:]:
                first_label, first = systems[0]
                print(f"{name:{data_width}} {label} vs {first_label}: {_paired(scores, first)}")
    if args.grid:
        print("\npaired nDCG@10 difference to the first chunk setting (95% bootstrap)")
        for (name, label), settings_scores in per_case.items():
            first_suffix, first = settings_scores[0]
            for suffix, scores in settings_scores[1:]:
                print(
                    f"{name:{data_width}} {label}{suffix} vs{first_suffix}: "
                    f"{_paired(scores, first)}"
                )


def _paired(scores: dict[str, float], reference: dict[str, float]) -> str:
    """The mean paired difference of the shared cases, with its 95% bootstrap interval."""
    from eval_app.metrics import paired_difference_ci

    shared = sorted(set(reference) & set(scores))
    mean, low, high = paired_difference_ci(
        [scores[c] for c in shared], [reference[c] for c in shared], seed=0
    )
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}] ({len(shared)} cases)"


if __name__ == "__main__":
    main()
