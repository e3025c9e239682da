"""Extractive answers read as sentences, each cited down to the exact sentence.

Real PostgreSQL + pgvector and the real embedder; the chat-model case talks to
the scripted OpenAI-compatible server on loopback (no LLM runs here).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from query_app.pipeline.assembly import AssembledContext, Passage
from query_app.pipeline.quotable import quotable_units
from query_app.pipeline.types import Candidate
from query_app.pipeline.units import CODE, ITEM, ROW, SENTENCE, text_units
from query_app.services import QueryRequest, query_answer
from query_app.views import source_url
from tests.support.asking import ask, stage_details
from tests.support.chat_server import completion
from tests.support.factories import Doc, indexed_collection

ERROR_CODES = (
    "UnknownChunker: the chunking strategy name is not one of recursive, sentence, structural,\n"
    "semantic or fixed. The message lists the known names.\n\n"
    "EmbeddingProfileDrift: the collection was embedded with a different model than the one\n"
    "configured now. Run the ingestion again with --reindex to re-embed every source.\n\n"
    "SourceTooLarge: the file exceeds a size, page or decompression limit, for example a zip\n"
    "bomb renamed to .docx."
)
HARBOUR = (
    "Harbour rules\n\n"
    "All small craft must double their mooring lines before the storm arrives.\n"
    "The harbour master closes the slipway when the wind exceeds force 8."
)
DATASHEET = (
    "Quillmate datasheet\n"
    "Physical\n"
    "- Weight: 182 g including the battery\n"
    "- Display: 2.4 inch colour touch screen\n"
    "Power\n"
    "- Battery: 3200 mAh lithium-ion, replaceable without tools\n"
    "Page 1 of 2"
)


def _folded(text: str, start: int, end: int) -> str:
    return " ".join(text[start:end].split())


def test_hard_wrapped_lines_are_joined_into_whole_sentences():
    units = text_units(ERROR_CODES)
    sentences = [u.text for u in units if u.kind == SENTENCE]
    assert sentences == [
        "UnknownChunker: the chunking strategy name is not one of recursive, sentence, "
        "structural, semantic or fixed.",
        "The message lists the known names.",
        "EmbeddingProfileDrift: the collection was embedded with a different model than the "
        "one configured now.",
        "Run the ingestion again with --reindex to re-embed every source.",
        "SourceTooLarge: the file exceeds a size, page or decompression limit, for example a "
        "zip bomb renamed to .docx.",
    ]
    # Offsets point into the text as stored, line breaks and all.
    for unit in units:
        assert _folded(ERROR_CODES, unit.start, unit.end) == unit.text


def test_list_items_stay_apart_and_titles_and_footers_are_never_quotable():
    units = text_units(DATASHEET)
    titles = [u.text for u in units if u.title]
    assert titles == ["Quillmate datasheet", "Physical", "Power", "Page 1 of 2"]
    items = [u.text for u in units if u.kind == ITEM]
    assert items == [
        "Weight: 182 g including the battery",
        "Display: 2.4 inch colour touch screen",
        "Battery: 3200 mAh lithium-ion, replaceable without tools",
    ]
    assert all(DATASHEET[u.start : u.end] == u.text for u in units if u.kind == ITEM)


def test_a_two_word_label_opening_a_paragraph_is_never_quoted():
    # A PDF's first lines run together: "Version 3.4." is a label, not a sentence.
    units = text_units(
        "Lanternfish Administration Guide\nVersion 3.4. This guide is for administrators "
        "who run the server.\n\nInstall silently:\n\n```\nsetup /qn\n```\n"
    )
    quotable = [u.text for u in units if u.quotable]
    assert "Version 3.4." not in quotable
    assert "This guide is for administrators who run the server." in quotable
    # A short line that introduces the next one stays quotable.
    assert "Install silently:" in quotable


def test_sentences_end_only_where_a_space_follows_and_offsets_stay_exact():
    text = (
        "History is kept in `~/.psql_history`, or `%APPDATA%\\psql_history` on Windows. "
        "Set `HISTSIZE` to keep more!\nLines join.  Then this one ends? Yes, it does."
    )
    units = text_units(text)
    assert [u.text for u in units] == [
        "History is kept in `~/.psql_history`, or `%APPDATA%\\psql_history` on Windows.",
        "Set `HISTSIZE` to keep more!",
        "Lines join.",
        "Then this one ends?",
        "Yes, it does.",
    ]
    assert all(" ".join(text[u.start : u.end].split()) == u.text for u in units)


def test_table_headers_and_rules_are_titles_rows_and_code_lines_are_units():
    text = (
        "| Key | Default |\n| --- | --- |\n| `keep_daily` | 14 |\n\n"
        "Install silently:\n\n```\nmsiexec /i setup.msi /qn\n```"
    )
    units = text_units(text)
    assert [(u.kind, u.title, u.text) for u in units] == [
        (ROW, True, "| Key | Default |"),
        (ROW, True, "| --- | --- |"),
        (ROW, False, "`keep_daily` | 14"),
        (SENTENCE, False, "Install silently:"),
        (CODE, False, "msiexec /i setup.msi /qn"),
    ]


def test_a_unit_is_read_under_its_markdown_heading_not_a_table_header_or_contents_entry():
    text = (
        "# Settings reference\n\n- 1. Retention (page 1)\n- 2. Encryption (page 2)\n\n"
        "## [retention]\n\n| Key | Default |\n| --- | --- |\n| `keep_daily` | 14 |\n\n"
        "## [encryption]\n\n- `key_rotation_days`: data keys are rotated every 90 days.\n"
    )
    headings = [u.text for u in text_units(text) if u.heading]
    assert headings == ["# Settings reference", "## [retention]", "## [encryption]"]
    candidate = Candidate(
        chunk_id="c",
        source_id=1,
        source_location="settings.md",
        source_title="Settings",
        text=text,
        char_start=0,
        char_end=len(text),
    )
    passage = Passage(marker=1, candidate=candidate, text=text, block="", tokens=0)
    found, _, _ = quotable_units(AssembledContext(passages=[passage]), None)
    sections = {quote.unit.text: quote.section for quote, _ in found}
    assert sections == {
        "`keep_daily` | 14": "Settings reference > [retention]",
        "`key_rotation_days`: data keys are rotated every 90 days.": (
            "Settings reference > [encryption]"
        ),
    }


def test_a_sentence_cut_by_the_chunk_boundary_is_a_fragment():
    units = text_units("retried after one minute. Backups run nightly at 02:00 and the window")
    assert [(u.text, u.fragment) for u in units] == [
        ("retried after one minute.", True),
        ("Backups run nightly at 02:00 and the window", True),
    ]


@pytest.fixture
def handbook(db, reader):
    return indexed_collection(
        [
            Doc(location="/docs/error-codes.txt", title="Error codes", chunks=[ERROR_CODES]),
            Doc(location="/docs/harbour.md", title="Harbour rules", chunks=[HARBOUR]),
            Doc(location="/docs/datasheet.pdf", title="Quillmate datasheet", chunks=[DATASHEET]),
        ],
        slug="handbook",
        members={reader: "read"},
    )


def _ask(reader, question: str, **overrides: object):
    request = QueryRequest(collection="handbook", question=question, overrides=overrides or None)
    return query_answer(user=reader, request=request)


def test_a_two_part_question_gets_the_whole_sentences_that_answer_it(handbook, reader):
    run = _ask(reader, "What does EmbeddingProfileDrift mean and how do I fix it?")

    assert run.mode == "extractive"
    assert "embedded with a different model than the one configured now. [1]" in run.answer
    assert "Run the ingestion again with --reindex to re-embed every source." in run.answer
    # Whole sentences only: no fragment of the neighbouring entries, no repeats.
    assert "semantic or fixed" not in run.answer
    assert run.answer.count("--reindex") == 1


def test_every_citation_points_at_the_exact_sentences_it_supports(handbook, reader):
    run = _ask(reader, "What does EmbeddingProfileDrift mean and how do I fix it?")
    source_text = ERROR_CODES  # one chunk: the source's text is the chunk's
    cited = [c for c in run.citations if c["cited"]]
    assert cited
    for citation in cited:
        assert citation["spans"], citation
        for span in citation["spans"]:
            quoted = " ".join(span["text"].split())
            assert quoted in run.answer
            assert _folded(source_text, span["char_start"], span["char_end"]) == quoted
            assert span["page"] is None


def test_a_sentence_below_the_floor_is_never_quoted(handbook, reader):
    # The harbour passage is about mooring lines, not prices: nothing answers this.
    run = _ask(reader, "How much does mooring cost per night?")
    assert run.mode == "not-found"
    assert "mooring lines" not in run.answer
    assert run.citations == []
    generate = next(s for s in run.trace if s["stage"] == "generate")
    assert generate["details"]["reason"] == (
        "no sentence of the passages is relevant enough on its own"
    )


def test_a_list_item_answers_as_a_sentence_without_its_bullet(handbook, reader):
    run = _ask(reader, "How much does the Quillmate weigh?")
    assert run.mode == "extractive"
    assert run.answer.startswith("Weight: 182 g including the battery.")
    assert "Quillmate datasheet" not in run.answer  # the title is never quoted
    assert "Page 1 of 2" not in run.answer


def test_a_chat_model_answer_is_aligned_to_the_sentence_it_rests_on(
    handbook, reader, chat_configured
):
    chat_configured.script(
        completion("Re-run the ingestion with --reindex so every source is embedded again [1].")
    )
    run = _ask(reader, "How do I fix EmbeddingProfileDrift?", **{"rerank.top_n": 1})

    assert run.mode == "llm"
    (citation,) = run.citations
    assert [s["text"] for s in citation["spans"]] == [
        "Run the ingestion again with --reindex to re-embed every source."
    ]


def test_the_passage_preview_and_the_source_page_highlight_the_cited_sentence(
    handbook, reader, client
):
    run = _ask(reader, "How much does the Quillmate weigh?")
    client.force_login(reader)

    preview = client.get(
        reverse("query:passage", kwargs={"run_id": run.pk, "marker": 1})
    ).content.decode()
    assert (
        '<mark id="cited-sentence" tabindex="-1" class="cited" title="cited sentence">'
        "Weight: 182 g including the battery</mark>"
    ) in preview

    source = run.citations[0]
    url = source_url(run, source)
    assert f"start={source['spans'][0]['char_start']}" in url
    page = client.get(url).content.decode()
    # Only the sentence is marked, not the whole passage.
    assert ">Weight: 182 g including the battery</mark>" in page
    assert "the cited sentence (characters" in page


NOTES = (
    "# Platform team notes, week 27\n\n"
    "- Deploy freeze from 15 to 19 July for the move to the new data centre.\n"
    "- On call this week: Jonas Peeters (primary) and Aisha Bakker (secondary).\n"
    "- The staging cluster moves to Kubernetes 1.30 on 22 July.\n"
    "- Retrospective of the June release on Thursday at 14:00 in the meeting room Saturn.\n"
    "- The coffee machine on the second floor is repaired; the old one goes to recycling.\n"
)


@pytest.fixture
def notes(db, reader):  # type: ignore[no-untyped-def]
    return indexed_collection(
        [
            Doc(location="/team/notes.md", title="Platform team notes", chunks=[NOTES]),
            Doc(location="/docs/harbour.md", title="Harbour rules", chunks=[HARBOUR]),
        ],
        slug="notes",
        members={reader: "read"},
    )


def test_one_sentence_near_the_question_lets_a_page_of_mixed_notes_answer(notes, reader):
    question = "Who is the primary on call this week?"
    run = ask(reader, "notes", question)
    floor = stage_details(run, "rerank")["floor"]
    # The page as a whole is below the passage floor; its on-call line is not.
    assert floor["best_vector_similarity"] < floor["min_vector_similarity"]
    assert floor["judged_by"] == "one sentence's similarity"
    assert floor["best_unit_similarity"] >= floor["min_unit_similarity"]
    assert floor["sentence"].startswith("On call this week: Jonas Peeters (primary)")
    assert run.mode == "extractive"
    assert run.answer.startswith("On call this week: Jonas Peeters (primary)")
    # Only that line: the page's other notes are no nearer the question than the page.
    assert "coffee" not in run.answer and "Kubernetes" not in run.answer
    # Without the sentence floor the passage's cosine alone decides, and declines.
    strict = ask(reader, "notes", question, **{"floor.min_unit_similarity": None})
    assert strict.mode == "not-found"
    assert stage_details(strict, "rerank")["floor"]["judged_by"] == "vector similarity"


RULES = "## Rules 14 to 19\n\n" + "\n\n".join(
    f"Rule {n} says that crew {n % 7} checks the pump number {n} every {n % 5 + 1} days, "
    "and logs the pressure in the book."
    for n in range(14, 20)
)


def _one_document(reader, *, slug: str, location: str, title: str, text: str) -> None:
    """A collection ``slug`` of one single-passage document, readable by ``reader``."""
    indexed_collection(
        [Doc(location=location, title=title, chunks=[text])], slug=slug, members={reader: "read"}
    )


def test_a_sentence_holding_every_word_of_the_question_answers_below_the_sentence_floor(db, reader):
    _one_document(
        reader, slug="rules", location="/field/rules.md", title="Field handbook", text=RULES
    )
    run = ask(reader, "rules", "What does Rule 17 say?")
    # The model reads the six rules alike (cosines ~0.23-0.26, around the sentence
    # floor of 0.25); only the rule that spells out the question's words answers.
    assert run.mode == "extractive"
    assert run.answer.startswith("Rule 17 says that crew 3 checks the pump number 17 every 3 days")
    assert "Rule 19" not in run.answer and "Rule 16" not in run.answer


PROFILE_ROWS = (
    "Profile: fast; Retrieval: vector; Candidates: 5; Reranker: none; Groundedness check: off\n\n"
    "Profile: balanced; Retrieval: hybrid; Candidates: 50; Reranker: cross-encoder; "
    "Groundedness check: off\n\n"
    "Profile: quality; Retrieval: hybrid; Candidates: 100; Reranker: cross-encoder; "
    "Groundedness check: on"
)


def test_a_row_lacking_the_word_the_question_picks_rows_by_never_joins_the_answer(db, reader):
    _one_document(
        reader, slug="profiles", location="/docs/profiles.csv", title="profiles", text=PROFILE_ROWS
    )
    run = ask(reader, "profiles", "Which profile reranks with a cross-encoder?")

    assert run.mode == "extractive"
    assert "Profile: balanced" in run.answer
    # The fast row ("Reranker: none") is as near the question by its words and
    # model, but does not hold what the question asks for.
    assert "Profile: fast" not in run.answer
