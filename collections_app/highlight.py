"""Document text as safe HTML with marked spans (citations, injection signals).

Document text is untrusted: every character of it is escaped here, and only the
``<mark>`` elements this module adds are markup. Templates print the result
without further escaping, so nothing else may build these strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

# Longest text rendered in full on a source page; longer ones show a window
# around the cited span.
FULL_TEXT_CHARS = 200_000
WINDOW_CHARS = 20_000


@dataclass(frozen=True)
class MarkedSpan:
    """Characters [start, end) to mark, with a label shown as the mark's title."""

    start: int
    end: int
    label: str = ""
    css_class: str = ""


@dataclass(frozen=True)
class TextView:
    """The part of a text shown on a page, as safe HTML."""

    html: SafeString
    offset: int  # characters of the text before the shown part
    hidden_after: int  # characters after it
    total: int


def mark_spans(text: str, spans: Iterable[MarkedSpan], *, first_id: str = "") -> SafeString:
    """``text`` escaped, with each span wrapped in ``<mark>``; overlapping spans are merged.

    The first mark gets ``id=first_id`` (when given) so a link can scroll to it.
    """
    ordered = sorted((s for s in spans if 0 <= s.start < s.end), key=lambda s: (s.start, -s.end))
    parts: list[str] = []
    cursor = 0
    marked = False
    for span in ordered:
        end = min(span.end, len(text))
        start = max(span.start, cursor)
        if start >= end:
            continue  # inside an earlier mark
        parts.append(escape(text[cursor:start]))
        attrs = ""
        if first_id and not marked:
            attrs += format_html(' id="{}" tabindex="-1"', first_id)
        marked = True
        if span.css_class:
            attrs += format_html(' class="{}"', span.css_class)
        if span.label:
            attrs += format_html(' title="{}"', span.label)
        parts.append(format_html("<mark{}>{}</mark>", mark_safe(attrs), text[start:end]))
        cursor = end
    parts.append(escape(text[cursor:]))
    return mark_safe("".join(parts))


def text_view(text: str, span: MarkedSpan | None = None) -> TextView:
    """The text to show on a source page, with ``span`` marked (``id="cited"``).

    Long texts are cut to a window around the span so the page stays light.
    """
    total = len(text)
    if total <= FULL_TEXT_CHARS:
        lo, hi = 0, total
    else:
        centre = span.start if span is not None else 0
        lo = max(0, centre - WINDOW_CHARS // 2)
        hi = min(total, max(lo + WINDOW_CHARS, (span.end if span else 0) + WINDOW_CHARS // 2))
    shown = text[lo:hi]
    spans = []
    if span is not None:
        spans.append(MarkedSpan(span.start - lo, span.end - lo, span.label, "cited"))
    return TextView(
        html=mark_spans(shown, spans, first_id="cited"),
        offset=lo,
        hidden_after=total - hi,
        total=total,
    )


def signal_windows(
    text: str, signals: Iterable[Mapping[str, object]], *, context: int = 100, limit: int = 6
) -> list[SafeString]:
    """Excerpts of ``text`` around the signals that carry offsets, each signal marked.

    Signals close to each other share one excerpt; every mark is titled with
    the signal's name. Signals without offsets (text a reader would not see)
    are left to the caller.
    """
    spans = sorted(
        (
            MarkedSpan(int(sig["start"]), int(sig["end"]), str(sig.get("name") or ""), "signal")
            for sig in signals
            if isinstance(sig.get("start"), int)
            and isinstance(sig.get("end"), int)
            and 0 <= int(sig["start"]) < int(sig["end"]) <= len(text)
        ),
        key=lambda s: s.start,
    )
    windows: list[list[MarkedSpan]] = []
    for span in spans:
        if windows and span.start - context <= max(s.end for s in windows[-1]) + context:
            windows[-1].append(span)
        else:
            windows.append([span])
    shown = []
    for group in windows[:limit]:
        lo = max(0, group[0].start - context)
        hi = min(len(text), max(s.end for s in group) + context)
        local = [MarkedSpan(s.start - lo, s.end - lo, s.label, s.css_class) for s in group]
        body = mark_spans(text[lo:hi], local)
        shown.append(
            format_html("{}{}{}", "… " if lo > 0 else "", body, " …" if hi < len(text) else "")
        )
    return shown


def signals_with_offsets(signals: Iterable[Mapping[str, object]]) -> set[int]:
    """Indexes of the signals that point into the text (the others are hidden content)."""
    return {
        i
        for i, sig in enumerate(signals)
        if isinstance(sig.get("start"), int) and isinstance(sig.get("end"), int)
    }
