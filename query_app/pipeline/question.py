"""What a question asks: its parts, and whether its answer must be a figure.

"What does EmbeddingProfileDrift mean and how do I fix it?" asks two things; a
later part borrows the first part's subject words to be searched, but is judged
by its own words. "How long …", "What is her salary?" ask for a quantity: a
sentence without a number (digits or a number word) cannot answer them.
"""

from __future__ import annotations

import re

from query_app.pipeline.lexical import STOPWORDS

# "… and how do I fix it?", ", and on its battery?", ", and what is each one for?"
_PART_SPLIT_RE = re.compile(
    r"(?:,\s*|\s+)and\s+(?=(?:what|how|which|who|whom|when|where|why|is|are|was|were|does|do|"
    r"did|can|could|should|on|in|for|its|their)\b)|,\s+(?=(?:what|how|which|who|when|where|why)\b)",
    re.IGNORECASE,
)
QUESTION_WORDS = frozenset(
    [
        "how",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "is",
        "are",
        "was",
        "were",
        "does",
        "do",
        "did",
        "can",
        "could",
        "should",
        "the",
        "a",
        "an",
        "of",
        "long",
        "much",
        "many",
    ]
)


# Questions whose answer is a quantity, a duration, a date or a time: a sentence
# without a number (digits or a number word) cannot answer them.
_QUANTITY_RE = re.compile(
    r"^\W*(?:how (?:much|many|long|often|old|far|big|large|fast|quickly|high|heavy|wide|soon)|"
    r"when (?:is|was|will|are|were|did|does \w+ (?:start|end|open|close|expire))|what time|"
    r"what (?:year|date|day|price)|in which year|which (?:year|date|day|port))\b",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|hundred|thousand|million|dozen|once|twice|daily|weekly|monthly|yearly|"
    r"annually|hourly|nightly|january|february|march|april|may|june|july|august|september|"
    r"october|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"midnight|noon|free)\b",
    re.IGNORECASE,
)


# "What is her salary?", "What does the dock cost?": an amount is asked for by name.
_AMOUNT_NOUN_RE = re.compile(
    r"^\W*(?:what|which)\b.*\b(?:salary|salaries|wage|wages|price|prices|cost|costs|fee|fees|"
    r"revenue|turnover|income|budget)\b",
    re.IGNORECASE,
)


# "What …", "How many …", "When …": a question asking for a fact about something,
# not whether a statement holds ("Is X valuable in Y?"), why, or how a thing is done
# ("How are chunk sizes counted?" is answered in other words: "measured in tokens").
_ATTRIBUTE_RE = re.compile(
    r"^\W*(?:what|which|when|who|whom|whose|where|how (?:much|many|long|often|old))\b",
    re.IGNORECASE,
)


def plain_word(word: str, *, min_length: int) -> bool:
    """An ordinary word of a question, worth looking up in a collection: letters only,
    at least ``min_length`` of them, neither a stopword nor a word framing the question."""
    lower = word.lower()
    return (
        len(word) >= min_length
        and word.isalpha()
        and lower not in STOPWORDS
        and lower not in QUESTION_WORDS
    )


def asks_for_attribute(question: str) -> bool:
    return bool(_ATTRIBUTE_RE.match(question))


def asks_for_quantity(question: str) -> bool:
    return bool(_QUANTITY_RE.search(question) or _AMOUNT_NOUN_RE.search(question))


def states_quantity(text: str) -> bool:
    return bool(_NUMBER_RE.search(text))


def question_parts(question: str) -> list[str]:
    """The sub-questions of a question that asks two things ("What is X and how do I fix it?").

    A later part borrows the first part's subject words, so "how do I fix it"
    is searched as "how do I fix it EmbeddingProfileDrift".
    """
    parts = [p.strip(" ?,;") for p in _PART_SPLIT_RE.split(question) if p.strip(" ?,;")]
    if len(parts) < 2:
        return [question]
    subject = " ".join(
        w for w in re.findall(r"[\w.\-]+", parts[0]) if w.lower() not in QUESTION_WORDS
    )
    return [parts[0], *(f"{part} {subject}" for part in parts[1:3])]


def own_parts(question: str) -> list[str]:
    """The parts of a multi-part question as asked, without the borrowed subject."""
    parts = [p.strip(" ?,;") for p in _PART_SPLIT_RE.split(question) if p.strip(" ?,;")]
    return parts[:3]
