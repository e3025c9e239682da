"""Browser pages of evaluation: runs, a run's report, two runs compared, one case.

Views parse input, call one service or selector and render. A run is shown under
the permission of the collection it evaluated (``eval_app.selectors``: staff see
the evaluation corpora's runs, a workspace collection's runs need read access to
it); starting and cancelling runs (which ingest and use the CPU for minutes) is for
staff. A running run's page polls its progress partial with htmx.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import plotly
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST

from eval_app import charts
from eval_app.datasets import DatasetError
from eval_app.forms import CaseFilterForm, EvalStartForm
from eval_app.harness.aggregate import STAGE_KEYS
from eval_app.harness.report import STAGE_LABELS, format_interval, judge_words
from eval_app.harness.types import LOWER_IS_BETTER, EvalError, metric_names
from eval_app.models import EvalRun
from eval_app.selectors import (
    DEFAULT_CASE_SORT,
    CaseFilter,
    EvalCaseNotFound,
    EvalRunNotFound,
    case_results,
    case_results_filter,
    dataset_names_for_user,
    eval_run_get_for_user,
    eval_runs_for_user,
    metric_series,
    profile_costs,
    runs_compare,
)
from eval_app.services import eval_run_cancel, eval_run_create, eval_run_enqueue
from query_app.exceptions import QueryError
from ragsite.web import csp_nonce, is_htmx

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _run(request: HttpRequest, run_id: int) -> EvalRun:
    """The run, if the viewer may see it (its collection's permission); else 404."""
    try:
        return eval_run_get_for_user(request.user, run_id=run_id)
    except EvalRunNotFound:
        raise Http404("No such evaluation run") from None


@require_GET
@cache_control(public=True, max_age=60 * 60 * 24 * 365, immutable=True)
def plotly_js(request: HttpRequest) -> FileResponse:
    """plotly.js as bundled in the installed ``plotly`` package (versioned URL)."""
    return FileResponse(PLOTLY_JS.open("rb"), content_type="text/javascript")


def _trend_metrics(k_values: list[int]) -> list[str]:
    first, last = (k_values[0], k_values[-1]) if k_values else (5, 10)
    return [f"recall@{first}", "mrr", f"ndcg@{last}", "refusal_accuracy", "latency_p95_ms"]


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """Metrics over time for one dataset, recent runs, and the form to start one."""
    names = dataset_names_for_user(request.user)
    dataset = request.GET.get("dataset") or (names[0] if names else "")
    latest = (
        eval_runs_for_user(request.user, dataset_name=dataset)
        .filter(status=EvalRun.Status.SUCCEEDED)
        .first()
    )
    figures = []
    costs = profile_costs(run=latest) if latest is not None else []
    cost_figure = (
        charts.figure_html(
            charts.profile_cost_figure(costs), div_id="profile-cost", nonce=csp_nonce(request)
        )
        if costs
        else ""
    )
    if dataset:
        trend = _trend_metrics(latest.k_values if latest else [])
        series = metric_series(dataset_name=dataset, metrics=trend, user=request.user)
        for index, metric in enumerate(trend):
            if series[metric]:
                figure = charts.metric_over_time_figure(metric, series[metric])
                figures.append(
                    charts.figure_html(figure, div_id=f"trend-{index}", nonce=csp_nonce(request))
                )
    return render(
        request,
        "eval/dashboard.html",
        {
            "datasets": names,
            "dataset": dataset,
            "figures": figures,
            "latest": latest,
            "costs": costs,
            "cost_figure": cost_figure,
            "runs": eval_runs_for_user(request.user)[:10],
            "form": EvalStartForm() if request.user.is_staff else None,
        },
    )


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    """Every run, newest first, with links to compare two of them."""
    dataset = request.GET.get("dataset") or None
    runs = eval_runs_for_user(request.user, dataset_name=dataset)
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    return render(
        request,
        "eval/runs.html",
        {"page": page, "datasets": dataset_names_for_user(request.user), "dataset": dataset or ""},
    )


@login_required
@require_POST
def run_start(request: HttpRequest) -> HttpResponse:
    """Create a run from the form and start it in the background."""
    if not request.user.is_staff:
        messages.error(request, "Only staff can start evaluation runs.")
        return redirect("eval:dashboard")
    form = EvalStartForm(request.POST)
    if form.is_valid():
        try:
            run = eval_run_create(
                dataset_path=form.dataset_path(),
                compare=form.compare(),
                offline=form.cleaned_data["offline"],
                k_values=form.cleaned_data["k"],
                without_cross_encoder=form.cleaned_data["without_cross_encoder"],
                user=request.user,
            )
        except (DatasetError, EvalError, QueryError) as exc:
            form.add_error(None, str(exc))
        else:
            eval_run_enqueue(run=run)
            messages.success(request, f"Evaluation run {run.pk} started.")
            return redirect("eval:run", run_id=run.pk)
    return render(
        request,
        "eval/dashboard.html",
        {
            "datasets": dataset_names_for_user(request.user),
            "dataset": "",
            "figures": [],
            "runs": eval_runs_for_user(request.user)[:10],
            "form": form,
        },
        status=400,
    )


@login_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Ask a run to stop after its current case (partial results are kept)."""
    run = _run(request, run_id)
    if not request.user.is_staff:
        messages.error(request, "Only staff can cancel evaluation runs.")
    elif run.is_finished:
        messages.info(request, f"Run {run.pk} has already finished.")
    else:
        eval_run_cancel(run=run)
        messages.success(request, f"Run {run.pk} will stop after its current case.")
    return redirect("eval:run", run_id=run.pk)


def _metric_rows(run: EvalRun) -> list[dict[str, object]]:
    rows = []
    for name in [*metric_names(run.k_values), *LOWER_IS_BETTER]:
        cells = [
            format_interval(run.aggregates.get(label, {}).get("metrics", {}).get(name))
            for label in run.profiles
        ]
        rows.append({"name": name, "cells": cells})
    return rows


def _pair_rows(run: EvalRun) -> list[dict[str, object]]:
    pairs = run.comparisons.get("pairs", [])
    rows = []
    for name in [*metric_names(run.k_values), "latency_ms"]:
        entries = [p["metrics"].get(name) or {} for p in pairs]
        rows.append(
            {
                "name": name,
                "cells": [
                    {"text": format_interval(e, signed=True), "significant": e.get("significant")}
                    for e in entries
                ],
            }
        )
    return rows


CASE_COLUMNS = [
    ("case", "Case"),
    ("profile", "Profile"),
    ("outcome", "Outcome"),
    ("latency", "Latency"),
]
CASES_PER_PAGE = 100


def _cases_context(request: HttpRequest, run: EvalRun) -> dict[str, Any]:
    """The cases table: filter form, sortable headers, one page of rows, CSV link."""
    form = CaseFilterForm(request.GET, profiles=list(run.profiles))
    filters = form.filters()
    page = Paginator(case_results_filter(run=run, filters=filters), CASES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    query = _case_query(filters)
    columns = []
    for key, label in CASE_COLUMNS:
        current = filters.sort_key == key
        ascending_next = not current or filters.descending
        columns.append(
            {
                "label": label,
                "key": key,
                "numeric": key == "latency",
                "href": "?"
                + _case_query(filters, sort=key if ascending_next else f"-{key}")
                + "#cases-h",
                "aria_sort": (
                    ("descending" if filters.descending else "ascending") if current else ""
                ),
            }
        )
    return {
        "case_form": form,
        "case_filters": filters,
        "case_page": page,
        "case_columns": columns,
        "case_query": query,
        "cases_csv": reverse("eval:cases_csv", args=[run.pk]) + (f"?{query}" if query else ""),
        "case_filtered": bool(filters.text or filters.profile or filters.outcome),
    }


def _case_query(filters: CaseFilter, *, sort: str | None = None) -> str:
    """The query string of ``filters`` (with another sort), for links and the CSV export."""
    query = QueryDict(mutable=True)
    for name, value in (
        ("q", filters.text),
        ("profile", filters.profile),
        ("outcome", filters.outcome),
    ):
        if value:
            query[name] = value
    wanted = sort if sort is not None else filters.order
    if wanted != DEFAULT_CASE_SORT:
        query["sort"] = wanted
    return query.urlencode()


@login_required
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's report; while it runs, htmx polls the progress partial.

    The cases table is filtered and sorted server-side (``?q=&profile=&outcome=&sort=``);
    htmx swaps just the table when the filter changes.
    """
    run = _run(request, run_id)
    if is_htmx(request) and request.headers.get("HX-Target") == "cases":
        return render(request, "eval/run.html#cases", {"run": run, **_cases_context(request, run)})
    if is_htmx(request):
        response = render(request, "eval/run.html#progress", {"run": run})
        if run.is_finished and request.GET.get("poll"):
            # The results need the whole page (tables and plots): reload it once.
            response["HX-Refresh"] = "true"
        return response
    context: dict[str, object] = {"run": run}
    if run.aggregates:
        metric = f"ndcg@{run.k_values[-1]}" if run.k_values else "mrr"
        context.update(
            {
                "metric_rows": _metric_rows(run),
                "pairs": run.comparisons.get("pairs", []),
                "pair_rows": _pair_rows(run),
                "stage_rows": [
                    {
                        "label": STAGE_LABELS[stage],
                        "cells": [
                            run.failure_stages.get(label, {}).get(stage, 0)
                            for label in run.profiles
                        ],
                    }
                    for stage in STAGE_KEYS
                ],
                "judges": [
                    (label, judge_words(run.judges.get(label, {}))) for label in run.profiles
                ],
                "quality_figure": charts.figure_html(
                    charts.quality_latency_figure(run, metric=metric),
                    div_id="quality-latency",
                    nonce=csp_nonce(request),
                ),
                "stages_figure": charts.figure_html(
                    charts.failure_stages_figure(run),
                    div_id="failure-stages",
                    nonce=csp_nonce(request),
                ),
                "compare_with": eval_runs_for_user(request.user, dataset_name=run.dataset_name)
                .exclude(pk=run.pk)
                .filter(status=EvalRun.Status.SUCCEEDED)[:20],
            }
        )
        context.update(_cases_context(request, run))
    return render(request, "eval/run.html", context)


CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(value: str) -> str:
    """Text a spreadsheet will not run as a formula (a question may start with "=")."""
    return f"'{value}" if value.startswith(CSV_FORMULA_START) else value


@login_required
@require_GET
def run_cases_csv(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's cases as CSV, filtered and sorted like the table (every page)."""
    run = _run(request, run_id)
    filters = CaseFilterForm(request.GET, profiles=list(run.profiles)).filters()
    metrics = metric_names(run.k_values)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="eval-run-{run.pk}-cases.csv"'
    writer = csv.writer(response)
    writer.writerow(
        [
            "case_id",
            "profile",
            "outcome",
            "failure_stage",
            "failure_detail",
            "question",
            "tags",
            "should_refuse",
            "refused",
            "latency_ms",
            "model_calls",
            *metrics,
        ]
    )
    rows = case_results_filter(run=run, filters=filters).only(
        "case_id",
        "profile",
        "failure_stage",
        "failure_detail",
        "question",
        "tags",
        "should_refuse",
        "refused",
        "latency_ms",
        "model_calls",
        "metrics",
    )
    for result in rows.iterator(chunk_size=500):
        writer.writerow(
            [
                _csv_text(result.case_id),
                _csv_text(result.profile),
                "passed" if result.passed else STAGE_LABELS.get(result.failure_stage, ""),
                result.failure_stage,
                _csv_text(result.failure_detail),
                _csv_text(result.question),
                _csv_text(";".join(str(tag) for tag in result.tags or [])),
                "yes" if result.should_refuse else "no",
                "yes" if result.refused else "no",
                f"{result.latency_ms:.1f}",
                result.model_calls,
                *["" if (v := result.metrics.get(name)) is None else v for name in metrics],
            ]
        )
    return response


@login_required
@require_GET
def runs_compare_view(request: HttpRequest) -> HttpResponse:
    """Two runs side by side (``?a=<before>&b=<after>``) with the cases that changed."""
    try:
        a = eval_run_get_for_user(request.user, run_id=request.GET.get("a", ""))
        b = eval_run_get_for_user(request.user, run_id=request.GET.get("b", ""))
    except EvalRunNotFound as exc:
        messages.error(request, f"Choose two runs to compare: {exc}.")
        return redirect(reverse("eval:runs"))
    comparison = runs_compare(a=a, b=b)
    rows = []
    for name in [*metric_names(b.k_values), *LOWER_IS_BETTER]:
        cells = []
        for label in comparison.profiles:
            for run in (a, b):
                entry = run.aggregates.get(label, {}).get("metrics", {}).get(name)
                cells.append(format_interval(entry))
        rows.append({"name": name, "cells": cells})
    return render(
        request,
        "eval/compare.html",
        {"comparison": comparison, "a": a, "b": b, "rows": rows},
    )


@login_required
@require_GET
def case_detail(request: HttpRequest, run_id: int, case_id: str) -> HttpResponse:
    """One case: each profile's answer, ranked passages and trace."""
    run = _run(request, run_id)
    try:
        results = case_results(run=run, case_id=case_id)
    except EvalCaseNotFound:
        raise Http404("No such case in this run") from None
    return render(
        request,
        "eval/case.html",
        {"run": run, "results": results, "case": results[0], "k": max(run.k_values or [10])},
    )
