"""From per-case results to a report: means with bootstrap intervals, paired differences,
failure stages and which judges ran.

Aggregates are recomputed from the stored per-case rows, so a cancelled or resumed
run is summarised exactly like a complete one. Intervals are 95% percentile
bootstraps over cases with a fixed seed: the same rows always give the same figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_app.harness.types import metric_names
from eval_app.metrics import bootstrap_ci, paired_difference_ci, percentile
from eval_app.models import EvalCaseResult

STAGE_KEYS = [choice for choice, _label in EvalCaseResult.Stage.choices]
# Per-case values compared pairwise besides the metrics.
PAIRED_EXTRA = ("latency_ms",)


@dataclass
class ResultRecord:
    """The part of a stored case result the aggregates need."""

    profile: str
    case_id: str
    metrics: dict[str, float | None]
    latency_ms: float = 0.0
    model_calls: int = 0
    # Stage (graph node) runs of the answer; the graph's closing step is not one.
    stages_run: int = 0
    failure_stage: str = ""
    mode: str = ""
    judge: str = ""
    error: str = ""
    tags: list[str] = field(default_factory=list)

    @classmethod
    def from_result(cls, result: EvalCaseResult) -> ResultRecord:
        return cls(
            profile=result.profile,
            case_id=result.case_id,
            metrics=dict(result.metrics),
            latency_ms=result.latency_ms,
            model_calls=result.model_calls,
            stages_run=stages_run(result.trace),
            failure_stage=result.failure_stage,
            mode=result.mode,
            judge=(result.groundedness or {}).get("judge", ""),
            error=result.error,
            tags=list(result.tags),
        )

    def value(self, name: str) -> float | None:
        if name == "latency_ms":
            return None if self.error else self.latency_ms
        return self.metrics.get(name)


def stages_run(trace: Sequence[dict[str, Any]]) -> int:
    """How many stages (graph nodes, each loop counted) a stored trace ran."""
    return sum(1 for step in trace if step.get("stage") != "graph")


def _interval(values: list[float], *, iterations: int, seed: int) -> dict[str, Any]:
    if not values:
        return {"value": None, "low": None, "high": None, "n": 0}
    mean, low, high = bootstrap_ci(values, iterations=iterations, seed=seed)
    return {"value": mean, "low": low, "high": high, "n": len(values)}


def profile_aggregate(
    records: Sequence[ResultRecord], *, k_values: Sequence[int], iterations: int, seed: int
) -> dict[str, Any]:
    """Means with intervals for every metric, latency percentiles, calls and counts."""
    metrics: dict[str, Any] = {}
    for name in metric_names(list(k_values)):
        values = [v for r in records if (v := r.value(name)) is not None]
        metrics[name] = _interval(values, iterations=iterations, seed=seed)
    latencies = [r.latency_ms for r in records if not r.error]
    for name, p in (("latency_p50_ms", 50), ("latency_p95_ms", 95)):
        metrics[name] = {
            "value": percentile(latencies, p) if latencies else None,
            "low": None,
            "high": None,
            "n": len(latencies),
        }
    calls = [r.model_calls for r in records if not r.error]
    metrics["model_calls"] = {
        "value": sum(calls) / len(calls) if calls else None,
        "low": None,
        "high": None,
        "n": len(calls),
        "total": sum(calls),
    }
    steps = [r.stages_run for r in records if not r.error]
    metrics["stages_run"] = {
        "value": sum(steps) / len(steps) if steps else None,
        "low": None,
        "high": None,
        "n": len(steps),
    }
    counts = {
        "cases": len(records),
        "answered": sum(1 for r in records if r.mode in ("llm", "extractive")),
        "refused": sum(1 for r in records if r.mode == "not-found"),
        "errors": sum(1 for r in records if r.error),
        "failed": sum(1 for r in records if r.failure_stage),
    }
    return {"metrics": metrics, "counts": counts}


def failure_breakdown(records: Iterable[ResultRecord]) -> dict[str, int]:
    """How many cases each stage lost (every stage listed, zeros included)."""
    counts = Counter(r.failure_stage for r in records if r.failure_stage)
    return {stage: counts.get(stage, 0) for stage in STAGE_KEYS}


def judges_used(records: Iterable[ResultRecord]) -> dict[str, dict[str, int]]:
    """Which generator answered and which judge checked groundedness, with counts."""
    records = list(records)
    return {
        "answers": dict(Counter(r.mode or "error" for r in records)),
        "groundedness": dict(Counter(r.judge for r in records if r.judge)),
    }


def paired_differences(
    current: Sequence[ResultRecord],
    reference: Sequence[ResultRecord],
    *,
    names: Sequence[str],
    iterations: int,
    seed: int,
) -> dict[str, Any]:
    """Per metric: mean of (current - reference) over the cases both scored, with its
    paired bootstrap interval; ``significant`` when the interval excludes 0."""
    by_case = {r.case_id: r for r in reference}
    differences: dict[str, Any] = {}
    for name in [*names, *PAIRED_EXTRA]:
        a: list[float] = []
        b: list[float] = []
        for record in current:
            other = by_case.get(record.case_id)
            if other is None:
                continue
            x, y = record.value(name), other.value(name)
            if x is not None and y is not None:
                a.append(x)
                b.append(y)
        if not a:
            differences[name] = {"value": None, "low": None, "high": None, "n": 0}
            continue
        mean, low, high = paired_difference_ci(a, b, iterations=iterations, seed=seed)
        differences[name] = {
            "value": mean,
            "low": low,
            "high": high,
            "n": len(a),
            "significant": low > 0 or high < 0,
        }
    return differences


@dataclass
class Summary:
    """Everything a run stores about its results as a whole."""

    aggregates: dict[str, Any]
    failure_stages: dict[str, Any]
    judges: dict[str, Any]
    comparisons: dict[str, Any]


def summarise(
    records: Sequence[ResultRecord],
    *,
    profiles: Sequence[str],
    k_values: Sequence[int],
    iterations: int = 2000,
    seed: int = 0,
    baseline: Sequence[ResultRecord] | None = None,
    baseline_run: dict[str, Any] | None = None,
) -> Summary:
    """Aggregate every profile, compare each to the first one and to the baseline run."""
    by_profile: dict[str, list[ResultRecord]] = {label: [] for label in profiles}
    for record in records:
        by_profile.setdefault(record.profile, []).append(record)
    names = metric_names(list(k_values))
    aggregates = {
        label: profile_aggregate(rows, k_values=k_values, iterations=iterations, seed=seed)
        for label, rows in by_profile.items()
    }
    comparisons: dict[str, Any] = {"reference": profiles[0] if profiles else None, "pairs": []}
    for label in list(profiles)[1:]:
        comparisons["pairs"].append(
            {
                "profile": label,
                "reference": profiles[0],
                "metrics": paired_differences(
                    by_profile[label],
                    by_profile[profiles[0]],
                    names=names,
                    iterations=iterations,
                    seed=seed,
                ),
            }
        )
    if baseline is not None:
        base_by_profile: dict[str, list[ResultRecord]] = {}
        for record in baseline:
            base_by_profile.setdefault(record.profile, []).append(record)
        comparisons["baseline"] = {
            **(baseline_run or {}),
            "profiles": {
                label: paired_differences(
                    by_profile[label],
                    base_by_profile[label],
                    names=names,
                    iterations=iterations,
                    seed=seed,
                )
                for label in profiles
                if label in base_by_profile
            },
            "missing": [label for label in profiles if label not in base_by_profile],
        }
    return Summary(
        aggregates=aggregates,
        failure_stages={label: failure_breakdown(rows) for label, rows in by_profile.items()},
        judges={label: judges_used(rows) for label, rows in by_profile.items()},
        comparisons=comparisons,
    )
