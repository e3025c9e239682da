"""Chunking strategies, with the real default embedding model and its tokenizer.

What every strategy guarantees: offsets that reproduce the source, budgets in the
model's own tokens and in characters, one page and the section path per chunk,
deterministic output and ids. Each strategy's own behaviour is in
test_chunking_strategies.py; options, settings and headers in test_chunking_options.py.
"""

from __future__ import annotations

import re

import pytest

from collections_app.ingestion.chunking import chunk_id, get_chunker
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.types import PageSpan, RawSource
from tests.support.chunking import GUIDE, STRATEGIES, long_document, markdown_doc, source_span


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_offsets_reproduce_the_source_span(strategy, embedder):
    doc = markdown_doc(GUIDE)
    drafts = get_chunker(strategy, options={"chunk_tokens": 40}, embedder=embedder).chunk(doc)

    assert len(drafts) > 1
    assert [d.ordinal for d in drafts] == list(range(len(drafts)))
    for draft in drafts:
        span = source_span(doc, draft)
        assert span.strip() == span != ""
        offset = int(draft.metadata.get("text_offset", 0))
        assert draft.text[offset:] == span
        assert draft.metadata["strategy"] == strategy
    # Every visible character of the document is in some chunk.
    covered = set()
    for draft in drafts:
        covered.update(range(draft.char_start, draft.char_end))
    assert {i for i, ch in enumerate(GUIDE) if not ch.isspace()} <= covered


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_chunks_fit_the_budget_in_the_models_own_tokens(strategy, embedder):
    doc = markdown_doc(long_document())
    chunker = get_chunker(strategy, options={"chunk_tokens": 64}, embedder=embedder)
    drafts = chunker.chunk(doc)

    assert len(drafts) > 10
    for draft in drafts:
        assert draft.token_count == embedder.count_tokens(draft.text)
        assert draft.token_count <= 64


@pytest.mark.parametrize("strategy", ["recursive", "fixed", "structural"])
def test_budget_never_exceeds_what_the_model_reads(strategy, embedder):
    doc = markdown_doc(long_document())
    drafts = get_chunker(strategy, options={"chunk_tokens": 2000}, embedder=embedder).chunk(doc)

    assert max(d.token_count for d in drafts) <= embedder.max_tokens
    assert all(embedder.count_tokens(d.text) <= embedder.max_tokens for d in drafts)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_run_longer_than_the_tokenizer_reads_is_bounded_in_characters(strategy, embedder):
    # A "word" of 300,000 letters is one [UNK] for the model: only characters bound it.
    text = f"# Notes\n\nA short opening paragraph.\n\n{'x' * 300_000}\n\nA closing sentence here."
    doc = markdown_doc(text)
    chunker = get_chunker(strategy, embedder=embedder)
    drafts = chunker.chunk(doc)

    assert chunker.max_chars == 8 * chunker.limit == 1600
    assert max(len(d.text) for d in drafts) <= 1600
    covered: set[int] = set()
    for draft in drafts:
        covered.update(range(draft.char_start, draft.char_end))
    run_start = text.index("x" * 100)
    assert set(range(run_start, run_start + 300_000)) <= covered
    for draft in drafts:
        offset = int(draft.metadata.get("text_offset", 0))
        assert draft.text[offset:] == source_span(doc, draft)
        assert draft.token_count == embedder.count_tokens(draft.text)


def test_many_tiny_inline_elements_are_bounded_in_characters(embedder):
    page = "<html><body><p>" + "<span>w</span>" * 100_000 + "</p></body></html>"
    doc = load_document(
        RawSource(location="/srv/w.html", origin="path", data=page.encode(), filename="w.html"),
        limits=IngestionLimits(),
    )
    drafts = get_chunker("recursive", embedder=embedder).chunk(doc)
    assert len(doc.text) == 100_000
    assert len(drafts) == 63
    assert max(len(d.text) for d in drafts) == 1600
    assert "".join(d.text for d in drafts) == doc.text


