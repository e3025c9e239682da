"""Read-side queries over evaluation runs: lists, series over time, run comparisons.

Who sees a run (``..._for_user``): a run stores passages, answers and rankings of
the collection it evaluated, so it is shown under that collection's permission.
Evaluation is a staff tool: staff see the runs over the harness's own corpora
(evaluation collections, built from datasets staff chose) and runs not yet attached
to a collection; a run over a workspace collection needs read access to that
collection, staff included; superusers see every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from collections_app.models import Collection
from collections_app.selectors import collections_for_user
from eval_app.harness.aggregate import stages_run
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
    return _dataset_names(EvalRun.objects.all())


def _dataset_names(runs: QuerySet[EvalRun]) -> list[str]:
    names: list[str] = []
    for name in runs.order_by("-created_at").values_list("dataset_name", flat=True):
        if name not in names:
            names.append(name)
    return names


def eval_runs_visible(user: User | AnonymousUser) -> Q:
    """The runs ``user`` may see, as a filter (see the module's docstring)."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    if user.is_superuser:
        return Q()
    visible = Q(collection__in=collections_for_user(user, role="read"))
    if user.is_staff:
        visible |= Q(collection__isnull=True) | Q(collection__purpose=Collection.Purpose.EVALUATION)
    return visible


def eval_runs_for_user(
    user: User | AnonymousUser, *, dataset_name: str | None = None
) -> QuerySet[EvalRun]:
    """The runs ``user`` may see, newest first, optionally of one dataset."""
    return eval_runs(dataset_name=dataset_name).filter(eval_runs_visible(user))


def eval_run_get_for_user(user: User | AnonymousUser, *, run_id: int | str) -> EvalRun:
    """The run ``run_id`` if ``user`` may see it; else ``EvalRunNotFound`` (as if missing)."""
    run = eval_run_get(run_id=run_id)
    if not EvalRun.objects.filter(pk=run.pk).filter(eval_runs_visible(user)).exists():
        raise EvalRunNotFound(f"no evaluation run {run_id!r}")
    return run


def dataset_names_for_user(user: User | AnonymousUser) -> list[str]:
    """Datasets with at least one run ``user`` may see, most recently run first."""
    return _dataset_names(EvalRun.objects.filter(eval_runs_visible(user)))


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
    *,
    dataset_name: str,
    metrics: Sequence[str],
    user: User | AnonymousUser | None = None,
) -> dict[str, dict[str, list[SeriesPoint]]]:
    """``{metric: {profile: [points in time order]}}`` over the dataset's finished runs.

    Only succeeded runs count: a cancelled or failed run's partial figures would
    show as a drop that never happened. With ``user``, only the runs they may see.
    """
    runs = (
        EvalRun.objects.filter(dataset_name=dataset_name, status=EvalRun.Status.SUCCEEDED)
        .filter(eval_runs_visible(user) if user is not None else Q())
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


@dataclass(frozen=True)
class ProfileCost:
    """What one profile of a run cost per case: model calls, stages run, latency."""

    profile: str
    cases: int
    model_calls: float | None
    stages_run: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None


def profile_costs(*, run: EvalRun) -> list[ProfileCost]:
    """Each profile's mean model calls and stages run and its p50/p95 latency, in the run's
    profile order. A run summarised before stages were counted has them counted from its
    stored traces."""
    counted: dict[str, list[int]] = {}
    if any("stages_run" not in (a.get("metrics") or {}) for a in run.aggregates.values()):
        for label, trace, error in run.results.values_list("profile", "trace", "error"):
            if not error:
                counted.setdefault(label, []).append(stages_run(trace or []))
    costs = []
    for label in run.profiles:
        metrics = (run.aggregates.get(label) or {}).get("metrics") or {}
        steps = (metrics.get("stages_run") or {}).get("value")
        if steps is None and counted.get(label):
            steps = sum(counted[label]) / len(counted[label])
        costs.append(
            ProfileCost(
                profile=label,
                cases=int((run.aggregates.get(label) or {}).get("counts", {}).get("cases", 0)),
                model_calls=(metrics.get("model_calls") or {}).get("value"),
                stages_run=steps,
                latency_p50_ms=(metrics.get("latency_p50_ms") or {}).get("value"),
                latency_p95_ms=(metrics.get("latency_p95_ms") or {}).get("value"),
            )
        )
    return costs


# Outcome filters besides the failure stages themselves.
OUTCOME_PASSED = "passed"
OUTCOME_FAILED = "failed"
# Sortable columns of the cases table: the key a link carries, and its ordering.
CASE_SORTS: dict[str, tuple[str, ...]] = {
    "case": ("case_id", "profile_rank"),
    "profile": ("profile_rank", "case_id"),
    "outcome": ("stage_rank", "case_id", "profile_rank"),
    "latency": ("latency_ms", "case_id", "profile_rank"),
}
DEFAULT_CASE_SORT = "case"


@dataclass(frozen=True)
class CaseFilter:
    """What the cases table of a run shows: text, profile, outcome, order.

    ``outcome`` is "" (every case), "passed", "failed" (any stage) or one failure
    stage; ``sort`` a key of ``CASE_SORTS``, "-" in front for descending.
    """

    text: str = ""
    profile: str = ""
    outcome: str = ""
    sort: str = DEFAULT_CASE_SORT

    @property
    def sort_key(self) -> str:
        key = self.sort.removeprefix("-")
        return key if key in CASE_SORTS else DEFAULT_CASE_SORT

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-") and self.sort_key == self.sort[1:]

    @property
    def order(self) -> str:
        """The sort as a link carries it: a known key, "-" in front when descending."""
        return f"-{self.sort_key}" if self.descending else self.sort_key


def case_results_filter(*, run: EvalRun, filters: CaseFilter) -> QuerySet[EvalCaseResult]:
    """The run's case results that match ``filters``, in its order.

    Profiles sort in the run's comparison order, outcomes in pipeline order
    (passed first, then the stage that lost the case, earliest stage first).
    """
    results = run.results.all()
    text = filters.text.strip()
    if text:
        results = results.filter(
            Q(case_id__icontains=text)
            | Q(question__icontains=text)
            | Q(failure_detail__icontains=text)
        )
    if filters.profile:
        results = results.filter(profile=filters.profile)
    if filters.outcome == OUTCOME_PASSED:
        results = results.filter(failure_stage="")
    elif filters.outcome == OUTCOME_FAILED:
        results = results.exclude(failure_stage="")
    elif filters.outcome:
        results = results.filter(failure_stage=filters.outcome)
    stages = [stage for stage, _label in EvalCaseResult.Stage.choices]
    results = results.annotate(
        profile_rank=_rank("profile", list(run.profiles)),
        stage_rank=_rank("failure_stage", ["", *stages]),
    )
    order = CASE_SORTS[filters.sort_key]
    if filters.descending:
        order = (f"-{order[0]}", *order[1:])
    return results.order_by(*order, "pk")


def _rank(field_name: str, values: Sequence[str]) -> Case:
    """An integer column: the position of ``field_name``'s value in ``values`` (else last)."""
    return Case(
        *[When(**{field_name: value}, then=Value(i)) for i, value in enumerate(values)],
        default=Value(len(values)),
        output_field=IntegerField(),
    )


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
