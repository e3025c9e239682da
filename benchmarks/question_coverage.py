#!/usr/bin/env python
"""Measure ``generation.min_question_coverage``: extractive answers that quote passages
about something else, against answers it wrongly declines.

Builds under ``var/bench/coverage/`` a golden-format dataset from PubMedQA
(``../shared/eval/pubmedqa``): its 1,000 abstracts less the abstracts of a fixed-seed
share (``--held``, half by default) of its 500 questions. Every question is asked: one
whose abstract is kept should be answered; one whose abstract is gone should be
declined, since the other abstracts are about other studies. The 60 hand-written
what/which/how questions of ``eval/pubmedqa_faq_wh`` (on the same abstracts) are asked
too, under the same rule. Then it evaluates ``--compare`` (offline, extractive) and prints,
for each setting, the share of answerable questions declined and the share of the others
declined, with the question coverage the answers had. ``--golden`` evaluates the shipped
golden set (``eval/golden``) with the same settings.

Usage: .venv/bin/python benchmarks/question_coverage.py [--held 0.5] [--golden | --golden-only]
       [--compare fast:generation.min_question_coverage=null,fast]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from _django import ROOT, django_setup

SOURCE = ROOT.parent / "shared" / "eval" / "pubmedqa"
WH = ROOT / "eval" / "pubmedqa_faq_wh"
OUT = ROOT / "var" / "bench" / "coverage"
DEFAULT_COMPARE = (
    "fast:generation.min_question_coverage=null,fast:generation.min_question_coverage=0.2,"
    "fast,fast:generation.min_question_coverage=0.4"
)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _qrels(path: Path) -> dict[str, list[str]]:
    judged: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        query, doc, score = line.split("\t")
        if int(score) > 0:
            judged.setdefault(query, []).append(doc)
    return judged


def dataset_build(*, held: float, seed: int) -> Path:
    """Write the corpus files and dataset.yaml under OUT; return the YAML's path."""
    import yaml

    queries = _jsonl(SOURCE / "queries.jsonl")
    judged = _qrels(SOURCE / "qrels" / "test.tsv")
    rng = random.Random(seed)
    ids = sorted(q["_id"] for q in queries)
    gone = set(rng.sample(ids, round(held * len(ids))))
    absent = {doc for q in gone for doc in judged.get(q, [])}
    corpus = OUT / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    kept: set[str] = set()
    for record in _jsonl(SOURCE / "corpus.jsonl"):
        doc = str(record["_id"])
        path = corpus / f"{doc}.txt"
        if doc in absent:
            path.unlink(missing_ok=True)
            continue
        text = f"{(record.get('title') or '').strip()}\n\n{record['text'].strip()}\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        kept.add(doc)
    cases: list[dict[str, Any]] = []

    def case(case_id: str, question: str, docs: list[str], tag: str) -> None:
        present = [d for d in docs if d in kept]
        if present:
            cases.append(
                {"id": case_id, "question": question, "tags": [tag, "answerable"],
                 "relevant": [f"{d}.txt" for d in present]}
            )  # fmt: skip
        else:
            cases.append(
                {"id": case_id, "question": question, "tags": [tag, "abstract-absent"],
                 "should_refuse": True}
            )  # fmt: skip

    for query in queries:
        case(f"pubmedqa-{query['_id']}", query["text"], judged.get(query["_id"], []), "yes-no")
    wh_judged = _qrels(WH / "qrels" / "test.tsv")
    for query in _jsonl(WH / "queries.jsonl"):
        docs = [d for d in wh_judged.get(query["_id"], []) if not d.startswith("faq-")]
        case(query["_id"], query["text"], docs, "wh")
    dataset = {
        "name": "pubmedqa-partial",
        "description": "PubMedQA questions against a collection that lacks some of their "
        "abstracts (benchmarks/question_coverage.py)",
        "corpus": ["corpus/"],
        "cases": cases,
    }
    path = OUT / "dataset.yaml"
    path.write_text(yaml.safe_dump(dataset, sort_keys=False), encoding="utf-8")
    return path


def _coverage_of(result: Any) -> float | None:
    for step in result.trace or []:
        if step.get("stage") == "generate":
            value = (step.get("details") or {}).get("question_coverage")
            return None if value is None else float(value)
    return None


