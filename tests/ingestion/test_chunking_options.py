"""Chunking options and settings: what the chunkers accept, refuse and fingerprint.

Unknown strategies and options name the known ones, values that cannot work are
refused, defaults come from settings, and the character bound and the contextual
header template are settings that show in the chunker's fingerprint. With the real
default embedding model and its tokenizer.
"""

from __future__ import annotations

import re

import pytest

from collections_app.ingestion.chunking import InvalidChunkingOptions, get_chunker
from collections_app.ingestion.types import LoadedDocument, UnknownChunker
from tests.support.chunking import long_document, markdown_doc, source_span


def test_the_character_bound_is_a_setting_that_shows_in_the_fingerprint(rag_set, embedder):
    text = " ".join(f"word{n}" for n in range(2000))
    default = get_chunker("fixed", embedder=embedder)
    rag_set("ingestion.chunk_max_chars", 300)
    bounded = get_chunker("fixed", embedder=embedder)

    drafts = bounded.chunk(markdown_doc(text))
    assert max(len(d.text) for d in drafts) <= 300
    assert all(d.text[-1] != " " and source_span(markdown_doc(text), d) == d.text for d in drafts)
    assert bounded.settings_fingerprint()["max_chars"] == 300
    assert "max_chars" not in default.settings_fingerprint()
    rag_set("ingestion.chunk_max_chars", 10)
    with pytest.raises(InvalidChunkingOptions, match="RAG_CHUNK_MAX_CHARS must be at least 64"):
        get_chunker("fixed", embedder=embedder)


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
        text=long_document(), kind="markdown", mime="text/markdown", title="Field manual"
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
    assert source_span(doc, data) == data.text
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
