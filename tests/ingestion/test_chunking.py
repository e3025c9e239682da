"""Chunking strategies, with the real default embedding model and its tokenizer."""

from __future__ import annotations

import itertools
import re

import pytest

from collections_app.embedding import get_embedder
from collections_app.ingestion.chunking import (
    CHUNKERS,
    InvalidChunkingOptions,
    chunk_id,
    get_chunker,
)
from collections_app.ingestion.limits import IngestionLimits
from collections_app.ingestion.loaders import load_document
from collections_app.ingestion.types import (
    ChunkDraft,
    LoadedDocument,
    PageSpan,
    RawSource,
    UnknownChunker,
)

STRATEGIES = sorted(CHUNKERS)

GUIDE = """# Guide

This guide explains how to install and run the application. Read it from start to end.

## Install

Installing takes a few minutes. You need an internet connection for the first run only.

### Linux

Download the archive and unpack it into your home directory. Run the installer script.
The script asks for your password once. It then copies the files into place.

| Distribution | Package | Minimum version |
| ---          | ---     | ---             |
| Debian       | deb     | 12              |
| Fedora       | rpm     | 39              |
| Arch         | pkg     | rolling         |

```bash
# this comment is code, not a heading
./install.sh --prefix ~/.local
./install.sh --check
```

- Make sure that ~/.local/bin is on your PATH.
- Log out and in again so that the desktop finds the new entry.
- Remove the archive afterwards to save space.

### Windows

Run the setup program and accept the licence. Windows may ask you to confirm twice.

## Run

Start the application from the menu. The first start builds an index and takes longer.
"""


def _doc(text: str, pages: list[PageSpan] | None = None) -> LoadedDocument:
    return LoadedDocument(text=text, kind="markdown", mime="text/markdown", pages=pages or [])


def _span(doc: LoadedDocument, draft: ChunkDraft) -> str:
    return doc.text[draft.char_start : draft.char_end]


def _long_document() -> str:
    """Sections whose paragraphs, lines and words are each over a small budget."""
    sentences = " ".join(
        f"Sentence number {n} describes one step of the procedure in some detail."
        for n in range(60)
    )
    no_punctuation = " ".join(f"word{n}" for n in range(400))
    code = "\n".join(
        f"    result_{n} = compute(value_{n}, factor={n})  # step {n}" for n in range(80)
    )
    return (
        f"# Manual\n\n{sentences}\n\n## Data\n\n{no_punctuation}\n\n"
        f"## Code\n\n```python\n{code}\n```\n\n"
        f"## Identifiers\n\n{'x' * 3000} {'ab' * 700} {'-'.join(['part'] * 150)}\n"
    )


@pytest.fixture(scope="module")
def embedder():
    return get_embedder()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_offsets_reproduce_the_source_span(strategy, embedder):
    doc = _doc(GUIDE)
    drafts = get_chunker(strategy, options={"chunk_tokens": 40}, embedder=embedder).chunk(doc)

    assert len(drafts) > 1
    assert [d.ordinal for d in drafts] == list(range(len(drafts)))
    for draft in drafts:
        span = _span(doc, draft)
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
    doc = _doc(_long_document())
    chunker = get_chunker(strategy, options={"chunk_tokens": 64}, embedder=embedder)
    drafts = chunker.chunk(doc)

    assert len(drafts) > 10
    for draft in drafts:
        assert draft.token_count == embedder.count_tokens(draft.text)
        assert draft.token_count <= 64


@pytest.mark.parametrize("strategy", ["recursive", "fixed", "structural"])
def test_budget_never_exceeds_what_the_model_reads(strategy, embedder):
    doc = _doc(_long_document())
    drafts = get_chunker(strategy, options={"chunk_tokens": 2000}, embedder=embedder).chunk(doc)

    assert max(d.token_count for d in drafts) <= embedder.max_tokens
    assert all(embedder.count_tokens(d.text) <= embedder.max_tokens for d in drafts)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_run_longer_than_the_tokenizer_reads_is_bounded_in_characters(strategy, embedder):
    # A "word" of 300,000 letters is one [UNK] for the model: only characters bound it.
    text = f"# Notes\n\nA short opening paragraph.\n\n{'x' * 300_000}\n\nA closing sentence here."
    doc = _doc(text)
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
        assert draft.text[offset:] == _span(doc, draft)
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


