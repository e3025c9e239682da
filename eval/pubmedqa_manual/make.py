#!/usr/bin/env python
"""Build the manual-shaped retrieval set ``eval/pubmedqa_manual`` from ../shared/eval/pubmedqa.

The shape of a product manual with an FAQ: short answer documents among long pages
of many passages each. The 1,000 PubMedQA abstracts are bound, ten at a time in a
fixed-seed order, into 100 long pages (``page-NNN``, each abstract a paragraph, no
headings: a passage may run from one abstract into the next, as a manual's sections
do); each of the 500 test questions' ``long_answer`` (the abstract's conclusion,
removed from the abstract in PubMedQA) is a short document ``faq-<id>``. Relevance:
the conclusion grade 2, the page holding its abstract grade 1.

Unlike ``eval/pubmedqa_faq`` (each abstract its own document of 1-3 passages), every
long document here is 15-20 passages: a question meets the many passages of one
page, the crowding of a ranking by one document that a top-n must survive.

Deterministic: the same input writes byte-identical files.
Licence: PubMedQA is MIT (see LICENSE here, copied from the source).

Usage: .venv/bin/python eval/pubmedqa_manual/make.py [--source DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent.parent / "shared" / "eval" / "pubmedqa"
PAGE_ABSTRACTS = 10
SEED = 0


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
    order = sorted(corpus, key=lambda doc: doc["_id"])
    random.Random(SEED).shuffle(order)
    page_of: dict[str, str] = {}
    pages: list[dict[str, str]] = []
    for start in range(0, len(order), PAGE_ABSTRACTS):
        page_id = f"page-{start // PAGE_ABSTRACTS + 1:03d}"
        members = order[start : start + PAGE_ABSTRACTS]
        for doc in members:
            page_of[doc["_id"]] = page_id
        text = "\n\n".join(str(doc["text"]).strip() for doc in members)
        pages.append({"_id": page_id, "title": "", "text": text})
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    short = 0
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for page in pages:
            fh.write(json.dumps(page, ensure_ascii=False) + "\n")
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
            for page_id in sorted({page_of[did] for did in judged.get(query["_id"], [])}):
                fh.write(f"{query['_id']}\t{page_id}\t1\n")
    if (source / "LICENSE").exists():
        shutil.copyfile(source / "LICENSE", out / "LICENSE")
    return {"long": len(pages), "short": short, "queries": len(queries)}


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