def report(run: Any, *, show: int) -> None:
    results = list(run.results.all())
    labels = list(run.aggregates)
    print(f"run {run.pk}: {len(results) // max(len(labels), 1)} cases")
    print(f"{'setting':<48} {'answerable declined':>22} {'absent declined':>18} "
          f"{'refusal acc.':>12} {'expected':>9}")  # fmt: skip
    base: dict[str, bool] = {}
    for label in labels:
        mine = [r for r in results if r.profile == label]
        answerable = [r for r in mine if not r.should_refuse]
        absent = [r for r in mine if r.should_refuse]
        metrics = run.aggregates[label]["metrics"]
        expected = (metrics.get("expected_match") or {}).get("value")
        refusal = (metrics.get("refusal_accuracy") or {}).get("value")
        print(
            f"{label:<48} {sum(r.refused for r in answerable):>5} / {len(answerable):<4}"
            f"({100 * sum(r.refused for r in answerable) / max(len(answerable), 1):5.1f} %)"
            f" {sum(r.refused for r in absent):>5} / {len(absent):<4}"
            f"({100 * sum(r.refused for r in absent) / max(len(absent), 1):4.1f} %)"
            f" {'-' if refusal is None else format(refusal, '.3f'):>12}"
            f" {'-' if expected is None else format(expected, '.3f'):>9}"
        )
        for tag in ("yes-no", "wh"):
            tagged = [r for r in answerable if tag in (r.tags or [])]
            if tagged:
                print(f"    {tag}: answerable declined {sum(r.refused for r in tagged)} of "
                      f"{len(tagged)}")  # fmt: skip
        if not base:
            base = {r.case_id: r.refused for r in mine}
            continue
        newly = [r for r in mine if r.refused and not base.get(r.case_id)]
        wrong = [r for r in newly if not r.should_refuse]
        print(f"    declined beyond the first setting: {len(newly)}, of them answerable "
              f"{len(wrong)}")  # fmt: skip
        for r in wrong[:show]:
            print(f"      wrongly: {r.question!r} -> {r.answer[:160]!r}")
        for r in [r for r in newly if r.should_refuse][:show]:
            print(f"      rightly: {r.question!r} -> {r.answer[:160]!r}")
    first = [r for r in results if r.profile == labels[0]]
    covered = sorted(
        (c, r.should_refuse) for r in first if not r.refused and (c := _coverage_of(r)) is not None
    )
    if covered:
        print(f"question coverage of the answers given by {labels[0]}:")
        for floor in (0.1, 0.2, 0.3, 0.4, 0.5):
            below = [s for c, s in covered if c < floor]
            print(f"  below {floor:.1f}: answerable {sum(not s for s in below)}, "
                  f"abstract absent {sum(s for s in below)} (of {len(covered)} answered)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=float, default=0.5, help="share of abstracts left out")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--compare", default=DEFAULT_COMPARE)
    parser.add_argument("--golden", action="store_true", help="also the shipped golden set")
    parser.add_argument("--golden-only", action="store_true", help="only the shipped golden set")
    parser.add_argument("--show", type=int, default=6, help="examples printed per setting")
    args = parser.parse_args()
    django_setup(db_name="ragsite_coverage_lab")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from eval_app.harness import eval_run_create, eval_run_execute

    datasets = [] if args.golden_only else [dataset_build(held=args.held, seed=args.seed)]
    if args.golden or args.golden_only:
        datasets.append(ROOT / "eval" / "golden" / "dataset.yaml")
    for path in datasets:
        started = time.perf_counter()
        run = eval_run_create(
            dataset_path=path, beir=False, compare=args.compare, offline=True,
            without_cross_encoder=True, limit=None, k_values=[10], depth=50,
        )  # fmt: skip
        run = eval_run_execute(run=run)
        if run.status != "succeeded":
            raise SystemExit(f"run {run.pk} {run.status}: {run.error}")
        print(f"\n{path.relative_to(ROOT)} in {time.perf_counter() - started:.0f} s")
        report(run, show=args.show)


if __name__ == "__main__":
    main()