def test_the_character_bound_is_a_setting_that_shows_in_the_fingerprint(rag_set, embedder):
    text = " ".join(f"word{n}" for n in range(2000))
    default = get_chunker("fixed", embedder=embedder)
    rag_set("ingestion.chunk_max_chars", 300)
    bounded = get_chunker("fixed", embedder=embedder)

    drafts = bounded.chunk(_doc(text))
    assert max(len(d.text) for d in drafts) <= 300
    assert all(d.text[-1] != " " and _span(_doc(text), d) == d.text for d in drafts)
    assert bounded.settings_fingerprint()["max_chars"] == 300
    assert "max_chars" not in default.settings_fingerprint()
    rag_set("ingestion.chunk_max_chars", 10)
    with pytest.raises(InvalidChunkingOptions, match="RAG_CHUNK_MAX_CHARS must be at least 64"):
        get_chunker("fixed", embedder=embedder)


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
    doc = _doc(text, pages)

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
    doc = _doc(_long_document())

    drafts = get_chunker(strategy, options={"chunk_tokens": 64}, embedder=plain).chunk(doc)

    assert len(drafts) > 10
    for draft in drafts:
        assert draft.token_count == embedder.count_tokens(draft.text) <= 64


def test_documents_without_pages_have_no_page_numbers(embedder):
    drafts = get_chunker("recursive", embedder=embedder).chunk(_doc(GUIDE))

    assert drafts and all(d.page is None for d in drafts)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_section_path_is_the_headings_in_force_at_the_chunk_start(strategy, embedder):
    doc = _doc(GUIDE)
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


def test_a_hash_line_inside_a_code_fence_is_not_a_heading(embedder):
    drafts = get_chunker("structural", options={"chunk_tokens": 254}, embedder=embedder).chunk(
        _doc(GUIDE)
    )

    assert not any("this comment is code" in " ".join(d.section_path) for d in drafts)


def test_structural_never_splits_tables_code_or_lists(embedder):
    doc = _doc(GUIDE)
    drafts = get_chunker("structural", options={"chunk_tokens": 80}, embedder=embedder).chunk(doc)

    table = GUIDE[GUIDE.index("| Distribution") : GUIDE.index("| rolling         |") + 19]
    code = GUIDE[GUIDE.index("```bash") : GUIDE.index("--check\n```") + len("--check\n```")]
    items = GUIDE[GUIDE.index("- Make sure") : GUIDE.index("save space.") + 11]
    for block in (table, code, items):
        holders = [d for d in drafts if block in _span(doc, d)]
        assert len(holders) == 1, block
        assert not holders[0].metadata.get("oversized_block")


def test_structural_starts_a_chunk_at_every_heading_and_prefixes_the_section_path(embedder):
    doc = _doc(GUIDE)
    drafts = get_chunker("structural", options={"chunk_tokens": 254}, embedder=embedder).chunk(doc)

    heading_starts = [m.start() for m in re.finditer(r"^#+ ", GUIDE, flags=re.M)]
    heading_starts = [s for s in heading_starts if "comment" not in GUIDE[s : s + 30]]
    assert heading_starts == [d.char_start for d in drafts]
    linux = next(d for d in drafts if "installer script" in d.text)
    assert linux.text.startswith("Guide > Install > Linux\n\n### Linux")
    assert linux.token_count == embedder.count_tokens(linux.text)


def test_structural_cuts_an_oversized_block_at_lines_as_a_last_resort(embedder):
    code = "\n".join(f"value_{n} = compute({n}) + offset_{n}" for n in range(120))
    text = f"# Script\n\nThe script below computes values.\n\n```python\n{code}\n```\n\nAfter it.\n"
    doc = _doc(text)
    drafts = get_chunker("structural", options={"chunk_tokens": 100}, embedder=embedder).chunk(doc)

    flagged = [d for d in drafts if d.metadata.get("oversized_block")]
    assert len(flagged) > 1
    block_start = text.index("```python")
    block_end = text.index("\n```\n") + 4
    for draft in flagged:
        assert block_start <= draft.char_start and draft.char_end <= block_end
        # Cut at line boundaries only.
        assert draft.char_start == 0 or text[draft.char_start - 1] == "\n"
        assert draft.char_end == len(text) or text[draft.char_end] == "\n"
        assert draft.token_count <= 100
    assert "".join(_span(doc, d) for d in flagged).replace("\n", "") == text[
        block_start:block_end
    ].replace("\n", "")
    assert not any("After it." in d.text for d in flagged)


