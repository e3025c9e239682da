"""What the extractive answer does with names, list items and section headings.

A question naming a code or identifier the collection never mentions is
declined with that name; a short list item is quoted whole; a sentence is read
with the heading above it. Real PostgreSQL + pgvector and the real embedder.
"""

from __future__ import annotations

import pytest

from query_app.pipeline.keyword import code_parts
from query_app.pipeline.names import question_names
from query_app.pipeline.rows import question_words, row_match
from query_app.pipeline.units import ITEM, text_units
from tests.support.asking import ask, stage_details
from tests.support.factories import Doc, indexed_collection

SCANNERS = (
    "Quillmate Q3 datasheet\n"
    "Power\n"
    "The Quillmate Q3 battery holds 3200 mAh and is replaced without tools.\n"
    "Errors\n"
    "SourceTooLarge: the scanned file exceeds the upload limit of 20 MB.\n"
)
INCIDENT = (
    "Incident report\n"
    "Summary\n"
    "For 47 minutes the upload service answered every request with an error.\n"
    "Root cause\n"
    "The TLS certificate of the message broker expired.\n"
    "Action items\n"
    "- 1. Alert 30 days before any certificate expires. Owner: Aisha Bakker. Due on 15 August.\n"
    "- 2. Show the broker on the status page. Owner: Platform team.\n"
)


@pytest.fixture
def scanners(db, reader):
    return indexed_collection(
        [
            Doc(location="/docs/q3.md", title="Quillmate Q3 datasheet", chunks=[SCANNERS]),
            Doc(location="/docs/incident.pdf", title="Incident report", chunks=[INCIDENT]),
        ],
        slug="scanners",
        members={reader: "read"},
    )


def test_codes_and_camel_case_identifiers_are_names():
    assert code_parts("macOS") == ["macOS"]
    assert code_parts("SourceTooLarge") == ["SourceTooLarge"]
    assert code_parts("Interleukin") == []
    assert question_names("Does the Q5 run macOS or ERR-4471, see https://x.example/a1?") == [
        "Q5",
        "macOS",
        "ERR-4471",
    ]


def test_a_question_about_a_name_the_collection_never_mentions_is_declined(scanners, reader):
    run = ask(reader, "scanners", "What is the battery capacity of the Quillmate Q5?")

    assert run.mode == "not-found"
    assert "never mentions “Q5”" in run.answer
    assert "3200" not in run.answer
    assert run.citations == []
    assert stage_details(run, "generate")["unknown_names"] == ["Q5"]


def test_the_same_question_about_a_name_it_mentions_is_answered(scanners, reader):
    run = ask(reader, "scanners", "What is the battery capacity of the Quillmate Q3?")

    assert run.mode == "extractive"
    assert "3200 mAh" in run.answer
    assert "unknown_names" not in stage_details(run, "generate")


def test_a_camel_case_identifier_is_looked_up_like_a_code(scanners, reader):
    # The keyword leg requires it: the passage holding it is an exact match.
    run = ask(reader, "scanners", "What does SourceTooLarge mean?", retrieval={"mode": "hybrid"})

    assert run.mode == "extractive"
    assert "exceeds the upload limit of 20 MB" in run.answer


def test_a_short_list_item_is_one_unit_without_its_marks():
    items = [u for u in text_units(INCIDENT) if u.kind == ITEM]

    assert [u.text for u in items] == [
        "Alert 30 days before any certificate expires. Owner: Aisha Bakker. Due on 15 August.",
        "Show the broker on the status page. Owner: Platform team.",
    ]
    assert all(INCIDENT[u.start : u.end] == u.text for u in items)


def test_the_owner_of_an_action_item_is_quoted_with_the_action(scanners, reader):
    run = ask(
        reader, "scanners", "Who owns the certificate expiry alerting action, and when is it due?"
    )

    assert "Owner: Aisha Bakker. Due on 15 August." in run.answer


