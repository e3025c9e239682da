#!/usr/bin/env python
"""Corrective and adaptive answering against fast and balanced, offline, on the golden set.

Runs the evaluation harness (the same calls as ``rag eval --offline
--without-cross-encoder``) for fast, balanced, corrective and adaptive, then
reports per profile recall@5, MRR, nDCG@10, the answer metrics, mean model calls
and graph/stage steps run, and p50/p95 latency; then the targets of issue 11 as
paired bootstrap differences (95 % intervals, case-level resampling):

- corrective vs balanced on the cases tagged ``corrective``, ``multi-hop`` and
  ``vocabulary-gap`` (better beyond the interval?);
- corrective vs balanced on all cases (never worse beyond the interval?);
- adaptive vs the best profile's quality, and adaptive's mean latency as a share of
  the best profile's (target: within the interval at <= 60 %).

Figures (2026-12-01, 134 cases, offline, 2 shared CPU cores under load; run 11 of its own
database on commit 6c1aca1: a later part of a multi-part question searched in its
own words, each part's best passage kept, entity bridges, the adaptive single shot's
retry and refine): recall@5 / MRR / nDCG@10 / expected match — fast and balanced 0.949
/ 0.905 / 0.890 / 0.738 (unchanged), corrective and adaptive 0.958 / 0.915 / 0.906 /
0.828 (the same on every case); refusal accuracy 0.903 / 0.903 / 0.925 / 0.925; steps
run 7.0 / 7.0 / 10.7 / 10.3; rewrites per case 0.25 (corrective), 0.20 (adaptive); p50
/ p95 ms 58 / 382, 25 / 40, 46 / 179, 35 / 76 (mean 116, 25, 71, 41); model calls 0
(offline). Targets: corrective - balanced on all cases +0.036 [+0.016, +0.059] (better;
never worse: met); on corrective+multi-hop +0.092 [+0.027, +0.159] (better: met;
expected match 0.435 against 0.696, +0.261 [+0.087, +0.435]: entity bridges answer the
burst of the plan that costs EUR 499.00, the price of the dock revision C uses, of the
plan with 20 webhooks and the phone of the founding city's office; the misses left are
answer-sentence choices across two parts (OpenSSL and reporting, list price and
discount) and described things without a relative clause ("the fix for ERR-5120", "the
endpoint Quillmate scanners upload their scans to")); on vocabulary-gap +0.131 [+0.026,
+0.253] (better). Best profile corrective; adaptive - corrective +0.000 [+0.000, +0.000]
(within: met) at 58 % of corrective's mean latency (met, narrowly: three runs gave 49 to
58 %; latencies are noisy here, and adaptive runs last, finding the question vectors
and sentence embeddings of the earlier profiles cached: on the 86 cases both answer
with one search, adaptive took 2.7 s in all, corrective 4.6 s). Grader: first verdicts
82 correct / 29 ambiguous / 11 incorrect on 122 answerable cases; wrong "incorrect" 4 =
3.3 % (target <= 5 %). Run 13, on commit 6b94eab (which adds 916dc08: what a
rewritten probe finds is judged against the question): corrective 0.958 / 0.911 / 0.903
/ 0.828, adaptive 0.958 / 0.915 / 0.906 / 0.828; corrective - balanced all +0.035
[+0.015, +0.057], corrective+multi-hop +0.092 [+0.027, +0.159], vocabulary-gap +0.120
[+0.007, +0.247] (all better); adaptive - corrective +0.001 [+0.000, +0.004] at 52 % of
its mean latency (23 against 44 ms, the machine less loaded); rewrites per case 0.32
and 0.20; wrong "incorrect" 3.3 %. SciFact, first 50 queries (run 12, on 6c1aca1, `--beir
/work/shared/eval/scifact --limit 50`; the whole corpus ingested, 5,183 documents in
11,874 chunks, 50 minutes on the loaded machine): recall@5 / MRR / nDCG@10 fast 0.837 /
0.774 / 0.793, balanced 0.849 / 0.804 / 0.822, corrective and adaptive 0.849 / 0.814 /
0.829; corrective - balanced +0.005 [+0.000, +0.015] (never worse: met; not better
beyond the interval); adaptive - corrective +0.000 [+0.000, +0.000] at 79 % of
corrective's mean latency (75 against 95 ms: NOT met there, where retrieval over the
larger index is most of the time: 41 of the 50 take one search, 2 a retry, 1 a bridge,
6 the iterative path); the grader's first verdicts 42 correct / 6 ambiguous / 2
incorrect, wrong "incorrect" 0.

Before (2026-11-30, run 10 of ragsite_bench_corrective, with the bridge hops of
bridging.py and refine keeping the best passage whole): corrective 0.954 / 0.916 / 0.907
/ 0.795, adaptive 0.945 / 0.913 / 0.905 / 0.754; refusal accuracy 0.903 / 0.903 / 0.925
/ 0.903; steps run 7.0 / 7.0 / 10.4 / 9.2; rewrites per case 0.19 (corrective), 0.04
(adaptive); p50 / p95 ms 103 / 764, 43 / 89, 85 / 297, 60 / 136 (mean 223, 47, 118,
62). Targets: corrective - balanced on all cases +0.024 [+0.007, +0.046]; on
corrective+multi-hop +0.029 [-0.022, +0.087] (expected match +0.087 [+0.000, +0.217];
NOT better beyond the interval: 3 bridge wins of 23; the later part of a multi-part
question was searched with the first part's subject words, which pulled its search
back to the first part's documents and made its coverage check pass on them); on
vocabulary-gap +0.131 [+0.026, +0.253]; adaptive - corrective -0.017 [-0.035, -0.003]
(NOT within: the single shot had neither refine nor rewrites for the vocabulary-gap
cases it routes as simple) at 53 % of corrective's mean latency; wrong "incorrect" 3.3
%. Earlier (run 1): corrective+multi-hop -0.017 [-0.043, +0.000], all -0.004 [-0.019,
+0.012], adaptive at 94 % of balanced's latency. PubMedQA, first 60 queries (run 3,
`--beir /work/shared/eval/pubmedqa --limit 60`): every profile recall@5 0.983, MRR
0.985-0.986, nDCG@10 0.989 (corrective +0.000 [+0.000, +0.000]; the grader said
correct 59 / ambiguous 1 / incorrect 0); its latencies only show the embedding cache
(fast, first, mean 7.7 s; adaptive, last, 0.26 s).
Tried and not kept: the bridge probe as the question with the name replaced ("What is
in the Quillmate Q3 Starter Kit?") lost the glossary passage (recall@5 -0.04 on
corrective+multi-hop); the question's keywords plus the definition's words keep both.
Decompose's probes merged by max score instead of RRF gave MRR 0.978 on
corrective+multi-hop (= balanced, RRF 0.949) but expected match 0.457 there (RRF
0.500) and 0.689 on all cases (RRF 0.697).
A later part's coverage judged by its own words alone (half of them), with the covering
passages ranked by those words: the list of "what is each one for" ranked by "one",
MRR -0.011 on all cases against +0.010 with the whole sub-question ranking them.
The entity bridge's resolved question with the names appended after the description
("… revision C uses (QD-2)?"): the answer still quoted the row the description matched
(2 entity wins of 4, against 4 of 4 with the description replaced by the names).

Usage: .venv/bin/python benchmarks/corrective.py [--json out.json] [--iterations 2000]
       [--profiles balanced,corrective] [--tags corrective,multi-hop]
       [--beir /work/shared/eval/pubmedqa --limit 60]
Offline: extractive answers, heuristic judges, no cross-encoder (rerank.kind=none).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from _django import ROOT, django_setup

PROFILES = ("fast", "balanced", "corrective", "adaptive")
METRICS = (
    "recall@5",
    "mrr",
    "ndcg@10",
    "expected_match",
    "refusal_accuracy",
    "citation_validity",
    "groundedness",
)
SUBSETS = {
    "all": None,
    "corrective+multi-hop": {"corrective", "multi-hop"},
    "vocabulary-gap": {"vocabulary-gap"},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def quality(metrics: dict[str, Any]) -> float | None:
    """One per-case quality figure: the mean of recall@5, MRR and expected match."""
    values = [metrics.get(m) for m in ("recall@5", "mrr", "expected_match")]
    present = [float(v) for v in values if v is not None]
    return sum(present) / len(present) if present else None


def paired(
    a: dict[str, float | None], b: dict[str, float | None], *, iterations: int, seed: int
) -> dict[str, Any]:
    """Mean of a - b over the cases both scored, with a bootstrap 95 % interval."""
    diffs = [a[k] - b[k] for k in a if k in b and a[k] is not None and b[k] is not None]  # type: ignore[operator]
    if not diffs:
        return {"n": 0}
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(iterations))
    low, high = means[int(0.025 * iterations)], means[int(0.975 * iterations) - 1]
    return {
        "n": len(diffs),
        "mean": statistics.fmean(diffs),
        "low": low,
        "high": high,
        "better": low > 0,
        "worse": high < 0,
    }


def _tagged_subset(path: Path, tags: set[str]) -> Path:
    """The golden dataset's cases with one of ``tags``, as a YAML file of its own (same
    name and corpus, so the corpus collection is reused and nothing is re-ingested)."""
    import tempfile

    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["corpus"] = [str((path.parent / c).resolve()) for c in data["corpus"]]
    data["cases"] = [c for c in data["cases"] if tags & set(c.get("tags") or [])]
    folder = Path(tempfile.mkdtemp(prefix="bench-corrective-"))
    subset = folder / path.name
    subset.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return subset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=ROOT / "eval/golden/dataset.yaml")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--run", type=int, help="report on this finished run instead of a new one")
    parser.add_argument(
        "--profiles",
        default=",".join(PROFILES),
        help="comma-separated subset of " + ",".join(PROFILES),
    )
    parser.add_argument("--tags", default="", help="only the golden cases with one of these tags")
    parser.add_argument("--beir", type=Path, help="a BEIR directory (SciFact, PubMedQA) instead")
    parser.add_argument("--limit", type=int, help="the first N queries of the BEIR set")
    args = parser.parse_args()
    profiles = tuple(p for p in args.profiles.split(",") if p)
    unknown = set(profiles) - set(PROFILES)
    if unknown:
        parser.error(f"unknown profile(s) {sorted(unknown)}; known: {', '.join(PROFILES)}")
    django_setup("ragsite_bench_corrective")

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from eval_app.models import EvalCaseResult
    from eval_app.services import eval_run_create, eval_run_execute

    if args.run is not None:
        from eval_app.models import EvalRun

        run = EvalRun.objects.get(pk=args.run)
    else:
        dataset = args.beir or args.dataset
        if args.tags and not args.beir:
            dataset = _tagged_subset(args.dataset, set(args.tags.split(",")))
        run = eval_run_create(
            dataset_path=dataset,
            compare=",".join(profiles),
            offline=True,
            k_values=[5, 10],
            depth=10,
            beir=args.beir is not None,
            limit=args.limit if args.beir else None,
            without_cross_encoder=True,
            retrieval_only=False,
            baseline=None,
        )
        run = eval_run_execute(run=run, on_progress=None)
    if run.status != "succeeded":
        print(f"evaluation run {run.pk} {run.status}: {run.error}", file=sys.stderr)
        return 1
    results = list(EvalCaseResult.objects.filter(run=run))
    labels = sorted({r.profile for r in results})
    label_of = {
        name: next(lb for lb in labels if lb.split(":")[0] == name)
        for name in PROFILES
        if any(lb.split(":")[0] == name for lb in labels)
    }
    by_profile = {
        name: [r for r in results if r.profile == label] for name, label in label_of.items()
    }

    report: dict[str, Any] = {"run": run.pk, "profiles": {}, "targets": {}}
    for name, rows in by_profile.items():
        figures: dict[str, Any] = {"cases": len(rows)}
        for subset, tags in SUBSETS.items():
            chosen = [r for r in rows if tags is None or tags & set(r.tags)]
            figures[subset] = {
                m: statistics.fmean(vals)
                if (vals := [r.metrics[m] for r in chosen if r.metrics.get(m) is not None])
                else None
                for m in METRICS
            }
            figures[subset]["n"] = len(chosen)
        latencies = [r.latency_ms for r in rows if not r.error]
        figures["latency_p50_ms"] = percentile(latencies, 0.5)
        figures["latency_p95_ms"] = percentile(latencies, 0.95)
        figures["latency_mean_ms"] = statistics.fmean(latencies) if latencies else 0.0
        figures["model_calls_mean"] = statistics.fmean(r.model_calls for r in rows)
        figures["steps_mean"] = statistics.fmean(
            len([s for s in r.trace if s.get("stage") != "graph"]) for r in rows
        )
        figures["rewrites_mean"] = statistics.fmean(
            len([s for s in r.trace if s.get("stage") == "rewrite"]) for r in rows
        )
        figures["low_confidence"] = sum(
            1
            for r in rows
            if any(
                s.get("stage") == "graph" and s["details"].get("low_confidence") for s in r.trace
            )
        )
        report["profiles"][name] = figures

    # The grader's calibration: a first verdict "incorrect" on an answerable case whose
    # first retrieval already had a relevant source in its top 5 is a wrong "incorrect".
    balanced_hit = {
        r.case_id: (r.metrics.get("recall@5") or 0) > 0 for r in by_profile.get("balanced", [])
    }
    first_verdicts = []
    for r in by_profile.get("corrective", []):
        evaluate = next((s for s in r.trace if s.get("stage") == "evaluate"), None)
        if evaluate is not None and not r.should_refuse:
            details = evaluate["details"]
            # "gate" with no evidence: the relevance floor had emptied the set already.
            floor = details.get("grader") == "gate" and not details.get("relevance")
            hit = balanced_hit.get(r.case_id, False)
            first_verdicts.append((details.get("verdict"), hit and not floor))
    wrong = sum(1 for verdict, hit in first_verdicts if verdict == "incorrect" and hit)
    report["grader"] = {
        "answerable_graded": len(first_verdicts),
        "verdicts": {
            v: sum(1 for x, _ in first_verdicts if x == v)
            for v in ("correct", "ambiguous", "incorrect")
        },
        "wrong_incorrect": wrong,
        "wrong_incorrect_rate": wrong / max(len(first_verdicts), 1),
    }

    def per_case(name: str, metric: str, tags: set[str] | None) -> dict[str, float | None]:
        return {
            r.case_id: (quality(r.metrics) if metric == "quality" else r.metrics.get(metric))
            for r in by_profile[name]
            if tags is None or tags & set(r.tags)
        }

    targets = report["targets"]
    for subset, tags in SUBSETS.items() if {"corrective", "balanced"} <= set(by_profile) else ():
        for metric in ("quality", "recall@5", "mrr", "expected_match"):
            targets[f"corrective-balanced {subset} {metric}"] = paired(
                per_case("corrective", metric, tags),
                per_case("balanced", metric, tags),
                iterations=args.iterations,
                seed=11,
            )
    means = {
        name: statistics.fmean(v for v in per_case(name, "quality", None).values() if v is not None)
        for name in by_profile
        if name != "adaptive"
    }
    best = max(means, key=lambda n: means[n]) if means and "adaptive" in by_profile else ""
    targets["best profile by quality"] = best or "—"
    targets[f"adaptive-{best} all quality"] = (
        {"n": 0}
        if not best
        else paired(
            per_case("adaptive", "quality", None),
            per_case(best, "quality", None),
            iterations=args.iterations,
            seed=11,
        )
    )
    if best:
        targets["adaptive latency share of best"] = report["profiles"]["adaptive"][
            "latency_mean_ms"
        ] / max(report["profiles"][best]["latency_mean_ms"], 1e-9)

    print(f"evaluation run {run.pk}; offline, rerank.kind=none; {len(results)} case results")
    header = f"{'profile':<11}" + "".join(f"{m:>18}" for m in METRICS)
    for subset in SUBSETS:
        print(f"\n{subset}")
        print(header)
        for name in by_profile:
            row = report["profiles"][name][subset]
            print(
                f"{name:<11}"
                + "".join(
                    f"{'—' if row[m] is None else format(row[m], '.3f'):>18}" for m in METRICS
                )
                + f"   n={row['n']}"
            )
    print("\ncost")
    for name in by_profile:
        f = report["profiles"][name]
        print(
            f"{name:<11} model calls {f['model_calls_mean']:.2f}  steps {f['steps_mean']:.1f}  "
            f"rewrites {f['rewrites_mean']:.2f}  low-confidence {f['low_confidence']}  "
            f"p50 {f['latency_p50_ms']:.0f} ms  p95 {f['latency_p95_ms']:.0f} ms  "
            f"mean {f['latency_mean_ms']:.0f} ms"
        )
    g = report["grader"]
    print(
        f"\ngrader (corrective, first verdict on {g['answerable_graded']} answerable cases): "
        f"{g['verdicts']}; wrong 'incorrect' (evidence above the floor, and balanced's ranking had "
        "a relevant source in its top 5): "
        f"{g['wrong_incorrect']} = {g['wrong_incorrect_rate']:.1%}"
    )
    print("\ntargets (paired differences, bootstrap 95 % interval)")
    for key, value in targets.items():
        if isinstance(value, dict) and value.get("n"):
            verdict = "better" if value["better"] else "worse" if value["worse"] else "within CI"
            print(
                f"  {key:<52} {value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"
                f"  n={value['n']}  {verdict}"
            )
        else:
            print(f"  {key:<52} {value}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
