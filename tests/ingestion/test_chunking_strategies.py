"""What each chunking strategy does of its own: structural, sentence, fixed and semantic.

With the real default embedding model and its tokenizer.
"""

from __future__ import annotations

import itertools
import re

import pytest

from collections_app.ingestion.chunking import get_chunker
from collections_app.ingestion.types import LoadedDocument
from tests.support.chunking import GUIDE, long_document, markdown_doc, source_span


def test_a_hash_line_inside_a_code_fence_is_not_a_heading(embedder):
    drafts = get_chunker("structural", options={"chunk_tokens": 254}, embedder=embedder).chunk(
        markdown_doc(GUIDE)
    )

    assert not any("this comment is code" in " ".join(d.section_path) for d in drafts)


def test_structural_never_splits_tables_code_or_lists(embedder):
    doc = markdown_doc(GUIDE)
    drafts = get_chunker("structural", options={"chunk_tokens": 80}, embedder=embedder).chunk(doc)

    table = GUIDE[GUIDE.index("| Distribution") : GUIDE.index("| rolling         |") + 19]
    code = GUIDE[GUIDE.index("```bash") : GUIDE.index("--check\n```") + len("--check\n```")]
    items = GUIDE[GUIDE.index("- Make sure") : GUIDE.index("save space.") + 11]
    for block in (table, code, items):
        holders = [d for d in drafts if block in source_span(doc, d)]
        assert len(holders) == 1, block
        assert not holders[0].metadata.get("oversized_block")


def test_structural_starts_a_chunk_at_every_heading_and_prefixes_the_section_path(embedder):
    doc = markdown_doc(GUIDE)
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
    doc = markdown_doc(text)
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
    assert "".join(source_span(doc, d) for d in flagged).replace("\n", "") == text[
        block_start:block_end
    ].replace("\n", "")
    assert not any("After it." in d.text for d in flagged)


@pytest.mark.parametrize("overlap", [1, 2])
def test_sentence_chunks_repeat_the_last_sentences_of_the_previous_chunk(overlap, embedder):
    # (pysbd reads "topic 3. Next" as a numbered list item, so no number ends a sentence.)
    text = " ".join(f"Sentence number {n} says something about the weather." for n in range(40))
    doc = markdown_doc(text)
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
    doc = markdown_doc(GUIDE + "\n\n" + long_document())
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
