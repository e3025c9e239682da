#!/usr/bin/env python
"""A fixed-seed sample of BEIR SciFact for machines where embedding all of it is too slow.

Keeps all 300 test claims and their judged abstracts, plus ``--others`` abstracts
drawn from the rest of the corpus with a fixed seed. Fewer distractors make
every system score higher than on the full 5,183 abstracts: compare systems on
the sample with each other, and against published figures only on the full set.

Any BEIR directory can be sampled the same way (``--source``); ``--queries N``
keeps a fixed-seed sample of N judged queries instead of all of them (and so only
their judged documents), for corpora such as PubMedQA where every query has a
document of its own.

Deterministic: the same input and arguments write byte-identical files.

Usage: .venv/bin/python eval/scifact_sample/make.py [--others 1200] [--queries N] [--seed 0]
       [--source DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "eval" / "scifact"
DEFAULT_OUT = ROOT / "var" / "eval" / "scifact_sample"


def build(source: Path, out: Path, *, others: int, seed: int, queries: int = 0) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels/test.tsv of the sample under ``out``."""
    qrels = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    judgments = [line.split() for line in qrels[1:] if line.strip()]
    kept_queries = sorted({qid for qid, _did, _grade in judgments})
    if queries:
        kept_queries = sorted(random.Random(seed).sample(kept_queries, queries))
    wanted = set(kept_queries)
    judged = {did for qid, did, _grade in judgments if qid in wanted}
    lines = (source / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    ids = [str(json.loads(line)["_id"]) for line in lines]
    rest = sorted(i for i in ids if i not in judged)
    keep = judged | set(random.Random(seed).sample(rest, min(others, len(rest))))
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for doc_id, line in zip(ids, lines, strict=True):
            if doc_id in keep:
                fh.write(line + "\n")
    if not queries:
        shutil.copyfile(source / "queries.jsonl", out / "queries.jsonl")
        shutil.copyfile(source / "qrels" / "test.tsv", out / "qrels" / "test.tsv")
    else:
        with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
            for line in (source / "queries.jsonl").read_text(encoding="utf-8").splitlines():
                if line.strip() and str(json.loads(line)["_id"]) in wanted:
                    fh.write(line + "\n")
        with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as fh:
            fh.write(qrels[0] + "\n")
            fh.writelines(
                line + "\n" for line in qrels[1:] if line.strip() and line.split()[0] in wanted
            )
    return {"documents": len(keep), "judged": len(judged), "queries": len(kept_queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--others", type=int, default=1200, help="abstracts beyond the judged")
    parser.add_argument("--queries", type=int, default=0, help="judged queries kept (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    counts = build(args.source, args.out, others=args.others, seed=args.seed, queries=args.queries)
    print(
        f"{args.out}: {counts['documents']} documents ({counts['judged']} judged), "
        f"{counts['queries']} judged queries"
    )


if __name__ == "__main__":
    main()
