"""How much of a question the passages an extractive answer quotes from speak of.

The relevance floor judges the best passage's cosine to the question, and a
passage about a neighbouring subject clears it: against a collection of medical
abstracts, "Are environmental factors important in primary systemic vasculitis?"
finds an abstract on breast carcinoma at a cosine of 0.38, and quoting it answers
another question. What gives such an answer away is that the passages it quotes
from use few of the question's words, and none of its rare ones ("vasculitis").

``question_coverage`` weighs each ordinary word of the question by its rarity in
the collection (BM25's IDF: a word most passages use says little) and returns
the share of that weight the quoted passages hold, with the words they lack,
rarest first. A word counts as held when a passage holds its stem, or a word it
may be a misspelling of (as ``unaddressed.words_to_try`` does). The extractive
answer declines below ``generation.min_question_coverage``; a chat model reads
the passages itself and is not checked.

Measured on PubMedQA's questions against a collection that holds the abstracts
of only some of them (docs/answering.md, "Extractive answers").
"""

from __future__ import annotations

import calendar
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from collections_app import search_index
from query_app.pipeline.index_memo import IndexMemo, index_key
from query_app.pipeline.lexical import stem, words
from query_app.pipeline.names import never_mentions_answer
from query_app.pipeline.question import plain_word
from query_app.pipeline.spelling import english_zipf
from query_app.pipeline.unaddressed import MIN_LENGTH, misspells, passage_words

if TYPE_CHECKING:
    from collections_app.models import Collection

# Words shorter than unaddressed.MIN_LENGTH are left out (abbreviations and units:
# "OSA", "ml"): they are written in too many ways to count against a passage.
# Month and weekday names are left out too: a date is written in many forms ("24 December
# 2024", "2024-12-24", "Tue 24/12"), and rows.py reads the question's dates.
CALENDAR_WORDS = frozenset(
    name.lower() for name in (*calendar.month_name, *calendar.day_name) if name
)
# A word whose Zipf frequency in English (spelling.english_zipf) is below this is taken
# for a term of art ("glioma" 1.6, "maxillary" 2.2), not a paraphrase in everyday words
# ("handheld" 2.6, "mileage" 3.0, "money" 5.6).
RARE_IN_ENGLISH = 2.5

# Document frequencies of some words in the collection, with its passage count.
WordFrequencies = Callable[[Sequence[str]], tuple[Mapping[str, int], int]]


@dataclass(frozen=True)
class Coverage:
    share: float  # 0-1: the IDF-weighted share of the question's words the passages hold
    missing: list[str] = field(default_factory=list)  # the words they lack, rarest first
    weighed: int = 0  # how many of the question's words were weighed
    # The missing words no passage of the collection holds and English rarely uses.
    unknown: list[str] = field(default_factory=list)


def question_words(question: str) -> list[str]:
    """The ordinary words of ``question`` that coverage weighs, as written, without repeats."""
    seen: set[str] = set()
    found: list[str] = []
    for word in words(question):
        key = stem(word)
        if (
            plain_word(word, min_length=MIN_LENGTH)
            and word.lower() not in CALENDAR_WORDS
            and key not in seen
        ):
            seen.add(key)
            found.append(word)
    return found


def question_coverage(
    question: str, passages: Sequence[str], *, frequencies: WordFrequencies
) -> Coverage:
    """The share of ``question``'s words, weighed by rarity, that ``passages`` hold.

    ``frequencies(words)`` gives the collection's document frequency of each word
    (0 for one it lacks) and its passage count. A question with no word to weigh
    is fully covered.
    """
    asked = question_words(question)
    if not asked:
        return Coverage(share=1.0)
    held, vocabulary = passage_words(passages)
    df, n_docs = frequencies(asked)
    # BM25's always-positive IDF, as the keyword leg weighs words (a stale count may
    # exceed the passage count).
    weight = {
        w: search_index.bm25_idf(n_docs=max(n_docs, df.get(w, 0)), df=df.get(w, 0)) for w in asked
    }
    missing = [w for w in asked if stem(w) not in held and not _misspelt(w, df, vocabulary)]
    total = sum(weight.values()) or 1.0
    share = 1.0 - sum(weight[w] for w in missing) / total
    return Coverage(
        share=round(share, 4),
        missing=sorted(missing, key=lambda w: (-weight[w], asked.index(w))),
        weighed=len(asked),
        unknown=[w for w in missing if not df.get(w, 0) and english_zipf(w) < RARE_IN_ENGLISH],
    )


def _misspelt(word: str, df: Mapping[str, int], vocabulary: set[str]) -> bool:
    # A word the collection holds is spelt as it uses it; only one it lacks is compared.
    return not df.get(word, 0) and misspells(word, vocabulary)


def uncovered_answer(unknown: Sequence[str]) -> str:
    """The not-found answer when the quoted passages lack the question's terms of art."""
    return never_mentions_answer(
        list(unknown[:3]), "and the passages nearest the question hold little else of it"
    )


# A word's document frequency changes only with the collection's index: the
# answers are kept per process (index_memo.py), so most questions read none.
WORDS_KEPT_PER_COLLECTION = 20_000
_frequencies_held: IndexMemo[int] = IndexMemo(limit=WORDS_KEPT_PER_COLLECTION)


def collection_frequencies(collection: Collection) -> WordFrequencies:
    """``WordFrequencies`` of ``collection``, from its term statistics (as of their last
    refresh; a word PostgreSQL does not index counts as held by every passage)."""
    n_docs = search_index.TermStats.from_stored(collection.keyword_stats).chunks
    cid = int(collection.pk)

    def frequencies(asked: Sequence[str]) -> tuple[Mapping[str, int], int]:
        df = _frequencies_held.read_through(
            collection_id=cid,
            index=index_key(collection),
            keys=asked,
            read=lambda missing: search_index.word_document_frequencies(
                collection_id=cid, words=missing, stopword_df=n_docs
            ),
        )
        return df, n_docs

    return frequencies
