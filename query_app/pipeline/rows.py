"""Which table row a question names: a cell value it spells out in full.

"What is the list price of a Quillmate Q3?" names the row whose product is
"Quillmate Q3", not "Quillmate Q3 Rugged" nor "Quillmate Q3 Starter Kit",
although all three are as close to it in meaning. A row earns a bonus when one
of its values (a name, a code, a date) appears whole in the question, the
longer the better. Dates are compared in one form: "27 April 2024", "April 27,
2024" and "2024-04-27" are the same day.
"""

from __future__ import annotations

import re
from datetime import datetime

# Bonus for a row one of whose values the question spells out, and per word of it.
ROW_MATCH_BONUS = 0.15
ROW_MATCH_PER_WORD = 0.03

_WORD_RE = re.compile("[0-9A-Za-z][0-9A-Za-z.'\u2019+\\-]*[0-9A-Za-z+]|[0-9A-Za-z]")
_DATE_FORMATS = ("%d %B %Y", "%B %d %Y", "%d %b %Y", "%b %d %Y")
_DATE_RE = re.compile(
    r"\b(?:\d{1,2}\s+[A-Za-z]{3,9}\.?,?\s+\d{4}|[A-Za-z]{3,9}\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4})\b"
)


def _iso_dates(text: str) -> list[str]:
    found = []
    for match in _DATE_RE.finditer(text):
        raw = re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", match.group(0)).replace(",", " ")
        raw = " ".join(raw.replace(".", " ").split())
        for fmt in _DATE_FORMATS:
            try:
                found.append(datetime.strptime(raw, fmt).date().isoformat())
                break
            except ValueError:
                continue
    return found


def _words(text: str) -> list[str]:
    return [w.lower().replace("\u2019", "'") for w in _WORD_RE.findall(text)]


def question_words(question: str) -> list[str]:
    """The question's words in order, its dates also as ISO dates."""
    return _words(question) + _iso_dates(question)


def _cells(row: str) -> list[tuple[str, str]]:
    """(key, value) of each cell of a "key: value; key: value" record, or ("", cell)
    of an "a | b | c" row."""
    cells = re.split(r"\s*[;|]\s*", row.strip().rstrip("."))
    return [
        (key, value) if sep else ("", cell)
        for cell in cells
        for key, sep, value in [cell.partition(": ")]
    ]


def _values(row: str) -> list[str]:
    """The cell values of "key: value; key: value" records and "a | b | c" rows."""
    return [value for _, value in _cells(row)]


def row_shape(row: str) -> tuple[str, ...]:
    """What the rows of one table share: the keys of a "key: value; …" record, else
    as many empty names as an "a | b | c" row has cells."""
    return tuple(key for key, _ in _cells(row))


def _names_something(value: str, words: list[str]) -> bool:
    # A name, a code or a date, not a plain word that any question may use ("all", "each").
    return any(ch.isdigit() for ch in value) or any(ch.isupper() for ch in value) or len(words) > 1


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def row_match(question: list[str], row: str) -> float:
    """The bonus of ``row`` for a question whose words are ``question`` (0.0: none)."""
    best = 0
    for value in _values(row):
        words = _words(value)
        if words and _names_something(value, words) and _contains(question, words):
            best = max(best, len(words))
    return ROW_MATCH_BONUS + ROW_MATCH_PER_WORD * best if best else 0.0
