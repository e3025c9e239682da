#!/usr/bin/env python
"""Build the FAQ-shaped retrieval set ``eval/pubmedqa_faq`` from ../shared/eval/pubmedqa.

The shape of an FAQ corpus: short answer documents among long ones. Each of the
500 PubMedQA test questions gets its ``long_answer`` (the abstract's conclusion,
1-3 sentences, removed from the abstract in PubMedQA) as a short document
``faq-<id>``; the 1,000 abstracts stay as the long documents. Relevance: the
conclusion grade 2, its own abstract grade 1.

With ``--pages N`` it builds the manual-shaped set ``eval/pubmedqa_manual`` instead:
the 1,000 abstracts bound, N at a time in a fixed-seed order, into long pages
``page-NNN`` (each abstract a paragraph, no headings: a passage may run from one
abstract into the next, as a manual's sections do), among the same short answers;
the page holding a question's abstract is grade 1. Every page is then 15-20
passages: a question meets the many passages of one page, as in a product manual
with an FAQ.

Deterministic: the same input writes byte-identical files.
Licence: PubMedQA is MIT (see LICENSE here, copied from the source).

Usage: .venv/bin/python eval/pubmedqa_faq/make.py [--source DIR] [--out DIR]
       .venv/bin/python eval/pubmedqa_faq/make.py --pages 10 --out eval/pubmedqa_manual
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent.parent / "shared" / "eval" / "pubmedqa"


PAGE_SEED = 0


def pages_bind(corpus: list[dict], per_page: int) -> tuple[list[dict], dict[str, str]]:
    """The abstracts bound ``per_page`` at a time (fixed-seed order), and each one's page."""
    order = sorted(corpus, key=lambda doc: doc["_id"])
    random.Random(PAGE_SEED).shuffle(order)
    pages: list[dict] = []
    page_of: dict[str, str] = {}
    for start in range(0, len(order), per_page):
        page_id = f"page-{start // per_page + 1:03d}"
        members = order[start : start + per_page]
        page_of.update({doc["_id"]: page_id for doc in members})
        text = "\n\n".join(str(doc["text"]).strip() for doc in members)
        pages.append({"_id": page_id, "title": "", "text": text})
    return pages, page_of


def build(source: Path, out: Path, *, pages: int = 0) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels/test.tsv under ``out``.

    ``pages``: bind the abstracts that many to a long page (0: each its own document).
    """
    queries = [json.loads(line) for line in (source / "queries.jsonl").open(encoding="utf-8")]
    corpus = [json.loads(line) for line in (source / "corpus.jsonl").open(encoding="utf-8")]
    judged: dict[str, list[str]] = {}
    with (source / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, _score = line.rstrip("\n").split("\t")
            judged.setdefault(qid, []).append(did)
    long_of = {doc["_id"]: doc["_id"] for doc in corpus}
    if pages:
        corpus, long_of = pages_bind(corpus, pages)
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
            for did in dict.fromkeys(long_of[did] for did in judged.get(query["_id"], [])):
                fh.write(f"{query['_id']}\t{did}\t1\n")
    if (source / "LICENSE").exists():
        shutil.copyfile(source / "LICENSE", out / "LICENSE")
    return {"long": len(corpus), "short": short, "queries": len(queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument(
        "--pages", type=int, default=0, help="abstracts per long page (0: one per document)"
    )
    args = parser.parse_args()
    counts = build(args.source, args.out, pages=args.pages)
    print(
        f"{args.out}: {counts['long']} long + {counts['short']} short documents, "
        f"{counts['queries']} queries"
    )


if __name__ == "__main__":
    main()
