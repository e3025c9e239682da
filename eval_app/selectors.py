"""Read-side queries over evaluation runs: lists, series over time, run comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from eval_app.models import EvalCaseResult, EvalRun


class EvalRunNotFound(Exception):
    """No evaluation run with that id."""


class EvalCaseNotFound(Exception):
    """The run has no result for that case."""


def eval_runs(*, dataset_name: str | None = None) -> QuerySet[EvalRun]:
    """Runs, newest first, optionally of one dataset."""
    runs = EvalRun.objects.select_related("created_by").defer("comparisons", "options", "ingestion")
    if dataset_name:
        runs = runs.filter(dataset_name=dataset_name)
    return runs


def eval_run_get(*, run_id: int | str) -> EvalRun:
    """The run ``run_id``, else ``EvalRunNotFound``."""
    try:
        return EvalRun.objects.select_related("created_by", "baseline", "collection").get(
            pk=int(run_id)
        )
    except (EvalRun.DoesNotExist, ValueError, TypeError):
        raise EvalRunNotFound(f"no evaluation run {run_id!r}") from None


def dataset_names() -> list[str]:
    """Datasets that have at least one run, most recently run first."""
    names: list[str] = []
    for name in EvalRun.objects.order_by("-created_at").values_list("dataset_name", flat=True):
        if name not in names:
            names.append(name)
    return names


@dataclass
class SeriesPoint:
    """One profile's value of one metric in one run, with its interval."""

    run_id: int
    when: Any
    code_version: str
    value: float
    low: float | None
    high: float | None


def metric_series(
    *, dataset_name: str, metrics: Sequence[str]
) -> dict[str, dict[str, list[SeriesPoint]]]:
    """``{metric: {profile: [points in time order]}}`` over the dataset's finished runs.

    Only succeeded runs count: a cancelled or failed run's partial figures would
    show as a drop that never happened.
    """
    runs = (
        EvalRun.objects.filter(dataset_name=dataset_name, status=EvalRun.Status.SUCCEEDED)
        .order_by("finished_at", "id")
        .only("id", "finished_at", "code_version", "aggregates", "profiles")
    )
    series: dict[str, dict[str, list[SeriesPoint]]] = {metric: {} for metric in metrics}
    for run in runs:
        for label, aggregate in run.aggregates.items():
            for metric in metrics:
                entry = aggregate.get("metrics", {}).get(metric)
                if not entry or entry.get("value") is None:
                    continue
                series[metric].setdefault(label, []).append(
                    SeriesPoint(
                        run_id=run.pk,
                        when=run.finished_at,
                        code_version=run.code_version,
                        value=entry["value"],
                        low=entry.get("low"),
                        high=entry.get("high"),
                    )
                )
    return series


def case_results(*, run: EvalRun, case_id: str) -> list[EvalCaseResult]:
    """Every profile's result for one case of the run, in the run's profile order."""
    results = list(run.results.filter(case_id=case_id))
    if not results:
        raise EvalCaseNotFound(f"run {run.pk} has no case {case_id!r}")
    order = {label: i for i, label in enumerate(run.profiles)}
    return sorted(results, key=lambda r: order.get(r.profile, len(order)))


@dataclass
class ProfileChanges:
    """How one profile's cases changed from run A to run B."""

    profile: str
    fixed: list[dict[str, Any]] = field(default_factory=list)  # failed in A, pass in B
    broken: list[dict[str, Any]] = field(default_factory=list)  # passed in A, fail in B
    still_failing: int = 0
    common: int = 0


@dataclass
class RunComparison:
    """Two runs side by side: per-profile aggregates and the cases that changed."""

    a: EvalRun
    b: EvalRun
    profiles: list[str]
    changes: list[ProfileChanges]

    @property
    def same_data(self) -> bool:
        return self.a.content_hash == self.b.content_hash


def runs_compare(*, a: EvalRun, b: EvalRun) -> RunComparison:
    """Compare run ``a`` (before) with run ``b`` (after) on the profiles both evaluated."""
    profiles = [label for label in b.profiles if label in a.profiles]
    fields = ("profile", "case_id", "question", "failure_stage")
    before = {(r["profile"], r["case_id"]): r for r in a.results.values(*fields)}
    changes = []
    for label in profiles:
        change = ProfileChanges(profile=label)
        for row in b.results.filter(profile=label).values(*fields).order_by("case_id"):
            old = before.get((label, row["case_id"]))
            if old is None:
                continue
            change.common += 1
            entry = {
                "case_id": row["case_id"],
                "question": row["question"],
                "before": old["failure_stage"],
                "after": row["failure_stage"],
            }
            if old["failure_stage"] and not row["failure_stage"]:
                change.fixed.append(entry)
            elif row["failure_stage"] and not old["failure_stage"]:
                change.broken.append(entry)
            elif row["failure_stage"]:
                change.still_failing += 1
        changes.append(change)
    return RunComparison(a=a, b=b, profiles=profiles, changes=changes)