@pytest.mark.parametrize("overlap", [1, 2])
def test_sentence_chunks_repeat_the_last_sentences_of_the_previous_chunk(overlap, embedder):
    # (pysbd reads "topic 3. Next" as a numbered list item, so no number ends a sentence.)
    text = " ".join(f"Sentence number {n} says something about the weather." for n in range(40))
    doc = _doc(text)
    drafts = get_chunker(
        "sentence", options={"chunk_tokens": 60, "overlap_sentences": overlap}, embedder=embedder
    ).chunk(doc)

    assert len(drafts) > 3
    for previous, current in itertools.pairwise(drafts):
        shared = text[current.char_start : previous.char_end]
        assert previous.text.endswith(shared)
        assert shared.count("Sentence number") == overlap
        assert shared.startswith("Sentence number") and shared.endswith(".")
    # Nothing is skipped: the chunks together hold every sentence.
    numbers = {int(n) for d in drafts for n in re.findall(r"number (\d+)", d.text)}
    assert numbers == set(range(40))


def test_fixed_windows_are_deterministic_and_overlap(embedder, rag_set):
    # Windows in tokens only: the 3,000-character identifier is cut by characters
    # too under the default bound, into parts that cannot overlap.
    rag_set("ingestion.chunk_max_chars", 100_000)
    doc = _doc(GUIDE + "\n\n" + _long_document())
    options = {"chunk_tokens": 50, "chunk_overlap_tokens": 10}
    first = get_chunker("fixed", options=options, embedder=embedder).chunk(doc)
    second = get_chunker("fixed", options=options, embedder=embedder).chunk(doc)

    assert first == second
    for previous, current in itertools.pairwise(first):
        assert current.char_start < previous.char_end  # they overlap
        shared = doc.text[current.char_start : previous.char_end]
        assert 0 < embedder.count_tokens(shared) <= 10
    # Windows are full up to a word boundary, except before a run of text
    # without whitespace (the identifiers at the end) and at the end.
    prose = [d for d in first if d.char_end < doc.text.index("## Identifiers")]
    assert len(prose) > 10
    assert all(d.token_count > 40 for d in prose)


def test_semantic_splits_where_the_topic_changes(embedder):
    cooking = [
        "Bring a large pot of salted water to a rolling boil before adding the pasta.",
        "Stir the spaghetti during the first minute so the strands do not stick together.",
        "Taste the pasta a minute before the time on the packet to check that it is al dente.",
        "Keep a cup of the starchy cooking water to loosen the tomato sauce later.",
        "Toss the drained pasta with the sauce in the pan over a low heat.",
        "Finish the dish with grated parmesan and a few torn basil leaves.",
    ]
    space = [
        "Jupiter is the largest planet in the solar system and is made mostly of hydrogen.",
        "Its Great Red Spot is a storm larger than the Earth that has lasted for centuries.",
        "The planet has dozens of moons, and Europa may hide an ocean beneath its icy crust.",
        "Saturn's rings are made of countless particles of ice and rock orbiting the planet.",
        "A spacecraft needs years to travel from Earth to the outer planets.",
        "Telescopes on Earth observe the gas giants best when they are opposite the Sun.",
    ]
    text = " ".join(cooking + space)  # one paragraph: no structure hints at the change
    doc = LoadedDocument(text=text, kind="text", mime="text/plain")
    chunker = get_chunker("semantic", options={"chunk_tokens": 254}, embedder=embedder)
    assert embedder.count_tokens(text) <= 254  # the budget alone would not split it

    drafts = chunker.chunk(doc)

    change = len(" ".join(cooking))
    assert change in {d.char_end for d in drafts}
    for draft in drafts:
        assert not ("pasta" in draft.text and "planet" in draft.text)


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
    doc = _doc(GUIDE)
    options = {"chunk_tokens": 48}

    first = get_chunker(strategy, options=options, embedder=embedder).chunk(doc)
    second = get_chunker(strategy, options=options, embedder=embedder).chunk(_doc(GUIDE))

    assert first == second


