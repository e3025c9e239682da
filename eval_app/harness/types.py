"""Values the evaluation harness passes around, and its errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_K_VALUES: tuple[int, ...] = (5, 10)
# Passages of each profile's ranking the retrieval metrics read (capped by the
# deployment's query_limits.max_top_n).
DEFAULT_DEPTH = 50

# Metrics scored per case (besides the retrieval ones, which carry their k).
ANSWER_METRICS = ("expected_match", "refusal_accuracy", "citation_validity", "groundedness")
RETRIEVAL_METRIC_PREFIXES = ("recall", "precision", "hit_rate", "ndcg")
# Aggregates where lower is better: gate values for them are ceilings, not floors.
LOWER_IS_BETTER = ("latency_p50_ms", "latency_p95_ms", "model_calls")


class EvalError(Exception):
    """An evaluation cannot start or go on; the message says why, fit for a user."""


class UnknownMetric(EvalError):
    """A metric name no evaluation computes; the message lists the known ones."""


class ProfileUnavailable(EvalError):
    """Every requested profile was unavailable (each one's reason is in the message)."""


class GateFileError(EvalError):
    """A gate file cannot be used (bad YAML, unknown metric, unknown profile, bad value)."""


@dataclass(frozen=True)
class ProfileSpec:
    """A profile to evaluate: a named profile plus optional option overrides.

    Written ``NAME`` or ``NAME:OPTION=VALUE+OPTION=VALUE`` (``balanced:rerank.kind=none``);
    the label is that text, normalised, and names the profile in every report.
    """

    name: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if not self.overrides:
            return self.name
        parts = [f"{key}={_format_value(value)}" for key, value in sorted(self.overrides.items())]
        return f"{self.name}:{'+'.join(parts)}"


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class EvalSettings:
    """How a run evaluates: which k, how deep, offline or not."""

    k_values: tuple[int, ...] = DEFAULT_K_VALUES
    depth: int = DEFAULT_DEPTH
    offline: bool = False
    # Score rankings only: no answer call, no answer metrics (public benchmarks).
    retrieval_only: bool = False
    # Run profiles whose cross-encoder is not configured with rerank.kind=none
    # (labelled as such) instead of reporting them as unavailable.
    without_cross_encoder: bool = False
    bootstrap_iterations: int = 2000
    seed: int = 0


def metric_names(k_values: tuple[int, ...] | list[int]) -> list[str]:
    """Every per-case metric a run with these k values scores, in display order."""
    names = [f"{prefix}@{k}" for prefix in RETRIEVAL_METRIC_PREFIXES for k in k_values]
    return [*names, "mrr", *ANSWER_METRICS]


def aggregate_names(k_values: tuple[int, ...] | list[int]) -> list[str]:
    """Every aggregate a run reports (what a gate file may name)."""
    return [*metric_names(k_values), *LOWER_IS_BETTER]
