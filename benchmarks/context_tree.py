#!/usr/bin/env python
"""Small-to-big context and the summary tree, measured on a golden dataset by question kind.

Runs the evaluation harness (offline: extractive answers, stored as EvalRuns)
on a golden dataset, first with the collection's summary tree off, then on
(``--tree``), for each option set of ``--compare`` (small-to-big is
``context.expand``). Prints per tree setting, option set and question kind
(all answerable cases, then each ``--tags``): nDCG@10 and recall@10 of the
documents ranked, and the share of answers holding the expected text, with
95% bootstrap intervals, and the paired difference to the table's first
system (case by case); before that, the index size and the tree's build time.
``--beir`` runs a BEIR directory instead (ranking only).

Usage:
  .venv/bin/python benchmarks/context_tree.py [--dataset eval/golden/dataset.yaml] [--tree off,on]
      [--compare fast,fast:context.expand=window] [--tags multi-hop,vocabulary-gap]
Runs in its own database (``RAGSITE_DB_NAME``, default ragsite_context_lab).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _django import django_setup

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_COMPARE = (
    "fast,fast:context.expand=window,fast:context.expand=window+context.window=2,"
    "fast:context.expand=section"
)
METRICS = ("ndcg@10", "recall@10", "expected_match")
# Paired against the first system of the table (tree off, first option set).
DELTA_METRICS = ("ndcg@10", "expected_match")


def _cell(values: list[float]) -> str:
    from eval_app.metrics import bootstrap_ci

    if not values:
        return "-"
    mean, low, high = bootstrap_ci(values, iterations=2000, seed=0)
    return f"{mean:.3f} [{low:.3f},{high:.3f}]"


def _delta(values: dict[str, float], base: dict[str, float]) -> str:
    """Paired difference (this system - the first one) over the cases both scored."""
    from eval_app.metrics import paired_difference_ci

    common = sorted(set(values) & set(base))
    if not common:
        return "-"
    mean, low, high = paired_difference_ci(
        [values[c] for c in common], [base[c] for c in common], iterations=2000, seed=0
    )
    return f"{mean:+.3f} [{low:+.3f},{high:+.3f}]"


def _run(dataset: Path, compare: str, limit: int | None, beir: bool) -> Any:
    from eval_app.harness import eval_run_create, eval_run_execute

    run = eval_run_create(
        dataset_path=dataset,
        beir=beir,
        compare=compare,
        offline=True,
        retrieval_only=beir,
        limit=limit,
        k_values=[10, 100],
        depth=100,
    )
    return eval_run_execute(run=run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default=str(ROOT / "eval" / "golden" / "dataset.yaml"))
    parser.add_argument("--compare", default=DEFAULT_COMPARE, help="profiles / option sets")
    parser.add_argument("--tree", default="off,on", help="summary tree settings to run")
    parser.add_argument("--tags", default="multi-hop,vocabulary-gap,lookup,table")
    parser.add_argument("--limit", type=int, default=None, help="first N queries (BEIR)")
    parser.add_argument("--beir", action="store_true", help="a BEIR directory (ranking only)")
    args = parser.parse_args()
    django_setup(db_name="ragsite_context_lab")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.embedding import get_embedder
    from collections_app.ingestion.summary_tree import summary_tree_update
    from collections_app.models import Chunk, Collection

    tags = [t for t in args.tags.split(",") if t]
    rows: list[tuple[str, str, str, int, list[str]]] = []
    # Per question kind and metric, the first system's scores by case (the baseline).
    baseline: dict[tuple[str, str], dict[str, float]] = {}
    collection = None
    for setting in [t for t in args.tree.split(",") if t]:
        enabled = setting == "on"
        while True:
            # The harness makes the collection on its first run; the tree is switched
            # before the next one (its incremental ingestion then builds or drops it).
            built = ""
            if collection is not None:
                Collection.objects.filter(pk=collection.pk).update(summary_tree=enabled)
                collection.refresh_from_db()
                # Built here, timed; the run's ingestion then finds it current.
                tick = time.perf_counter()
                tree = summary_tree_update(
                    collection=collection,
                    embedder=get_embedder(collection.embedding_config or None),
                )
                built = f"; tree built in {time.perf_counter() - tick:.1f} s: {tree.as_dict()}"
            started = time.perf_counter()
            run = _run(Path(args.dataset), args.compare, args.limit, args.beir)
            if run.status != "succeeded":
                raise SystemExit(f"run {run.pk} {run.status}: {run.error}")
            collection = run.collection
            if collection is None or collection.summary_tree == enabled:
                break
        assert collection is not None
        kinds = {
            kind: Chunk.objects.filter(collection=collection, kind=kind).count()
            for kind in (Chunk.Kind.PASSAGE, Chunk.Kind.SUMMARY)
        }
        print(
            f"tree {setting}: {kinds['passage']} passages, {kinds['summary']} summary nodes"
            f"{built}; run {run.pk} in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        results = list(run.results.all())
        for label in run.aggregates:
            mine = [r for r in results if r.profile == label and not r.should_refuse]
            groups = [("answerable", mine)] + [
                (tag, [r for r in mine if tag in (r.tags or [])]) for tag in tags
            ]
            for group, members in groups:
                cells = [
                    _cell([float(r.metrics[m]) for r in members if r.metrics.get(m) is not None])
                    for m in METRICS
                ]
                for m in DELTA_METRICS:
                    values = {
                        r.case_id: float(r.metrics[m])
                        for r in members
                        if r.metrics.get(m) is not None
                    }
                    base = baseline.setdefault((group, m), values)
                    cells.append(_delta(values, base))
                rows.append((setting, label, group, len(members), cells))

    names = [*METRICS, *(f"d {m}" for m in DELTA_METRICS)]
    header = f"{'tree':4} {'system':46} {'questions':14} {'n':>3} " + " ".join(
        f"{m:>21}" for m in names
    )
    print()
    print(header)
    print("-" * len(header))
    for setting, label, group, n, cells in rows:
        print(f"{setting:4} {label:46} {group:14} {n:>3} " + " ".join(f"{c:>21}" for c in cells))


if __name__ == "__main__":
    main()
