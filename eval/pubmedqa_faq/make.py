#!/usr/bin/env python
"""Build the FAQ-shaped retrieval set ``eval/pubmedqa_faq`` from ../shared/eval/pubmedqa.

The shape of an FAQ corpus: short answer documents among long ones. Each of the
500 PubMedQA test questions gets its ``long_answer`` (the abstract's conclusion,
1-3 sentences, removed from the abstract in PubMedQA) as a short document
``faq-<id>``; the 1,000 abstracts stay as the long documents. Relevance: the
conclusion grade 2, its own abstract grade 1.

Deterministic: the same input writes byte-identical files.
Licence: PubMedQA is MIT (see LICENSE here, copied from the source).

Usage: .venv/bin/python eval/pubmedqa_faq/make.py [--source DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent.parent / "shared" / "eval" / "pubmedqa"


def build(source: Path, out: Path) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels/test.tsv under ``out``."""
    queries = [json.loads(line) for line in (source / "queries.jsonl").open(encoding="utf-8")]
    corpus = [json.loads(line) for line in (source / "corpus.jsonl").open(encoding="utf-8")]
    judged: dict[str, list[str]] = {}
    with (source / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, _score = line.rstrip("\n").split("\t")
            judged.setdefault(qid, []).append(did)
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    short = 0
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for doc in corpus:
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
        for query in queries:
            answer = (query.get("long_answer") or "").strip()
            if not answer:
                continue
            doc = {"_id": f"faq-{query['_id']}", "title": "", "text": answer}
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            short += 1
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for query in queries:
            fh.write(json.dumps({"_id": query["_id"], "text": query["text"]}) + "\n")
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for query in queries:
            if query.get("long_answer"):
                fh.write(f"{query['_id']}\tfaq-{query['_id']}\t2\n")
            for did in judged.get(query["_id"], []):
                fh.write(f"{query['_id']}\t{did}\t1\n")
    if (source / "LICENSE").exists():
        shutil.copyfile(source / "LICENSE", out / "LICENSE")
    return {"long": len(corpus), "short": short, "queries": len(queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    counts = build(args.source, args.out)
    print(
        f"{args.out}: {counts['long']} long + {counts['short']} short documents, "
        f"{counts['queries']} queries"
    )


if __name__ == "__main__":
    main()
