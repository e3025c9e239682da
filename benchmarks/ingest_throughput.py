#!/usr/bin/env python
"""Ingestion throughput on a real HTML corpus (PostgreSQL 15 documentation).

Prints pages/s, chunks/s, embeddings/s, peak RSS, the ratio of end-to-end
chunks/s to the raw model's encode throughput on the same texts, measured in the
same run, and the cost of a second, unchanged run. With units embedded after the
passages (``--units after``, the default) two ratios: until the passages are
searchable (the run less its ``units`` stage) against the raw encode of the
chunks, and the whole run against the raw encode of the chunks and their units;
with ``--units ingestion`` (units embedded with the passages) the whole run
against both; with ``first-use`` against the chunks alone.

Usage: .venv/bin/python benchmarks/ingest_throughput.py [--limit N]
       [--units after|first-use|ingestion] [--rounds 2]
Installs Debian's postgresql-doc-15 when its HTML pages are missing.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from pathlib import Path

from _django import django_setup

DOCS = Path("/usr/share/doc/postgresql-doc-15/html")


def ensure_corpus() -> None:
    if DOCS.is_dir() and any(DOCS.glob("*.html")):
        return
    print("installing postgresql-doc-15 ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql-doc-15"], check=True, env=env)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=0, help="ingest only the first N pages")
    parser.add_argument(
        "--units",
        choices=["after", "first-use", "ingestion"],
        help="when units are embedded (default: RAG_UNIT_VECTORS, i.e. after)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="ingestions (then reindexes), each beside a raw encode",
    )
    args = parser.parse_args()
    ensure_corpus()
    if args.units:
        os.environ["RAG_UNIT_VECTORS"] = args.units
    django_setup(db_name="ragsite_bench")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.embedding import get_embedder
    from collections_app.embedding.unit_vectors import ChunkUnits, unit_texts, unit_vectors_when
    from collections_app.models import Chunk, Collection
    from collections_app.services import collection_create, collection_delete, collection_ingest

    pages = sorted(DOCS.glob("*.html"))
    if args.limit:
        pages = pages[: args.limit]
    locations = [str(p) for p in pages]
    existing = Collection.objects.filter(slug="bench-ingest").first()
    if existing:
        collection_delete(collection=existing)
    collection = collection_create(name="bench-ingest", slug="bench-ingest")
    embedder = get_embedder()
    embedder.encode(["warm up the model"])
    rss_before = peak_rss_mib()

    started = time.perf_counter()
    report = collection_ingest(collection=collection, locations=locations)
    first_s = time.perf_counter() - started
    data = report.as_dict()

    rows = list(
        Chunk.objects.filter(collection=collection)
        .order_by("source_id", "ordinal")
        .values_list("text", "source__title", "source__location")
    )
    texts = [text for text, _, _ in rows]
    units = list(
        dict.fromkeys(
            unit
            for text, title, location in rows
            for unit in unit_texts(ChunkUnits(text=text, title=title, location=location))
        )
    )
    when = unit_vectors_when()

    def raw_encode() -> tuple[float, float]:
        started = time.perf_counter()
        embedder.encode(texts)
        chunks_s = time.perf_counter() - started
        started = time.perf_counter()
        embedder.encode(units)
        return chunks_s, time.perf_counter() - started

    raw_chunks_s, raw_units_s = raw_encode()
    ingest_s = [first_s]
    units_s = [report.stage_seconds.get("units", 0.0)]
    # Further rounds (--rounds): a reindex (every chunk embedded again) and the raw
    # encode once more, alternating, so a change in the machine's load falls on both.
    for _ in range(args.rounds - 1):
        started = time.perf_counter()
        again = collection_ingest(collection=collection, locations=locations, reindex=True)
        ingest_s.append(time.perf_counter() - started)
        units_s.append(again.stage_seconds.get("units", 0.0))
        more_chunks_s, more_units_s = raw_encode()
        raw_chunks_s += more_chunks_s
        raw_units_s += more_units_s
    # What this run's ingestion embedded: the chunks, and their units unless first-use.
    raw_s = raw_chunks_s + (raw_units_s if when != "first-use" else 0.0)

    started = time.perf_counter()
    second = collection_ingest(collection=collection, locations=locations).as_dict()
    second_s = time.perf_counter() - started

    chunks = data["chunks_written"]
    e2e_cps = chunks * len(ingest_s) / sum(ingest_s)
    raw_cps = len(texts) * len(ingest_s) / raw_s
    print(
        f"pages: {len(pages)} ({data['sources_ingested']} ingested, {data['sources_failed']} failed, "
        f"{data['sources_quarantined']} quarantined)"
    )
    print(f"chunks: {chunks}; embeddings computed: {data['embeddings_computed']}")
    print(
        f"first run: {first_s:.1f} s -> {len(pages) / first_s:.2f} pages/s, {e2e_cps:.1f} chunks/s, "
        f"{data['embeddings_computed'] / first_s:.1f} embeddings/s"
    )
    print("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in data["stage_seconds"].items()))
    if len(ingest_s) > 1:
        print(
            f"reindex rounds: {', '.join(f'{t:.1f}' for t in ingest_s[1:])} s; "
            f"{e2e_cps:.1f} chunks/s over all {len(ingest_s)} ingestions"
        )
    print(
        f"raw model encode of the same {len(texts)} chunk texts, {len(ingest_s)} times: "
        f"{raw_chunks_s:.1f} s; of their {len(units)} units: {raw_units_s:.1f} s (unit vectors: {when}, so "
        f"ingestion embeds {'the chunks alone' if when == 'first-use' else 'both'}: "
        f"{raw_cps:.1f} chunks/s raw)"
    )
    print(f"ratio end-to-end / raw model: {e2e_cps / raw_cps:.3f} (target >= 0.85)")
    if when == "after":
        searchable_s = sum(ingest_s) - sum(units_s)
        print(
            f"until searchable (runs less their units stage, {sum(units_s):.1f} s): "
            f"{chunks * len(ingest_s) / searchable_s:.1f} chunks/s; ratio to the raw encode of "
            f"the chunks alone: {raw_chunks_s / searchable_s:.3f} (target >= 0.85)"
        )
    print(
        f"second run (unchanged): {second_s:.2f} s, embeddings computed {second['embeddings_computed']}, "
        f"{100 * second_s / first_s:.1f}% of the first run (target <= 5%)"
    )
    print(
        f"peak RSS: {peak_rss_mib():.0f} MiB (before ingestion, model loaded: {rss_before:.0f} MiB; "
        "target < 2560 MiB)"
    )
    failed = [s for s in data["sources"] if s["status"] in {"failed", "quarantined"}]
    for s in failed[:10]:
        print(f"  {s['status']}: {s['location']}: {s['reason']}")


if __name__ == "__main__":
    main()
