"""Misspelt words of a question are corrected against the collection's own words.

Real PostgreSQL + pgvector (the collection's lexemes), the real embedder and
the English word list of pyspellchecker.
"""

from __future__ import annotations

import pytest

from query_app.pipeline.spelling import spelling_correct
from tests.support.asking import ask, stage_details
from tests.support.factories import Doc, indexed_collection

SCANNER = (
    "Quillmate Q3 battery\n"
    "A full charge of the Quillmate battery lasts about 14 hours of continuous scanning.\n"
    "Charge the scanner for 3 hours before first use.\n"
)
INVOICES = (
    "Invoices\n"
    "Our payment terms are 30 days from the invoice date.\n"
    "Invoices are sent by e-mail as PDF.\n"
)


@pytest.fixture
def manuals(db, reader):
    return indexed_collection(
        [
            Doc(location="/docs/q3.md", title="Quillmate Q3 battery", chunks=[SCANNER]),
            Doc(location="/docs/invoices.md", title="Invoices", chunks=[INVOICES]),
        ],
        slug="manuals",
        members={reader: "read"},
    )


def test_misspelt_words_become_the_collections_words(manuals):
    spelled = spelling_correct("How long does the Quilmate batery last?", collection_id=manuals.pk)

    assert spelled.fixes == {"Quilmate": "Quillmate", "batery": "battery"}
    assert spelled.question == "How long does the Quillmate battery last?"


def test_a_swapped_pair_of_letters_is_one_edit(manuals):
    spelled = spelling_correct("paymnet terms for invoces", collection_id=manuals.pk)

    # Written as the collection writes it, in the inflection nearest the one typed.
    assert spelled.fixes == {"paymnet": "payment", "invoces": "invoices"}


def test_real_words_the_collection_lacks_are_never_changed(manuals):
    # "charger" is a letter from "charge", "scanned" from "scanner": both are English.
    spelled = spelling_correct(
        "Which charger is used when the code is scanned?", collection_id=manuals.pk
    )

    assert spelled.fixes == {}
    assert spelled.question == "Which charger is used when the code is scanned?"


def test_a_first_letter_and_short_words_are_never_changed(manuals):
    # "xattery" differs from "battery" in its first letter; "bttry" is too short.
    spelled = spelling_correct("xattery and bttry", collection_id=manuals.pk)

    assert spelled.fixes == {}


def test_the_answer_reads_the_corrected_question_and_the_trace_lists_it(manuals, reader):
    run = ask(reader, "manuals", "How long does a full charge of the Quilmate batery last?")

    assert run.mode == "extractive"
    assert "14 hours of continuous scanning" in run.answer
    details = stage_details(run, "transform")
    assert details["spelling"] == {"Quilmate": "Quillmate", "batery": "battery"}
    assert details["corrected"] == "How long does a full charge of the Quillmate battery last?"
    assert run.question == "How long does a full charge of the Quilmate batery last?"
    # The step did something: it is not shown as skipped.
    assert not next(s for s in run.trace if s["stage"] == "transform")["skipped"]


def test_a_cached_retrieval_keeps_the_correction_for_the_answer(manuals, reader):
    first = ask(reader, "manuals", "How long does a full charge of the Quilmate batery last?")
    second = ask(reader, "manuals", "How long does a full charge of the Quilmate batery last?")

    assert stage_details(second, "transform")["cache"] == "hit"
    assert (
        stage_details(second, "transform")["corrected"]
        == stage_details(first, "transform")["corrected"]
    )
    assert second.answer == first.answer


def test_spelling_can_be_turned_off(manuals, reader):
    run = ask(
        reader, "manuals", "What are the paymnet terms for invoces?", transform={"spelling": False}
    )

    assert "spelling" not in stage_details(run, "transform")
    assert stage_details(run, "transform")["probes"] == ["What are the paymnet terms for invoces?"]
