"""The extractive answer declines a question that turns on a word nothing quoted speaks of.

"What will the weather be like in Ghent tomorrow?" finds Ghent's office and
holidays, which say nothing of weather: quoting them would answer another
question. A word the collection lacks that a quoted sentence paraphrases
("crimson" for "red") and a misspelling are answered as before. Real
PostgreSQL + pgvector and the real embedder.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from query_app.pipeline.index_memo import index_key
from query_app.pipeline.names import words_absent
from query_app.pipeline.retrieval import collection_embedder
from query_app.pipeline.unaddressed import unaddressed_words, words_to_try
from tests.support.asking import ask, stage_details
from tests.support.factories import Doc, chunks_replace, indexed_collection

OFFICES = (
    "Offices\n"
    "Orrery Works has offices in Ghent, Utrecht and Lisbon.\n"
    "The Ghent office is closed on Belgian public holidays such as 21 July.\n"
    "Visitors to the Ghent office park in the garage on Lange Kruisstraat.\n"
)
COMPANY = (
    "About Orrery Works\n"
    "Orrery Works was founded in 2011 in Ghent by Marleen Declercq.\n"
    "About 140 people work for Orrery Works.\n"
)
LEAVE = (
    "Leave\n"
    "Full-time employees get 25 working days of annual leave per year.\n"
    "Up to 5 unused days can be carried over until 31 March.\n"
)
SCANNER = (
    "Quillmate Q3 status light\n"
    "A flashing red light means the battery is below 10 %.\n"
    "A steady green light means the scanner is charged and connected.\n"
)


@pytest.fixture
def handbook(db, reader):
    return indexed_collection(
        [
            Doc(location="/docs/offices.md", title="Offices", chunks=[OFFICES]),
            Doc(location="/docs/company.md", title="About Orrery Works", chunks=[COMPANY]),
            Doc(location="/docs/leave.md", title="Leave", chunks=[LEAVE]),
            Doc(location="/docs/q3-light.md", title="Quillmate Q3 status light", chunks=[SCANNER]),
        ],
        slug="handbook",
        members={reader: "read"},
    )


def test_a_question_turning_on_a_word_nothing_quoted_speaks_of_is_declined(handbook, reader):
    run = ask(reader, "handbook", "What will the weather be like in Ghent tomorrow?")

    assert run.mode == "not-found"
    assert "never mentions “weather”" in run.answer
    assert "Ghent office" not in run.answer
    assert run.citations == []
    assert "weather" in stage_details(run, "generate")["unaddressed_words"]


def test_a_word_the_collection_lacks_but_a_sentence_paraphrases_is_answered(handbook, reader):
    run = ask(reader, "handbook", "What does a flashing crimson light on the Quillmate Q3 mean?")

    assert run.mode == "extractive"
    assert "battery is below 10 %" in run.answer
    assert "unaddressed_words" not in stage_details(run, "generate")


def test_a_misspelt_word_is_not_taken_for_an_unknown_one(handbook, reader):
    run = ask(reader, "handbook", "How many days of anual leave do employees get?")

    assert run.mode == "extractive"
    assert "25 working days" in run.answer


def test_the_same_question_about_what_the_collection_holds_is_answered(handbook, reader):
    run = ask(reader, "handbook", "When was Orrery Works founded?")

    assert run.mode == "extractive"
    assert "founded in 2011" in run.answer
    assert "unaddressed_words" not in stage_details(run, "generate")


def test_only_unknown_content_words_of_the_question_are_tried():
    passages = [OFFICES, LEAVE]

    tried = words_to_try(
        "How much anual revenue did the Ghent office make in 2023, roughly?", passages
    )

    # "How much" frames the question, "anual" misspells "annual", "Ghent" and
    # "office" are in the passages, "did" is too short and "2023" not a word.
    assert tried == ["revenue", "make", "roughly"]


def test_words_absent_are_those_no_chunk_of_the_collection_holds(handbook):
    absent = words_absent(
        collection_id=handbook.pk, words=["weather", "holidays", "revenue", "employee"]
    )

    assert absent == ["weather", "revenue"]


def test_which_words_a_collection_holds_is_kept_until_its_index_changes(handbook):
    words = ["weather", "holidays", "revenue"]
    first = words_absent(collection_id=handbook.pk, words=words, index=index_key(handbook))
    with CaptureQueriesContext(connection) as kept:
        again = words_absent(collection_id=handbook.pk, words=words, index=index_key(handbook))
    assert again == first == ["weather", "revenue"]
    assert kept.captured_queries == []

    # Re-ingestion bumps the index version: the words are asked of the new index.
    chunks_replace(handbook, ["Revenue grew in the third quarter."])
    with CaptureQueriesContext(connection) as asked:
        after = words_absent(collection_id=handbook.pk, words=words, index=index_key(handbook))
    assert after == ["weather", "holidays"]
    assert len(asked.captured_queries) == 1


def test_a_word_is_unaddressed_only_when_it_carries_the_question(handbook):
    encode = collection_embedder(handbook).encode

    declined = unaddressed_words(
        "What will the weather be like in Ghent tomorrow?",
        ["The Ghent office is closed on Belgian public holidays such as 21 July."],
        ["weather"],
        encode=encode,
    )
    # Without "prefix" the question means nearly the same: its answer is often
    # worded otherwise, so the word is not held against the quote.
    kept = unaddressed_words(
        "What prefix do Beacon test API keys have?",
        ["Test keys start with bk_test_ and only work against the sandbox."],
        ["prefix"],
        encode=encode,
    )

    assert list(declined) == ["weather"]
    assert declined["weather"] > 0.02
    assert kept == {}


def test_only_questions_asking_for_a_fact_are_checked():
    # Whether a statement holds, or how a thing is done, is often answered in
    # other words: such questions are never declined for a word.
    assert words_to_try("Is anorectal endosonography valuable in dyschesia?", [LEAVE]) == []
    assert words_to_try("How are chunk sizes counted?", [LEAVE]) == []
    assert words_to_try("How many weeks of parental leave are there?", [LEAVE]) == [
        "weeks",
        "parental",
    ]
