"""A question's misspelt words, corrected against the collection's own words.

"paymnet terms for invoces?" finds little: the keyword leg matches no lexeme,
and the embedding of a misspelt word lies far from the right one's. Each word
of the question that no chunk of the collection holds (``names.words_absent``)
is compared with the collection's lexemes (``TermStat``) that begin with the
same letter and are about as long; the nearest within
``STEM_EDITS`` (OSA distance, rapidfuzz: a swapped pair of letters is one edit)
replaces it, the one in most chunks when several are as near. The word is
written back as a chunk of the collection writes it, so the embedding reads a
real word ("invoces" → lexeme "invoic" → "invoices").

Only misspellings are corrected: a word of the English dictionary
(pyspellchecker's word list) is never changed, since a real word the collection
lacks ("points", "relay", "crawl") has real words a letter away that mean
something else ("printed", "replays", "cradle"). Nor is a word the collection
holds, a word shorter than ``MIN_LENGTH`` letters, a code, number or
acronym ("HELPP"), a stopword, or a first letter (a typo there is rare, and
"orange" is not "range"). The transform stage applies it
(``transform.spelling``); the trace lists each correction.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import lru_cache

from django.db import connection
from django.db.backends.utils import CursorWrapper
from rapidfuzz.distance import OSA
from spellchecker import SpellChecker

from query_app.pipeline.lexical import WORD_RE, stem
from query_app.pipeline.names import words_absent
from query_app.pipeline.question import plain_word

MIN_LENGTH = 5
# Edits between the stems, and between the word as typed and as corrected: one
# slip of a key, written back in the inflection nearest the one typed ("webhok" →
# "webhooks"), never a different word ("diplomates" → "diploma").
STEM_EDITS = 1
WORD_EDITS = 2


@dataclass(frozen=True)
class Spelling:
    question: str  # the question with its corrections
    fixes: dict[str, str] = field(default_factory=dict)  # word as written → correction


@lru_cache(maxsize=1)
def _dictionary() -> SpellChecker:
    # The English word list only: loaded once per process (0.3 s, ~30 MB), at
    # warm-up or on the first question holding a word the collection lacks.
    return SpellChecker(language="en", distance=1)


def dictionary_load() -> None:
    _dictionary()


def english_zipf(word: str) -> float:
    """How common ``word`` is in English, on the Zipf scale: log10 of its uses per
    billion words of the word list's corpus (0 for a word it lacks; "money" 5.6,
    "mileage" 3.0, "glioma" 1.6)."""
    counts = _dictionary().word_frequency
    count = counts[word.lower()]
    return math.log10(count * 1e9 / counts.total_words) if count else 0.0


def _tried(word: str) -> bool:
    return plain_word(word, min_length=MIN_LENGTH) and not word.isupper()


def spelling_correct(
    question: str, *, collection_id: int, index: Hashable | None = None
) -> Spelling:
    """``question`` with its misspelt words corrected (see the module docstring).

    ``index``: the collection's ``index_memo.index_key``, to keep which words it holds.
    """
    spans = [m for m in WORD_RE.finditer(question) if _tried(m.group())]
    if not spans:
        return Spelling(question)
    absent = words_absent(
        collection_id=collection_id,
        words=list(dict.fromkeys(m.group() for m in spans)),
        index=index,
    )
    fixes: dict[str, str] = {}
    with connection.cursor() as cur:
        for word in absent:
            if word.lower() in _dictionary():
                continue
            nearest = _nearest(cur, collection_id, stem(word))
            written = _as_written(cur, collection_id, nearest, word.lower()) if nearest else ""
            if written and OSA.distance(word.lower(), written) <= WORD_EDITS:
                fixes[word] = written.capitalize() if word[0].isupper() else written
    if not fixes:
        return Spelling(question)
    corrected = WORD_RE.sub(lambda m: fixes.get(m.group(), m.group()), question)
    return Spelling(corrected, fixes)


def _nearest(cur: CursorWrapper, collection_id: int, lexeme: str) -> str:
    """The collection's lexeme nearest ``lexeme`` within ``STEM_EDITS`` ("" for none)."""
    edits = STEM_EDITS
    first = lexeme[0]
    cur.execute(
        "SELECT lexeme, ndoc FROM collections_app_termstat"
        " WHERE collection_id = %s AND lexeme >= %s AND lexeme < %s"
        " AND length(lexeme) BETWEEN %s AND %s",
        [int(collection_id), first, chr(ord(first) + 1), len(lexeme) - edits, len(lexeme) + edits],
    )
    best: tuple[int, int, str] | None = None
    for candidate, ndoc in cur.fetchall():
        distance = OSA.distance(lexeme, candidate, score_cutoff=edits)
        if distance > edits or not candidate.isalpha():
            continue
        key = (distance, -int(ndoc), candidate)
        if best is None or key < best:
            best = key
    return best[2] if best is not None else ""


def _as_written(cur: CursorWrapper, collection_id: int, lexeme: str, typed: str) -> str:
    """The word of a chunk holding ``lexeme`` whose stem it is that is nearest ``typed``,
    in lower case ("invoces" → "invoices", not "invoice"; "" for none)."""
    cur.execute(
        "SELECT text FROM collections_app_chunk"
        " WHERE collection_id = %s AND search_vector @@ %s::tsquery LIMIT 1",
        [int(collection_id), "'" + lexeme.replace("'", "''") + "'"],
    )
    row = cur.fetchone()
    if row is None:
        return ""
    forms = {
        word
        for word in (m.group().lower() for m in WORD_RE.finditer(row[0]))
        if word.isalpha() and stem(word) == lexeme
    }
    return min(forms, key=lambda form: (OSA.distance(typed, form), form), default="")
