"""What a question asks: its parts, and whether its answer must be a figure.

"What does EmbeddingProfileDrift mean and how do I fix it?" asks two things; a
later part borrows the first part's subject words to be searched, but is judged
by its own words. "How long …", "What is her salary?" ask for a quantity: a
sentence without a number (digits or a number word) cannot answer them.
"""

from __future__ import annotations

import re

from query_app.pipeline.lexical import STOPWORDS, content_terms

# "… and how do I fix it?", ", and on its battery?", ", and what is each one for?",
# ", and at which address do I reach support?", ", and during which hours …?"
_PART_SPLIT_RE = re.compile(
    r"(?:,\s*|\s+)and\s+(?=(?:what|how|which|who|whom|when|where|why|is|are|was|were|does|do|"
    r"did|can|could|should|on|in|for|its|their)\b)"
    r"|(?:,\s*|\s+)and\s+(?=(?:at|by|from|to|with|during|under|after|before|until)\s+"
    r"(?:what|which|whom|whose|how)\b)"
    r"|,\s+(?=(?:what|how|which|who|when|where|why)\b)",
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
    """The sub-questions of a question that asks two or three things, each as searched.

    A later part that names its own subject is searched in its own words
    ("where do I report a new vulnerability"); one that points back ("how do I
    fix it?") borrows the first part's subject words and is searched as "how do
    I fix it EmbeddingProfileDrift". Borrowed words where they are not needed
    would pull the part back to the first part's passages.
    """
    own = own_parts(question)
    if len(own) < 2:
        return [question]
    subject = " ".join(
        w for w in re.findall(r"[\w.\-]+", own[0]) if w.lower() not in QUESTION_WORDS
    )
    return [own[0], *(f"{part} {subject}" if refers_back(part) else part for part in own[1:])]


# A later part that points back at the first one ("how do I fix it?", "… of them?")
# needs the first part's subject to be searched; one that names its own does not.
_REFERS_BACK = frozenset(
    {"it", "its", "they", "them", "their", "theirs", "this", "these", "those", "he", "she"}
    | {"him", "her", "his", "hers", "there", "thereof", "same", "former", "latter"}
)
# A part this short says too little to be searched alone ("and for how long?").
MIN_OWN_TERMS = 2


def refers_back(part: str) -> bool:
    """Whether a later part of a question needs the first part's subject to be searched."""
    tokens = {w.lower() for w in re.findall(r"[\w']+", part)}
    return bool(tokens & _REFERS_BACK) or len(set(content_terms(part))) < MIN_OWN_TERMS


def own_parts(question: str) -> list[str]:
    """The parts of a multi-part question as asked, without the borrowed subject."""
    parts = [p.strip(" ?,;") for p in _PART_SPLIT_RE.split(question) if p.strip(" ?,;")]
    return parts[:3]
