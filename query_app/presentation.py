"""Stored answers as the browser shows them: linked ``[n]`` markers and trace rows.

Answer text, passages and trace values come from documents and users, so they
are untrusted: the answer HTML is built here with ``escape``/``format_html``
(only the citation links are markup), and the trace becomes plain strings and
tables that the templates escape like any other value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from collections_app.highlight import MarkedSpan, mark_spans
from collections_app.locations import location_shown
from query_app.pipeline.stages import STAGES


def citation_shown(citation: Mapping[str, Any]) -> dict[str, Any]:
    """A stored citation as pages and the API show it: a server path never in full.

    The stored run keeps the source's location (evaluation matches it against its
    references); people see it relative to its ingest root, or the file name.
    """
    return {**citation, "source": location_shown(str(citation.get("source", "")))}


def section_shown(citation: Mapping[str, Any]) -> list[str]:
    """The citation's section path as a page lists it beside the title.

    A document's first heading is most often its title again (the section path
    "Getting started with ragsite" under the title of that name): shown once.
    """
    path = [str(part) for part in citation.get("section_path") or []]
    title = str(citation.get("title") or "").strip().casefold()
    if path and title and path[0].strip().casefold() == title:
        path = path[1:]
    return path


MARKER = re.compile(r"\[(\d{1,3})\]")


def answer_html(
    text: str, *, markers: Iterable[int], link: Callable[[int], str], target: str
) -> SafeString:
    """``text`` escaped, each ``[n]`` with a known citation turned into a link.

    The link loads the cited passage into ``target`` with htmx and, without
    JavaScript, opens the passage page.
    """
    known = set(markers)
    parts: list[str] = []
    cursor = 0
    for match in MARKER.finditer(text):
        number = int(match.group(1))
        if number not in known:
            continue
        parts.append(escape(text[cursor : match.start()]))
        url = link(number)
        parts.append(
            format_html(
                '<a class="cite" href="{}" hx-get="{}" hx-target="{}" hx-swap="innerHTML" '
                'aria-label="Show passage {}">[{}]</a>',
                url,
                url,
                target,
                number,
                number,
            )
        )
        cursor = match.end()
    parts.append(escape(text[cursor:]))
    return mark_safe("".join(parts))


# Characters of the passage shown around the cited sentence(s) in the preview.
PREVIEW_CONTEXT = 160


def passage_preview(text: str, spans: Iterable[Mapping[str, Any]]) -> SafeString | None:
    """The cited sentence(s) of a passage marked, with a little of the text around them.

    ``spans`` are the citation's spans (offsets into the passage); None when it
    has none (answers stored before citations carried them) or they do not fit
    the text (the passage changed since).
    """
    marks = [
        MarkedSpan(int(s["start"]), int(s["end"]), "cited sentence", "cited")
        for s in spans
        if isinstance(s.get("start"), int)
        and isinstance(s.get("end"), int)
        and 0 <= int(s["start"]) < int(s["end"]) <= len(text)
    ]
    if not marks:
        return None
    lo = max(0, min(m.start for m in marks) - PREVIEW_CONTEXT)
    hi = min(len(text), max(m.end for m in marks) + PREVIEW_CONTEXT)
    # Start and end the window at word boundaries.
    if lo > 0:
        lo = text.find(" ", lo) + 1 or lo
    if hi < len(text):
        hi = text.rfind(" ", 0, hi) if text.rfind(" ", 0, hi) > max(m.end for m in marks) else hi
    local = [MarkedSpan(m.start - lo, m.end - lo, m.label, m.css_class) for m in marks]
    body = mark_spans(text[lo:hi], local, first_id="cited-sentence")
    return format_html("{}{}{}", "… " if lo > 0 else "", body, " …" if hi < len(text) else "")


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class StageRow:
    """One collapsible row of the trace."""

    stage: str
    duration_ms: float
    skipped: bool
    summary: list[str]
    facts: list[tuple[str, str]] = field(default_factory=list)
    lists: list[tuple[str, list[str]]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _plain(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, list | tuple) and all(
        v is None or isinstance(v, str | int | float) for v in value
    ):
        return ", ".join(_plain(v) for v in value) or "—"
    return json.dumps(value, ensure_ascii=False, default=str)


def _cells(item: Mapping[str, Any], cited: Mapping[str, int]) -> dict[str, str]:
    """One table row: nested mappings become columns (``legs.vector`` = "rank 1 · score 0.6")."""
    cells: dict[str, str] = {}
    for key, value in item.items():
        if isinstance(value, Mapping):
            for sub, inner in value.items():
                cells[f"{key}.{sub}"] = (
                    " · ".join(f"{k} {_plain(v)}" for k, v in inner.items())
                    if isinstance(inner, Mapping)
                    else _plain(inner)
                )
        elif key == "chunk_id" and isinstance(value, str):
            # Ids are long hashes: a prefix identifies them, the marker says which was cited.
            marker = cited.get(value)
            cells[key] = value[:12] + ("…" if len(value) > 12 else "")
            cells["cited"] = f"[{marker}]" if marker else ""
        else:
            cells[key] = _plain(value)
    return cells


def _table(title: str, items: list[Mapping[str, Any]], cited: Mapping[str, int]) -> Table:
    rows = [_cells(item, cited) for item in items]
    columns: list[str] = ["#"]
    for row in rows:
        columns += [key for key in row if key not in columns]
    return Table(
        title=title,
        columns=columns,
        rows=[[str(i), *(row.get(c, "—") for c in columns[1:])] for i, row in enumerate(rows, 1)],
    )


def _collect(
    row: StageRow,
    details: Mapping[str, Any],
    cited: Mapping[str, int],
    listed: frozenset[str],
    prefix: str = "",
) -> None:
    for key, value in details.items():
        name = f"{prefix}{key}"
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            row.tables.append(_table(name, value, cited))
        elif isinstance(value, list) and (key in listed or any(len(str(v)) > 40 for v in value)):
            row.lists.append((name, [_plain(v) for v in value]))
        elif isinstance(value, Mapping) and not prefix:
            _collect(row, value, cited, listed, prefix=f"{name}.")
        else:
            row.facts.append((name, _plain(value)))


def stage_summary(stage: str, details: Mapping[str, Any]) -> list[str]:
    """The key counts shown on a stage's collapsed row (each stage says what they are)."""
    if stage in STAGES:
        parts = STAGES.get(stage)().summary(details)
    else:  # a step of a stage this version does not know (an older stored run)
        parts = [f"{k} {_plain(v)}" for k, v in details.items() if isinstance(v, int | float)][:3]
    if details.get("cache") == "hit":
        parts.append("cached")
    return [p for p in parts if p]


