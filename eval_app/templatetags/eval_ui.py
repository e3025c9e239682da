"""Template helpers of the evaluation pages."""

from __future__ import annotations

from typing import Any

import plotly
from django import template
from django.templatetags.static import static
from django.urls import reverse
from django.utils.html import format_html

from eval_app.harness.report import STAGE_LABELS

register = template.Library()


@register.simple_tag
def plotly_script() -> str:
    """The ``<script>`` loading plotly.js from the installed package (versioned URL).

    With it, ``eval/figures.js``, which keeps each figure as wide as its box.
    """
    return format_html(
        '<script src="{}?v={}"></script><script src="{}" defer></script>',
        reverse("eval:plotly_js"),
        plotly.__version__,
        static("eval/figures.js"),
    )


@register.filter
def stage_label(stage: str) -> str:
    """The failure stage's words ("" for a case that passed)."""
    return STAGE_LABELS.get(stage, stage)


@register.filter
def metric(value: Any) -> str:
    """A per-case metric as text: 3 decimals, "-" when not applicable."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    """``mapping[key]`` in a template (None when absent)."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None
