"""Plotly figures of the dashboard, rendered as HTML fragments.

Figures are built with the ``plotly`` Python package and rendered without the
library (``include_plotlyjs=False``); pages load the package's own bundled
``plotly.min.js`` from ``eval:plotly_js``, never from a CDN.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go

from eval_app.harness.aggregate import STAGE_KEYS
from eval_app.models import EvalCaseResult, EvalRun
from eval_app.selectors import ProfileCost, SeriesPoint

STAGE_LABELS = dict(EvalCaseResult.Stage.choices)
_CONFIG = {"displaylogo": False, "responsive": True}
# Points of different profiles of one run sit this share of the time axis apart.
PROFILE_SPREAD = 0.012
SINGLE_RUN_SPAN = timedelta(minutes=10)
_LAYOUT: dict[str, Any] = {
    "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
    "height": 320,
    "template": "plotly_white",
    "legend": {"orientation": "h", "y": -0.2},
}


def figure_html(figure: go.Figure, *, div_id: str, nonce: str = "") -> str:
    """The figure as a ``<div>`` plus its inline script (plotly.js loaded by the page).

    ``nonce`` is the response's Content-Security-Policy nonce (``request.csp_nonce``),
    without which the browser would not run the inline script. plotly escapes every
    ``<`` of the figure's data, so its own ``<script>`` tag is the only one.
    """
    html = figure.to_html(include_plotlyjs=False, full_html=False, config=_CONFIG, div_id=div_id)
    return html.replace("<script>", f'<script nonce="{nonce}">') if nonce else html


def _error_bars(points: Sequence[SeriesPoint]) -> dict[str, Any] | None:
    if not any(p.low is not None for p in points):
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [(p.high - p.value) if p.high is not None else 0 for p in points],
        "arrayminus": [(p.value - p.low) if p.low is not None else 0 for p in points],
    }


def profile_offsets(
    series: dict[str, list[SeriesPoint]], *, share: float = PROFILE_SPREAD
) -> dict[str, timedelta]:
    """How far each profile's points move along the time axis so they sit side by side.

    Every profile of a run is measured at the same moment, so their points (and
    error bars) would be drawn on top of each other. Each profile gets its own
    small, fixed offset (profiles in series order, centred on the true time): a
    ``share`` of the axis's span between neighbours (of ``SINGLE_RUN_SPAN`` when
    there is one run), so they are apart on screen whatever the span.
    """
    labels = list(series)
    times = [p.when for points in series.values() for p in points if p.when is not None]
    span = max(times) - min(times) if times else timedelta(0)
    step = (span or SINGLE_RUN_SPAN) * share
    middle = (len(labels) - 1) / 2
    return {label: step * (index - middle) for index, label in enumerate(labels)}


def metric_over_time_figure(
    metric: str, series: dict[str, list[SeriesPoint]], *, title: str = ""
) -> go.Figure:
    """One line per profile over the runs, with the 95% interval as error bars.

    Profiles measured by the same run are drawn slightly apart (``profile_offsets``);
    the hover text gives the run's real finishing time.
    """
    figure = go.Figure()
    offsets = profile_offsets(series)
    for label, points in series.items():
        figure.add_trace(
            go.Scatter(
                x=[p.when + offsets[label] if p.when is not None else None for p in points],
                y=[p.value for p in points],
                error_y=_error_bars(points),
                mode="lines+markers",
                name=label,
                customdata=[
                    [p.run_id, p.code_version, f"{p.when:%Y-%m-%d %H:%M}" if p.when else ""]
                    for p in points
                ],
                hovertemplate=(
                    f"{label}<br>{metric} %{{y:.3f}}<br>run %{{customdata[0]}} · "
                    "%{customdata[1]}<br>%{customdata[2]}<extra></extra>"
                ),
            )
        )
    figure.update_layout(title=title or metric, yaxis_title=metric, **_LAYOUT)
    if not metric.startswith("latency"):
        figure.update_yaxes(range=[0, 1.05])
    return figure


def quality_latency_figure(run: EvalRun, *, metric: str) -> go.Figure:
    """Each profile as a point: latency p50 across, ``metric`` up (with its interval)."""
    figure = go.Figure()
    for label in run.profiles:
        metrics = run.aggregates.get(label, {}).get("metrics", {})
        quality = metrics.get(metric, {})
        latency = metrics.get("latency_p50_ms", {})
        if quality.get("value") is None or latency.get("value") is None:
            continue
        figure.add_trace(
            go.Scatter(
                x=[latency["value"]],
                y=[quality["value"]],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [quality["high"] - quality["value"]],
                    "arrayminus": [quality["value"] - quality["low"]],
                },
                mode="markers+text",
                text=[label],
                textposition="top center",
                name=label,
                marker={"size": 12},
                # A label above a point at the edge draws into the margin, not cut.
                cliponaxis=False,
            )
        )
    figure.update_layout(
        title=f"{metric} against latency (p50)",
        xaxis_title="latency p50 (ms)",
        yaxis_title=metric,
        **_LAYOUT,
    )
    # Room above 1.0 for the profile labels drawn over the points.
    figure.update_yaxes(range=[0, 1.15])
    return figure


def failure_stages_figure(run: EvalRun) -> go.Figure:
    """Failed cases per profile, stacked by the stage that lost them."""
    figure = go.Figure()
    for stage in STAGE_KEYS:
        counts = [run.failure_stages.get(label, {}).get(stage, 0) for label in run.profiles]
        if not any(counts):
            continue
        figure.add_trace(go.Bar(x=list(run.profiles), y=counts, name=STAGE_LABELS[stage]))
    figure.update_layout(
        barmode="stack", title="Failed cases by stage", yaxis_title="cases", **_LAYOUT
    )
    return figure


def profile_cost_figure(costs: Sequence[ProfileCost]) -> go.Figure:
    """Per profile: mean model calls and stages run (left axis), p50/p95 latency (right)."""
    labels = [c.profile for c in costs]
    figure = go.Figure()
    for name, values in (
        ("model calls / case", [c.model_calls or 0 for c in costs]),
        ("stages run / case", [c.stages_run or 0 for c in costs]),
    ):
        figure.add_trace(go.Bar(x=labels, y=values, name=name, offsetgroup=name))
    for name, values in (
        ("latency p50 (ms)", [c.latency_p50_ms for c in costs]),
        ("latency p95 (ms)", [c.latency_p95_ms for c in costs]),
    ):
        figure.add_trace(
            go.Scatter(
                x=labels, y=values, name=name, mode="markers", yaxis="y2", marker={"size": 11}
            )
        )
    figure.update_layout(
        title="Cost per profile",
        yaxis={"title": "per case"},
        yaxis2={"title": "latency (ms)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        barmode="group",
        **_LAYOUT,
    )
    return figure
