"""Names the question uses that the collection never mentions.

A question about the "Quillmate Q5", "ERR-9999" or "macOS" cannot be answered
by a collection that never says "Q5", "ERR-9999" or "macOS", however close its
passages are to the rest of the question (the "Q3" passages, the other error
codes, the Linux install). Such names are codes (letters and digits together,
``ERR-4471``, ``v2.3.1``) and camel-case identifiers (``macOS``,
``SourceTooLarge``): see ``keyword.code_parts``. Ordinary words are
never declined for here: a question may use a synonym of the documents' word.
``words_absent`` answers the same for ordinary words, for the checks that
weigh them further (spelling.py, unaddressed.py).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

from django.db import connection

from collections_app.search_index.keyword import TEXT_SEARCH_CONFIG
from query_app.pipeline.index_memo import IndexMemo
from query_app.pipeline.keyword import code_parts

_TOKEN_RE = re.compile(r"[A-Za-z0-9][\w.\-/]*[A-Za-z0-9]")
_URL_RE = re.compile(r"\S+://\S+|\S+@\S+")


def question_names(question: str) -> list[str]:
    """The codes and identifiers of ``question``, in order, without repeats."""
    found: list[str] = []
    for token in _TOKEN_RE.findall(_URL_RE.sub(" ", question)):
        for name in code_parts(token):
            if name not in found:
                found.append(name)
    return found


def names_absent(*, collection_id: int, names: list[str]) -> list[str]:
    """Those of ``names`` that no chunk of the collection holds (as a phrase of lexemes)."""
    if not names:
        return []
    absent = []
    with connection.cursor() as cur:
        for name in names:
            cur.execute(
                "SELECT numnode(phraseto_tsquery(%s::regconfig, %s)) > 0, EXISTS ("
                " SELECT 1 FROM collections_app_chunk"
                " WHERE collection_id = %s"
                " AND search_vector @@ phraseto_tsquery(%s::regconfig, %s))",
                [TEXT_SEARCH_CONFIG, name, int(collection_id), TEXT_SEARCH_CONFIG, name],
            )
            searchable, present = cur.fetchone() or (False, True)
            if searchable and not present:
                absent.append(name)
    return absent


# Whether a collection holds a word changes only with its index: the answers are
# kept per process (index_memo.py), and most questions' words cost no query.
WORDS_KEPT_PER_COLLECTION = 20_000
_words_held: IndexMemo[bool] = IndexMemo(limit=WORDS_KEPT_PER_COLLECTION)


def words_absent(
    *, collection_id: int, words: Sequence[str], index: Hashable | None = None
) -> list[str]:
    """Those of ``words`` that no chunk of the collection holds (as a lexeme).

    With ``index`` (``index_key`` of the collection) the answers are kept for
    the next question, until the index changes.
    """
    if not words:
        return []
    if index is None:
        absent = _words_absent_fresh(collection_id=collection_id, words=list(dict.fromkeys(words)))
    else:
        absent = _words_held.read_through(
            collection_id=collection_id,
            index=index,
            keys=words,
            read=lambda asked: _words_absent_fresh(collection_id=collection_id, words=asked),
        )
    return [w for w in words if absent[w]]


def _words_absent_fresh(*, collection_id: int, words: list[str]) -> dict[str, bool]:
    """Whether each of ``words`` is absent from the collection, read now."""
    found = set(_words_absent_read(collection_id=collection_id, words=words))
    return {w: w in found for w in words}


def _words_absent_read(*, collection_id: int, words: Sequence[str]) -> list[str]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT w FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, n)"
            " WHERE numnode(plainto_tsquery(%s::regconfig, w)) > 0 AND NOT EXISTS ("
            " SELECT 1 FROM collections_app_chunk"
            " WHERE collection_id = %s"
            " AND search_vector @@ plainto_tsquery(%s::regconfig, w))"
            " ORDER BY n",
            [list(words), TEXT_SEARCH_CONFIG, int(collection_id), TEXT_SEARCH_CONFIG],
        )
        return [row[0] for row in cur.fetchall()]


def never_mentions_answer(names: Sequence[str], why: str) -> str:
    """The not-found answer for what the collection never mentions, and ``why`` that matters."""
    quoted = ", ".join(f"“{name}”" for name in names)
    return f"Not found in this collection: it never mentions {quoted}, {why}."


def unknown_names_answer(names: list[str]) -> str:
    return never_mentions_answer(names, "so no passage can answer this question")
