"""How a stored run is shown: its answer, passages and trace as the pages render them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.urls import reverse
from django.utils.safestring import SafeString

from collections_app.ingestion.fetch import is_web_url
from query_app.forms import (
    RerunForm,
)
from query_app.models import QueryRun
from query_app.pipeline.graph import graph_flags
from query_app.pipeline.types import MODE_LABELS
from query_app.pipeline.web import is_web_chunk
from query_app.presentation import (
    StageRow,
    answer_html,
    citation_shown,
    path_timeline_html,
    section_shown,
    trace_html,
    trace_rows,
)


def sentence(message: str) -> str:
    """An exception message as a sentence for a person."""
    message = message.strip()
    if not message:
        return "Something went wrong."
    message = message[0].upper() + message[1:]
    return message if message.endswith((".", "!", "?")) else f"{message}."


@dataclass
class AnswerView:
    """A stored run prepared for the answer partial."""

    run: QueryRun
    html: SafeString
    citations: list[dict[str, Any]]
    rows: list[StageRow]
    unsupported: list[str]
    rerun_form: RerunForm

    @property
    def trace_html(self) -> SafeString:
        return trace_html(self.rows)

    @property
    def path_html(self) -> SafeString:
        """The corrective and adaptive graphs' path (empty for a linear profile)."""
        return path_timeline_html(self.run.trace or [])

    @property
    def flags(self) -> dict[str, Any]:
        """low_confidence (with its reason) and the adaptive route, from the trace."""
        return graph_flags(self.run.trace or [])

    @property
    def spelling(self) -> dict[str, str]:
        """The misspelt words retrieval and the answer read corrected (transform step)."""
        for step in self.run.trace or []:
            if step.get("stage") == "transform":
                return dict((step.get("details") or {}).get("spelling") or {})
        return {}

    @property
    def target(self) -> str:
        return f"passage-{self.run.pk}"

    @property
    def mode_label(self) -> str:
        return MODE_LABELS.get(self.run.mode, self.run.get_mode_display())


def passage_url(run: QueryRun, marker: int) -> str:
    return reverse("query:passage", kwargs={"run_id": run.pk, "marker": marker})


def source_url(run: QueryRun, citation: dict[str, Any]) -> str:
    """The source page scrolled to the cited sentence (or passage), highlighted there.

    A passage the web fallback found links to its web page (http or https only).
    """
    if is_web_chunk(citation.get("chunk_id")):
        address = str(citation.get("source") or "")
        return address if is_web_url(address) else ""
    url = reverse(
        "collections:source",
        kwargs={"slug": run.collection.slug, "source_id": citation.get("source_id") or 0},
    )
    query = f"chunk={quote(str(citation.get('chunk_id', '')))}"
    spans = [s for s in citation.get("spans") or [] if "char_start" in s and "char_end" in s]
    if spans:
        query += f"&start={int(spans[0]['char_start'])}&end={int(spans[-1]['char_end'])}"
    return f"{url}?{query}#cited"


def answer_view(run: QueryRun) -> AnswerView:
    citations = [
        {
            **citation_shown(c),
            "section": section_shown(c),
            "passage_url": passage_url(run, c["marker"]),
            "source_url": source_url(run, c),
            "web": is_web_chunk(c.get("chunk_id")),
        }
        for c in run.citations
    ]
    html = answer_html(
        run.answer,
        markers=[c["marker"] for c in run.citations],
        link=lambda n: passage_url(run, n),
        target=f"#passage-{run.pk}",
    )
    grounded = run.groundedness or {}
    return AnswerView(
        run=run,
        html=html,
        citations=citations,
        rows=trace_rows(run.trace, cited={c["chunk_id"]: c["marker"] for c in run.citations}),
        unsupported=[str(s) for s in grounded.get("unsupported") or []],
        rerun_form=RerunForm(initial={"profile": run.profile}),
    )