@pytest.mark.parametrize("text", ["", "   \n\n\t  \n"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_blank_documents_give_no_chunks(strategy, text, embedder):
    assert get_chunker(strategy, embedder=embedder).chunk(_doc(text)) == []


def test_unknown_strategy_names_the_known_ones(embedder):
    with pytest.raises(UnknownChunker) as excinfo:
        get_chunker("fancy", embedder=embedder)

    assert str(excinfo.value) == (
        "unknown chunking strategy 'fancy'; known: fixed, recursive, semantic, sentence, structural"
    )


def test_unknown_option_names_the_known_ones(embedder):
    with pytest.raises(InvalidChunkingOptions) as excinfo:
        get_chunker("fixed", options={"overlap_sentences": 2}, embedder=embedder)

    message = str(excinfo.value)
    assert "'overlap_sentences'" in message and "'fixed'" in message
    assert "chunk_overlap_tokens, chunk_tokens" in message


@pytest.mark.parametrize(
    ("strategy", "options"),
    [
        ("fixed", {"chunk_tokens": 50, "chunk_overlap_tokens": 50}),
        ("recursive", {"chunk_tokens": "many"}),
        ("sentence", {"overlap_sentences": -1}),
        ("semantic", {"breakpoint_percentile": 150}),
        ("semantic", {"chunk_tokens": 40, "min_tokens": 40}),
    ],
)
def test_option_values_that_cannot_work_are_refused(strategy, options, embedder):
    with pytest.raises(InvalidChunkingOptions):
        get_chunker(strategy, options=options, embedder=embedder)


def test_options_default_from_settings_and_show_in_the_fingerprint(settings, embedder):
    settings.RAG = {
        **settings.RAG,
        "ingestion": {**settings.RAG["ingestion"], "chunk_tokens": 120, "chunk_overlap_tokens": 8},
    }

    fingerprint = get_chunker("recursive", embedder=embedder).settings_fingerprint()

    assert fingerprint["strategy"] == "recursive"
    assert fingerprint["options"] == {"chunk_tokens": 120, "chunk_overlap_tokens": 8}
    same = get_chunker(
        "recursive", options={"chunk_tokens": 120}, embedder=embedder
    ).settings_fingerprint()
    assert same == fingerprint
    other = get_chunker(
        "recursive", options={"chunk_tokens": 100}, embedder=embedder
    ).settings_fingerprint()
    assert other != fingerprint
    assert get_chunker("sentence", embedder=embedder).settings_fingerprint() != fingerprint


def test_contextual_headers_carry_title_and_section_apart_from_the_text(rag_set, embedder):
    doc = LoadedDocument(
        text=_long_document(), kind="markdown", mime="text/markdown", title="Field manual"
    )
    plain = get_chunker("recursive", embedder=embedder)
    rag_set("ingestion.chunk_header", "{title} > {section}\\n")
    headed = get_chunker("recursive", embedder=embedder)

    without, with_header = plain.chunk(doc), headed.chunk(doc)
    assert all(d.header == "" and d.embedded_text == d.text for d in without)
    # The text, offsets and sections are the same: only what is embedded changes.
    assert [(d.text, d.char_start, d.section_path) for d in with_header] == [
        (d.text, d.char_start, d.section_path) for d in without
    ]
    data = next(d for d in with_header if d.section_path == ["Manual", "Data"])
    assert data.header == "Field manual > Manual > Data\n"
    assert data.embedded_text == data.header + data.text
    assert _span(doc, data) == data.text
    # A changed template is a changed fingerprint: every source is embedded again.
    assert headed.settings_fingerprint()["header"] == "{title} > {section}\\n"
    assert "header" not in plain.settings_fingerprint()


def test_a_header_leaves_out_empty_parts_and_a_title_the_chunk_starts_with(rag_set, embedder):
    rag_set("ingestion.chunk_header", "{title} > {section}\n")
    chunker = get_chunker("recursive", embedder=embedder)
    assert chunker.header(title="", section_path=["Install"], text="x") == "Install\n"
    assert chunker.header(title="Guide", section_path=[], text="x") == "Guide\n"
    assert chunker.header(title="Guide", section_path=[], text="Guide\n\nIntro") == ""
    assert chunker.header(title="", section_path=[], text="x") == ""
    assert len(chunker.header(title="t" * 500, section_path=["s"], text="x")) <= 161
    rag_set("ingestion.chunk_header", "{chapter}")
    with pytest.raises(InvalidChunkingOptions, match=re.escape("may name {title} and {section}")):
        get_chunker("recursive", embedder=embedder)
