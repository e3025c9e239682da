"""The CI gate: floors per profile and metric, and no real regression against a baseline.

A gate file is YAML::

    fast:                       # a profile label, as in --compare
      recall@5: 0.80            # the aggregate must be at least this
      mrr: 0.70
      latency_p95_ms: 500       # lower-is-better metrics: a ceiling
    "balanced:rerank.kind=none":
      ndcg@10: 0.75
    max_regression: 0.02        # optional: with --baseline, the drop tolerated per metric
                                #   (a number, or {metric: drop})

Against a baseline run, a gated metric fails when its paired difference to the
baseline is significantly negative (the whole 95% interval below zero) **and** the
mean drop exceeds ``max_regression`` (0 when not given): noise is never a failure.
Metric names are checked before the run starts; k values named in the file are
added to the run's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eval_app.harness.types import (
    ANSWER_METRICS,
    LOWER_IS_BETTER,
    RETRIEVAL_METRIC_PREFIXES,
    GateFileError,
    UnknownMetric,
    aggregate_names,
)
from eval_app.models import EvalRun

_AT_K = re.compile(r"^(?P<prefix>[a-z_]+)@(?P<k>\d+)$")
MAX_REGRESSION_KEY = "max_regression"


@dataclass
class GateSpec:
    """Floors (or ceilings) per profile label and metric, and the tolerated regression."""

    path: Path
    floors: dict[str, dict[str, float]]
    max_regression: dict[str, float] = field(default_factory=dict)
    default_regression: float = 0.0

    @property
    def k_values(self) -> set[int]:
        """The k values the gate's metrics need."""
        ks = set()
        for metrics in self.floors.values():
            for name in metrics:
                match = _AT_K.match(name)
                if match:
                    ks.add(int(match.group("k")))
        return ks

    def regression_allowed(self, metric: str) -> float:
        return self.max_regression.get(metric, self.default_regression)


def metric_check(name: str) -> None:
    """Raise ``UnknownMetric`` (listing the known names) unless ``name`` is a metric."""
    match = _AT_K.match(name)
    if match and match.group("prefix") in RETRIEVAL_METRIC_PREFIXES and int(match.group("k")) >= 1:
        return
    if name in ("mrr", *ANSWER_METRICS, *LOWER_IS_BETTER):
        return
    known = ", ".join(
        [f"{p}@K" for p in RETRIEVAL_METRIC_PREFIXES] + ["mrr", *ANSWER_METRICS, *LOWER_IS_BETTER]
    )
    raise UnknownMetric(f"unknown metric {name!r}; known metrics: {known} (K a whole number)")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GateFileError(f"{where} must be a number, got {value!r}")
    return float(value)


def gate_load(path: Path) -> GateSpec:
    """Read and check a gate file; raises ``GateFileError`` / ``UnknownMetric``."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GateFileError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise GateFileError(f"{path}{where}: malformed YAML: {exc}") from exc
    if not isinstance(data, Mapping) or not data:
        raise GateFileError(
            f"{path}: a gate file maps profile labels to {{metric: floor}} (and max_regression)"
        )
    floors: dict[str, dict[str, float]] = {}
    spec = GateSpec(path=path, floors=floors)
    for key, value in data.items():
        if key == MAX_REGRESSION_KEY:
            if isinstance(value, Mapping):
                for metric, drop in value.items():
                    metric_check(str(metric))
                    spec.max_regression[str(metric)] = _number(
                        drop, f"{path}: max_regression of {metric}"
                    )
            else:
                spec.default_regression = _number(value, f"{path}: max_regression")
            continue
        if not isinstance(value, Mapping) or not value:
            raise GateFileError(f"{path}: profile {key!r} must map metrics to floors")
        floors[str(key)] = {}
        for metric, floor in value.items():
            try:
                metric_check(str(metric))
            except UnknownMetric as exc:
                raise UnknownMetric(f"{path}: profile {key!r}: {exc}") from exc
            floors[str(key)][str(metric)] = _number(floor, f"{path}: {key} {metric}")
    if not floors:
        raise GateFileError(f"{path}: the gate names no profile")
    return spec


def gate_check_profiles(spec: GateSpec, labels: list[str]) -> None:
    """Raise ``GateFileError`` when the gate names a profile the run does not compare."""
    missing = [label for label in spec.floors if label not in labels]
    if missing:
        raise GateFileError(
            f"{spec.path}: the gate names profile(s) {', '.join(missing)} that the run does not "
            f"compare (compared: {', '.join(labels)})"
        )


@dataclass
class GateResult:
    """What the gate checked and what failed; ``passed`` when nothing failed."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failures": self.failures, "checks": self.checks}


def gate_evaluate(spec: GateSpec, run: EvalRun) -> GateResult:
    """Check a finished run against the floors and, when it has one, its baseline."""
    result = GateResult()
    known = set(aggregate_names(run.k_values))
    for label, metrics in spec.floors.items():
        if label in run.unavailable:
            result.failures.append(f"{label}: did not run ({run.unavailable[label]})")
            continue
        aggregates = run.aggregates.get(label)
        if aggregates is None:
            result.failures.append(f"{label}: no results in this run")
            continue
        for metric, floor in metrics.items():
            if metric not in known:
                result.failures.append(f"{label}: {metric} was not computed by this run")
                continue
            value = aggregates["metrics"][metric]["value"]
            ceiling = metric in LOWER_IS_BETTER
            ok = value is not None and (value <= floor if ceiling else value >= floor)
            result.checks.append(
                {
                    "profile": label,
                    "metric": metric,
                    "value": value,
                    "limit": floor,
                    "kind": "ceiling" if ceiling else "floor",
                    "passed": ok,
                }
            )
            if not ok:
                shown = "no value" if value is None else f"{value:.4g}"
                relation = "above the ceiling" if ceiling else "below the floor"
                result.failures.append(f"{label}: {metric} = {shown}, {relation} {floor:g}")
    baseline = run.comparisons.get("baseline")
    if baseline:
        _check_regressions(spec, baseline, result)
    return result


def _check_regressions(spec: GateSpec, baseline: dict[str, Any], result: GateResult) -> None:
    for label, metrics in spec.floors.items():
        diffs = baseline.get("profiles", {}).get(label)
        if diffs is None:
            continue
        for metric in metrics:
            diff = diffs.get(metric)
            if metric in LOWER_IS_BETTER or not diff or diff.get("value") is None:
                continue
            allowed = spec.regression_allowed(metric)
            regressed = diff["high"] < 0 and -diff["value"] > allowed
            result.checks.append(
                {
                    "profile": label,
                    "metric": metric,
                    "value": diff["value"],
                    "low": diff["low"],
                    "high": diff["high"],
                    "limit": -allowed,
                    "kind": "regression",
                    "passed": not regressed,
                }
            )
            if regressed:
                result.failures.append(
                    f"{label}: {metric} regressed by {-diff['value']:.4g} against run "
                    f"{baseline.get('run')} (95% interval {diff['low']:+.4g} .. "
                    f"{diff['high']:+.4g}; tolerated {allowed:g})"
                )