@pytest.mark.parametrize("separator", ["\n\n", "\n", " "])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_chunks_cite_one_page_each(strategy, separator, embedder):
    # With "\n" or " " between pages, a paragraph runs on across the page break.
    pages_text = [
        "Page one talks about apples. Apples grow on trees in orchards.",
        "Page two talks about boats. Boats float on water and carry people.",
        "Page three talks about clocks. Clocks measure time with gears.",
    ]
    text = separator.join(pages_text)
    pages, pos = [], 0
    for number, page in enumerate(pages_text, start=1):
        pages.append(PageSpan(number=number, char_start=pos, char_end=pos + len(page)))
        pos += len(page) + len(separator)
    doc = markdown_doc(text, pages)

    drafts = get_chunker(strategy, embedder=embedder).chunk(doc)

    assert {d.page for d in drafts} == {1, 2, 3}
    for draft in drafts:
        page = pages[draft.page - 1]
        assert page.char_start <= draft.char_start and draft.char_end <= page.char_end


class ProtocolOnlyEmbedder:
    """The default model seen only through the Embedder protocol (no tokenizer attribute)."""

    def __init__(self, inner):
        self._inner = inner
        self.profile = inner.profile
        self.max_tokens = inner.max_tokens

    def encode(self, texts):
        return self._inner.encode(texts)

    def count_tokens(self, text):
        return self._inner.count_tokens(text)


@pytest.mark.parametrize("strategy", ["recursive", "fixed"])
def test_embedders_without_a_fast_tokenizer_still_get_exact_budgets(strategy, embedder):
    plain = ProtocolOnlyEmbedder(embedder)
    doc = markdown_doc(long_document())

    drafts = get_chunker(strategy, options={"chunk_tokens": 64}, embedder=plain).chunk(doc)

    assert len(drafts) > 10
    for draft in drafts:
        assert draft.token_count == embedder.count_tokens(draft.text) <= 64


def test_documents_without_pages_have_no_page_numbers(embedder):
    drafts = get_chunker("recursive", embedder=embedder).chunk(markdown_doc(GUIDE))

    assert drafts and all(d.page is None for d in drafts)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_section_path_is_the_headings_in_force_at_the_chunk_start(strategy, embedder):
    doc = markdown_doc(GUIDE)
    drafts = get_chunker(strategy, options={"chunk_tokens": 40}, embedder=embedder).chunk(doc)

    headings = [
        (m.start(), len(m.group(1)), m.group(2))
        for m in re.finditer(r"^(#+) (.+)$", GUIDE, flags=re.M)
        if "comment" not in m.group(2)
    ]
    for draft in drafts:
        path: list[tuple[int, str]] = []
        for start, level, title in headings:
            if start > draft.char_start:
                break
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
        assert draft.section_path == [t for _, t in path]
    linux, windows = GUIDE.index("### Linux"), GUIDE.index("### Windows")
    inside = [d for d in drafts if linux <= d.char_start < windows]
    assert inside and all(d.section_path == ["Guide", "Install", "Linux"] for d in inside)


def test_chunk_ids_are_deterministic_and_distinct():
    base = {"location": "docs/guide.md", "content_hash": "a" * 64, "ordinal": 3}
    same = chunk_id(**base)

    assert same == chunk_id(**base)
    assert re.fullmatch(r"[0-9a-f]{1,64}", same)
    variants = [
        {**base, "ordinal": 4},
        {**base, "content_hash": "b" * 64},
        {**base, "location": "docs/other.md"},
    ]
    ids = {same, *(chunk_id(**v) for v in variants)}
    assert len(ids) == 4


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_output_is_deterministic(strategy, embedder):
    doc = markdown_doc(GUIDE)
    options = {"chunk_tokens": 48}

    first = get_chunker(strategy, options=options, embedder=embedder).chunk(doc)
    second = get_chunker(strategy, options=options, embedder=embedder).chunk(markdown_doc(GUIDE))

    assert first == second


@pytest.mark.parametrize("text", ["", "   \n\n\t  \n"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_blank_documents_give_no_chunks(strategy, text, embedder):
    assert get_chunker(strategy, embedder=embedder).chunk(markdown_doc(text)) == []