def trace_rows(
    trace: Iterable[Mapping[str, Any]], *, cited: Mapping[str, int] | None = None
) -> list[StageRow]:
    """One row per stage of a stored trace, with its summary and expandable details.

    ``cited`` maps chunk ids to their citation markers, so candidate tables say
    which candidates became ``[n]``.
    """
    rows = []
    for step in trace:
        details = step.get("details") or {}
        skipped = bool(step.get("skipped"))
        summary = (
            [f"skipped: {details.get('reason', '')}"]
            if skipped
            else stage_summary(str(step.get("stage")), details)
        )
        row = StageRow(
            stage=str(step.get("stage", "?")),
            duration_ms=float(step.get("duration_ms") or 0.0),
            skipped=skipped,
            summary=summary,
            warnings=[str(w) for w in step.get("warnings") or []],
        )
        stage = str(step.get("stage"))
        listed = STAGES.get(stage).listed if stage in STAGES else frozenset()
        _collect(row, details, cited or {}, listed)
        rows.append(row)
    return rows


def _table_html(table: Table) -> str:
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in table.rows
    )
    return (
        f'<p class="label">{escape(table.title)}</p><div class="table-wrap"><table class="data">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _row_html(row: StageRow) -> str:
    summary = format_html(
        '<span class="stage">{}</span><span>{} ms</span>', row.stage, f"{row.duration_ms:.1f}"
    ) + format_html_join("", '<span class="muted">{}</span>', ((s,) for s in row.summary))
    if row.warnings:
        summary += format_html('<span class="warnings">⚠ {}</span>', len(row.warnings))
    body: list[str] = [
        format_html('<p class="message warning small">{}</p>', w) for w in row.warnings
    ]
    if row.facts:
        body.append(
            '<dl class="facts small">'
            + format_html_join("", "<div><dt>{}</dt><dd>{}</dd></div>", row.facts)
            + "</dl>"
        )
    for name, items in row.lists:
        body.append(
            format_html('<p class="label">{}</p>', name)
            + '<ol class="small">'
            + format_html_join("", "<li>{}</li>", ((i,) for i in items))
            + "</ol>"
        )
    body += [_table_html(table) for table in row.tables]
    return (
        f'<details class="stage-{escape(row.stage)}"><summary>{summary}</summary>'
        f'<div class="body">{"".join(body)}</div></details>'
    )


def trace_html(rows: Iterable[StageRow]) -> SafeString:
    """The trace as collapsible rows, every value escaped.

    Built here rather than in the template: a trace holds hundreds of table
    cells, and rendering them with template loops was most of the answer
    partial's render time.
    """
    parts = [_row_html(row) for row in rows]
    if not parts:
        return mark_safe('<p class="muted small">No trace was recorded.</p>')
    return mark_safe("".join(parts))  # every value above is escaped


def path_timeline_html(trace: Iterable[Mapping[str, Any]]) -> SafeString:
    """The corrective and adaptive graphs' path as a compact timeline, every value escaped.

    One item per node run: node, iteration, and what it decided (triage label,
    route, verdict, rewritten probe, sub-questions). Empty for a linear run.
    """
    steps = list(trace)
    if not any(s.get("stage") == "graph" for s in steps):
        return mark_safe("")
    items = []
    for step in steps:
        node = str(step.get("node") or step.get("stage") or "?")
        if node == "end":
            continue
        details = step.get("details") or {}
        said = ""
        for key in ("label", "route", "verdict"):
            if details.get(key):
                said = str(details[key])
                break
        if details.get("probe"):
            said = f"probe “{details['probe']}”"
        elif details.get("sub_questions"):
            said = " · ".join(str(q) for q in details["sub_questions"])
        elif step.get("node") == "respond" and details.get("decision"):
            said = str(details["decision"])
        elif node == "hops" and details.get("hops"):
            hops = details["hops"]
            said = f"{len(hops)} hop(s)" + (
                ", stopped early" if details.get("stopped_early") else ""
            )
        elif node == "web" and not step.get("skipped"):
            said = f"{details.get('passages', 0)} web passage(s)"
        classes = "step"
        if step.get("warnings"):
            classes += " warned"
        items.append(
            format_html(
                '<li class="{}"><span class="node">{}</span>'
                '<span class="iteration" title="iteration">#{}</span>{}</li>',
                classes,
                node,
                int(step.get("iteration") or 0),
                format_html('<span class="said">{}</span>', said) if said else "",
            )
        )
    return format_html(
        '<ol class="path-timeline small" aria-label="Path taken">{}</ol>',
        mark_safe("".join(items)),  # each item is escaped above
    )
