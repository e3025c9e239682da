"""Result pages to passages: fetched through the SSRF guard, loaded, checked, cut.

Every page goes through the same steps as a URL a collection ingests, minus
the index: ``fetch_url`` (address check on every hop, time and size limits),
``load_document`` (the HTML loader drops navigation, scripts and hidden
elements and keeps the hidden text for the validator), and the prompt-injection
validator: a page with any signal (rejected or suspicious) is dropped with a
warning. The passages kept are the page's runs of sentences sharing most words
with the question; they are marked "web" (``web:`` chunk ids, no source id) and
carry the page's URL as their source. Nothing is stored in a collection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from collections_app.ingestion.fetch import fetch_url
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.types import IngestionError
from collections_app.ingestion.validators import validate_document
from query_app.pipeline.lexical import content_terms, split_sentences
from query_app.pipeline.options import WebOptions
from query_app.pipeline.types import Candidate
from query_app.pipeline.web.providers import WebResult, WebSearchConfig

WEB_PREFIX = "web:"
INJECTION_VALIDATOR = "prompt-injection"
# Pages fetched at once: the work is waiting on the network.
FETCH_THREADS = 3


def is_web_chunk(chunk_id: object) -> bool:
    """Whether a candidate or citation came from the web fallback, not the collection."""
    return str(chunk_id).startswith(WEB_PREFIX)


@dataclass
class WebHarvest:
    """What the pages gave: passages, one record per page, and the warnings to trace."""

    candidates: list[Candidate] = field(default_factory=list)
    pages: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Page:
    result: WebResult
    status: str  # used | dropped | failed
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)


def web_passages(
    results: Sequence[WebResult],
    *,
    question: str,
    options: WebOptions,
    config: WebSearchConfig,
) -> WebHarvest:
    """Passages from the first ``options.max_pages`` results, best first."""
    chosen = list(results)[: options.max_pages]
    limits = config.limits(search=False)
    with ThreadPoolExecutor(max_workers=FETCH_THREADS, thread_name_prefix="rag-web") as pool:
        pages = list(
            pool.map(
                lambda r: _read_page(r, question=question, options=options, limits=limits), chosen
            )
        )
    harvest = WebHarvest()
    for page in pages:
        record: dict[str, Any] = {"url": page.result.url, "status": page.status}
        if page.reason:
            record["reason"] = page.reason
        if page.status == "used":
            record["passages"] = len(page.candidates)
            harvest.candidates += page.candidates
        elif page.status == "dropped":
            harvest.warnings.append(f"web page {page.result.url} dropped: {page.reason}")
        else:
            harvest.warnings.append(f"web page {page.result.url} not read: {page.reason}")
        harvest.pages.append(record)
    harvest.candidates.sort(key=lambda c: -(c.keyword_coverage or 0.0))
    return harvest


def _read_page(result: WebResult, *, question: str, options: WebOptions, limits: Any) -> _Page:
    try:
        raw = fetch_url(result.url, limits=limits)
        document = load_document(raw, limits=limits)
    except IngestionError as exc:
        return _Page(result, "failed", str(exc))
    except Exception as exc:  # a page is never worth failing the answer for
        return _Page(result, "failed", f"{type(exc).__name__}: {exc}")
    verdict = validate_document(document, limits=limits, validators=[INJECTION_VALIDATOR])
    if verdict.signals:
        names = sorted({s.name for s in verdict.signals})
        return _Page(
            result,
            "dropped",
            f"the injection validator flagged it ({verdict.verdict}: {', '.join(names)})",
        )
    if not document.text.strip():
        return _Page(result, "failed", "the page has no readable text")
    url = raw.final_url or result.url
    title = document.title or result.title or url
    candidates = page_passages(
        document.text,
        question=question,
        url=url,
        title=title,
        count=options.passages_per_page,
        max_chars=options.passage_chars,
    )
    if not candidates:
        return _Page(result, "dropped", "no passage shares a word with the question")
    return _Page(result, "used", candidates=candidates)


def page_passages(
    text: str, *, question: str, url: str, title: str, count: int, max_chars: int
) -> list[Candidate]:
    """The ``count`` runs of sentences (each at most ``max_chars``) covering most of the question."""
    wanted = set(content_terms(question))
    if not wanted:
        return []
    spans: list[tuple[int, int]] = []
    start = end = -1
    for sentence in split_sentences(text):
        if start >= 0 and sentence.end - start <= max_chars and not sentence.title:
            end = sentence.end
            continue
        if start >= 0:
            spans.append((start, end))
        start, end = sentence.start, sentence.end
    if start >= 0:
        spans.append((start, end))
    scored = []
    for span_start, span_end in spans:
        # A sentence longer than the limit is cut (its start is what matters most).
        span_end = min(span_end, span_start + max_chars)
        have = set(content_terms(text[span_start:span_end] + " " + title))
        coverage = len(wanted & have) / len(wanted)
        if wanted & set(content_terms(text[span_start:span_end])):
            scored.append((coverage, span_start, span_end))
    scored.sort(key=lambda s: (-s[0], s[1]))
    digest = hashlib.sha1(url.encode()).hexdigest()[:12]
    return [
        Candidate(
            chunk_id=f"{WEB_PREFIX}{digest}:{span_start}",
            source_id=0,
            source_location=url,
            source_title=title,
            text=text[span_start:span_end],
            char_start=span_start,
            char_end=span_end,
            retrieval_score=round(coverage, 4),
            keyword_coverage=round(coverage, 4),
        )
        for coverage, span_start, span_end in scored[:count]
    ]
