"""The extractive answer declines to quote passages about another subject.

"Is paclitaxel effective against glioma in adults?" asked of abstracts on other
cancers finds one whose words and subject are near ("chemotherapy", "effective",
"adults", "breast carcinoma"), above the relevance floor: quoting it would answer
another question. As in any collection of abstracts, most passages say "effective"
and "adults", so those words weigh little. The passages hold little of the question's words weighed by
rarity, and the question names terms of art the collection never uses. A question
in everyday words the collection lacks (a paraphrase) is answered as before. Real
PostgreSQL + pgvector and the real embedder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from query_app.pipeline.coverage import question_coverage, question_words
from tests.support.asking import ask, stage_details
from tests.support.factories import Doc, indexed_collection

BREAST = (
    "Chemotherapy in older women with breast carcinoma\n"
    "Adjuvant chemotherapy was effective in adults over 70 with breast carcinoma: "
    "five-year survival rose from 61 % to 72 % in 412 women treated after surgery.\n"
    "Side effects were mild in most patients and rarely stopped the treatment.\n"
)
ASTHMA = (
    "Inhaled steroids in childhood asthma\n"
    "Inhaled steroids were effective in children and adults: asthma attacks fell by a "
    "third over two years.\n"
)
BOUNTY = (
    "Security reports\n"
    "Researchers who report a vulnerability in our software receive a reward of up to "
    "5,000 EUR, depending on its severity.\n"
)
KNEE = (
    "Knee replacement recovery\n"
    "Early physiotherapy was effective: most adults walk unaided six weeks after a knee "
    "replacement.\n"
)


@pytest.fixture
def abstracts(db, reader):
    return indexed_collection(
        [
            Doc(location="/abstracts/breast.md", title="Breast carcinoma", chunks=[BREAST]),
            Doc(location="/abstracts/asthma.md", title="Childhood asthma", chunks=[ASTHMA]),
            Doc(location="/abstracts/bounty.md", title="Security reports", chunks=[BOUNTY]),
            Doc(location="/abstracts/knee.md", title="Knee replacement", chunks=[KNEE]),
        ],
        slug="abstracts",
        members={reader: "read"},
    )


def test_passages_on_another_subject_are_not_quoted(abstracts, reader):
    run = ask(reader, "abstracts", "Is paclitaxel effective against glioma in adults?")

    details = stage_details(run, "generate")
    assert run.mode == "not-found", details
    assert "never mentions" in run.answer and "“glioma”" in run.answer
    assert "breast carcinoma" not in run.answer
    assert run.citations == []
    assert details["question_coverage"] < 0.3
    assert {"paclitaxel", "glioma"} <= set(details["unknown_words"])


def test_the_same_passages_are_quoted_for_the_question_they_answer(abstracts, reader):
    run = ask(reader, "abstracts", "Is chemotherapy effective in adults with breast carcinoma?")

    assert run.mode == "extractive"
    assert "five-year survival" in run.answer
    assert stage_details(run, "generate")["question_coverage"] > 0.5


def test_everyday_words_the_collection_lacks_are_taken_for_a_paraphrase(abstracts, reader):
    run = ask(reader, "abstracts", "How much money can I earn by finding a hole in your software?")

    assert run.mode == "extractive", stage_details(run, "generate")
    assert "5,000 EUR" in run.answer


def test_the_check_can_be_turned_off(abstracts, reader):
    run = ask(
        reader,
        "abstracts",
        "Is paclitaxel effective against glioma in adults?",
        generation={"min_question_coverage": None},
    )

    if run.mode == "not-found":  # then the relevance floor declined it, not coverage
        assert "unknown_words" not in stage_details(run, "generate")
    else:
        assert "question_coverage" in stage_details(run, "generate")


def _frequencies(table: Mapping[str, int], n_docs: int):
    def read(words: Sequence[str]) -> tuple[Mapping[str, int], int]:
        return {w: table.get(w, 0) for w in words}, n_docs

    return read


def test_coverage_weighs_the_question_words_by_rarity():
    frequencies = _frequencies({"effective": 400, "adults": 300, "against": 500}, 1000)
    passages = ["Chemotherapy was effective in adults with breast carcinoma."]

    coverage = question_coverage(
        "Is paclitaxel effective against glioma in adults?", passages, frequencies=frequencies
    )

    # The held words are common, the missing ones unknown to the collection: most of
    # the weight is missing, rarest first ("against" is a stopword, not weighed).
    assert coverage.missing == ["paclitaxel", "glioma"]
    assert coverage.share < 0.3
    assert coverage.unknown == ["paclitaxel", "glioma"]
    assert coverage.weighed == 4


def test_inflections_and_misspellings_of_passage_words_count_as_held():
    frequencies = _frequencies({"treated": 10, "patients": 50}, 100)
    passages = ["Patients were treated with inhaled steroids."]

    coverage = question_coverage(
        "Are patients treating with inhalled steroids?", passages, frequencies=frequencies
    )

    assert coverage.missing == []
    assert coverage.share == 1.0


def test_month_and_weekday_names_are_not_weighed():
    # "24 December 2024" may be written 2024-12-24 in the passage that answers it.
    assert question_words("Are the offices open on Tuesday 24 December 2024?") == [
        "offices",
        "open",
    ]


def test_a_question_without_words_to_weigh_is_fully_covered():
    assert question_words("Why not?") == []
    coverage = question_coverage("Why not?", ["Anything."], frequencies=_frequencies({}, 10))
    assert coverage.share == 1.0 and coverage.missing == []