def test_a_sentence_is_found_through_the_heading_above_it(scanners, reader):
    # Alone, "The TLS certificate … expired." says nothing of a root cause; under
    # its "Root cause" heading it answers the question's second part.
    run = ask(
        reader, "scanners", "How long did the upload incident last, and what was its root cause?"
    )

    assert run.mode == "extractive"
    assert "For 47 minutes" in run.answer
    assert "The TLS certificate of the message broker expired." in run.answer


PRICES = (
    "sku: SKU-20931; product: Quillmate Q3; description: Handheld scanner; price_eur: 349.00\n\n"
    "sku: SKU-20932; product: Quillmate Q3 Rugged; description: Q3 with a rubber boot; "
    "price_eur: 429.00\n\n"
    "sku: SKU-20940; product: Quillmate Q3 Starter Kit; description: One Q3 with a dock; "
    "price_eur: 449.00"
)
HOLIDAYS = (
    "date: 2024-04-27; holiday: King's Day; offices_closed: Utrecht\n\n"
    "date: 2024-12-24; holiday: Company day; offices_closed: all\n\n"
    "date: 2024-12-26; holiday: Boxing Day; offices_closed: Ghent;Utrecht"
)


def test_row_bonus_goes_to_the_row_whose_value_the_question_spells_out():
    asked = question_words("What is the list price of a Quillmate Q3?")
    exact, rugged, kit = (row_match(asked, row) for row in PRICES.split("\n\n"))
    assert exact > 0.0
    assert rugged == kit == 0.0
    # A date is the same day however it is written.
    asked = question_words("Which office is closed on 27 April 2024?")
    assert [row_match(asked, row) > 0 for row in HOLIDAYS.split("\n\n")] == [True, False, False]
    # A plain word any question may use names no row.
    assert row_match(question_words("Are all offices closed?"), "offices_closed: all") == 0.0


@pytest.fixture
def tables(db, reader):
    return indexed_collection(
        [
            Doc(location="/docs/prices.csv", title="Price list", chunks=[PRICES]),
            Doc(location="/docs/holidays.csv", title="Holidays 2024", chunks=[HOLIDAYS]),
        ],
        slug="tables",
        members={reader: "read"},
    )


def test_the_row_named_by_the_question_is_quoted_first(tables, reader):
    run = ask(reader, "tables", "What is the list price of a Quillmate Q3?")
    assert run.answer.startswith("sku: SKU-20931; product: Quillmate Q3;")
    assert "Rugged" not in run.answer and "Starter Kit" not in run.answer
    run = ask(reader, "tables", "Which office is closed on 27 April 2024?")
    assert run.answer.startswith("date: 2024-04-27; holiday: King's Day; offices_closed: Utrecht")
    assert "Boxing Day" not in run.answer and "Company day" not in run.answer


def test_a_subtitle_in_a_page_title_block_is_a_title_but_not_under_markdown_headings():
    page = "Incident report INC-7\nUpload outage on 18 July 2024.\nSummary\nFor 47 minutes uploads failed."
    units = text_units(page)
    assert [u.text for u in units if u.title] == [
        "Incident report INC-7",
        "Upload outage on 18 July 2024.",
        "Summary",
    ]
    faq = "### Quotes\nQuotes are valid for 60 days.\n### Shipping\nShipping is free."
    assert [u.text for u in text_units(faq) if not u.title] == [
        "Quotes are valid for 60 days.",
        "Shipping is free.",
    ]


def test_each_part_of_a_two_part_question_gets_its_own_sentence(scanners, reader):
    # The second part's own words ("battery") pick its sentence, although the
    # first part's subject (the scanner) is read with it.
    run = ask(
        reader,
        "scanners",
        "How long did the upload incident last, and who owns the status page action?",
    )
    assert "For 47 minutes" in run.answer
    assert "Owner: Platform team." in run.answer


def test_a_question_naming_an_amount_needs_a_figure(scanners, reader):
    # The incident passage names the team, but no salary: nothing answers this.
    run = ask(reader, "scanners", "What is the salary of the Platform team?")
    assert run.mode == "not-found"
    assert "Platform team" not in run.answer
