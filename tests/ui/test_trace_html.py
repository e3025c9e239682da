"""The trace HTML is built in Python: every value from a document or a user is escaped."""

from __future__ import annotations

from query_app.presentation import section_shown, trace_html, trace_rows

EVIL = '<script>alert("t")</script>'


def test_every_part_of_the_trace_is_escaped():
    trace = [
        {"stage": "transform", "duration_ms": 0.5, "details": {"probes": [f"probe {EVIL}"]}},
        {
            "stage": "retrieve",
            "duration_ms": 12.345,
            "warnings": [f"warning {EVIL}"],
            "details": {
                "mode": EVIL,
                "candidates": [{"chunk_id": "abc", "note": EVIL, "legs": {"vector": {"rank": 1}}}],
            },
        },
        {"stage": EVIL, "duration_ms": 1, "skipped": True, "details": {"reason": EVIL}},
    ]
    html = str(trace_html(trace_rows(trace, cited={"abc": 1})))

    assert "<script>" not in html
    # Each value is there, escaped: fact, list item, table cell, warning, summary, stage name.
    safe = "&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt;"
    for fragment in (
        f"<dt>mode</dt><dd>{safe}</dd>",
        f"<li>probe {safe}</li>",
        f"<td>{safe}</td>",
        f'<p class="message warning small">warning {safe}</p>',
        f'<span class="muted">mode {safe}</span>',
        f'<span class="stage">{safe}</span>',
        f'<span class="muted">skipped: {safe}</span>',
    ):
        assert fragment in html
    assert "<span>12.3 ms</span>" in html
    assert "<td>[1]</td>" in html  # the candidate that became citation [1]
    assert 'class="stage-&lt;script&gt;' in html


def test_an_empty_trace_says_so():
    assert "No trace was recorded." in trace_html([])


def test_a_section_path_opening_with_the_documents_title_shows_the_title_once():
    def shown(title: str, path: list[str]) -> list[str]:
        return section_shown({"title": title, "section_path": path})

    assert shown("Getting started with ragsite", ["Getting started with ragsite"]) == []
    assert shown("ragsite FAQ", ["ragsite FAQ ", "Upgrades"]) == ["Upgrades"]
    assert shown("ragsite FAQ", ["Frequently asked questions"]) == ["Frequently asked questions"]
    assert shown("", ["Install"]) == ["Install"]
    assert shown("Guide", []) == []
