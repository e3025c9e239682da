"""Small text tools shared by the offline (no chat model) components.

The extractive generator, the heuristic groundedness checker, heuristic query
variants and lexical MMR all compare words; they use the same Snowball English
stemmer as the Postgres ``english`` text-search configuration, so "refunds"
and "refund" match here exactly as they do in the keyword leg.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache

import pysbd
import snowballstemmer

_STOPWORDS_TEXT = """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up very was wasn't we we'd we'll
    we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves also may might must shall will just does tell please
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-_.]*[A-Za-z0-9]|[A-Za-z0-9]")
# [1], [2, 3], [1][4]
MARKER_RE = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")

# Sentences addressed to a language model rather than to a reader. A passage
# is data: such sentences are never quoted as an answer.
_INSTRUCTION_PATTERNS = [
    r"\bignore\b.{0,40}\b(instructions?|prompts?|rules|context|above|previous)\b",
    r"\bdisregard\b.{0,40}\b(instructions?|prompts?|rules|above|previous)\b",
    r"\bforget\b.{0,30}\b(instructions?|everything|rules)\b",
    r"\byou are (now|no longer)\b",
    r"\b(act|behave|respond|answer|reply) as\b.{0,30}\b(assistant|ai|model|system|dan)\b",
    r"\b(system|assistant)\s*(prompt|message)\b",
    r"^\s*(system|assistant|user)\s*:",
    r"<\|?(im_start|im_end|system|assistant)\|?>",
    r"\b(new|updated|real) instructions?\b",
    r"\b(reveal|print|show|output)\b.{0,30}\b(system prompt|instructions|api key|password)\b",
    r"\b(always|only) (answer|reply|respond|say)\b",
    r"!\[[^\]]*\]\(https?://[^)]*\?",
]
INSTRUCTION_RE = re.compile("|".join(_INSTRUCTION_PATTERNS), re.IGNORECASE | re.MULTILINE)

_local = threading.local()


def _stemmer() -> snowballstemmer.stemmer:
    # Snowball stemmer objects keep state between calls: one per thread.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = snowballstemmer.stemmer("english")
        _local.stemmer = stemmer
    return stemmer


def words(text: str) -> list[str]:
    return WORD_RE.findall(text)


@lru_cache(maxsize=50_000)
def stem(word: str) -> str:
    return str(_stemmer().stemWord(word.lower()))


def content_terms(text: str) -> list[str]:
    """Stems of the non-stopword words of ``text``, in order (duplicates kept)."""
    return list(_content_terms(text))


# The extractive answer weighs the same passages' sentences question after question:
# their terms are kept, per process (2 % of the web workers' CPU under load otherwise).
@lru_cache(maxsize=8192)
def _content_terms(text: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in words(text) if w.lower() not in STOPWORDS and len(w) > 1)


def content_words(text: str) -> list[str]:
    """The non-stopword words of ``text`` as written, in order."""
    return [w for w in words(text) if w.lower() not in STOPWORDS and len(w) > 1]


def strip_markers(text: str) -> str:
    """The text without ``[n]`` markers ("cheese [1]." → "cheese.")."""
    return re.sub(r"\s+([.,;:!?])", r"\1", MARKER_RE.sub("", text)).strip()


def markers_in(text: str) -> list[int]:
    """Citation numbers in ``text`` in order of first appearance."""
    seen: list[int] = []
    for match in MARKER_RE.finditer(text):
        for part in match.group(1).split(","):
            n = int(part)
            if n not in seen:
                seen.append(n)
    return seen


@lru_cache(maxsize=1 << 16)
def looks_like_instruction(sentence: str) -> bool:
    """True when the sentence talks to a language model (a prompt-injection attempt).

    Kept per sentence: every answer asks it twice of every sentence of its
    passages, and the same passages recur (4 % of an answer's CPU under load).
    """
    return bool(INSTRUCTION_RE.search(sentence))


@dataclass(frozen=True)
class Sentence:
    text: str  # stripped
    start: int  # offsets into the text it was cut from
    end: int
    # A title: a Markdown heading, or a short line standing alone between blank
    # lines without closing punctuation, numbers or a colon ("Backup schedule").
    title: bool = False


# Words at most in a standalone line that counts as a title.
TITLE_MAX_WORDS = 10


_segmenter_lock = threading.Lock()


@lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False, char_span=True)


# A Markdown heading line ("## Backups"): a title, never part of a sentence.
_HEADING = r"^[ \t]{0,3}#{1,6}[ \t].*$"
HEADING_RE = re.compile(_HEADING, re.MULTILINE)
# Where split_sentences cuts text into blocks: blank lines, and around headings.
_BLOCKS_RE = re.compile(rf"(\n\s*\n|{_HEADING})", re.MULTILINE)


def is_heading(sentence: str) -> bool:
    return bool(HEADING_RE.fullmatch(sentence))


def _is_title(block: str) -> bool:
    if is_heading(block):
        return True
    # Numbers or a "label: value" pair make a short line a fact, not a title.
    return (
        "\n" not in block
        and not block.endswith((".", "!", "?", ":", ";", '"', "'", ")", "]"))
        and len(block.split()) <= TITLE_MAX_WORDS
        and not any(ch.isdigit() for ch in block)
        and ":" not in block
    )


def split_sentences(text: str) -> list[Sentence]:
    """Sentences of ``text`` with their character offsets.

    Blank lines also split, and a Markdown heading line is a piece of its own,
    so a title never runs into the sentence after it; ``Sentence.title`` marks
    headings and standalone title lines.
    """
    result: list[Sentence] = []
    offset = 0
    for block in _BLOCKS_RE.split(text):
        if block.strip():  # blank-line separators hold only whitespace
            title = _is_title(block.strip())
            with _segmenter_lock:
                spans = _segmenter().segment(block)
            for span in spans:
                raw = span.sent
                stripped = raw.strip()
                if not stripped:
                    continue
                lead = len(raw) - len(raw.lstrip())
                start = offset + span.start + lead
                result.append(Sentence(stripped, start, start + len(stripped), title=title))
        offset += len(block)
    return result


_LEADING_MARKERS_RE = re.compile(r"^((?:\s*\[\d{1,3}(?:\s*,\s*\d{1,3})*\])+)\s*")


def answer_sentences(text: str) -> list[tuple[str, list[int]]]:
    """An answer's sentences without markers, each with the markers that cite it.

    A marker written after the full stop ("... purchase. [1] Next ...") belongs
    to the sentence before it, not to the one it happens to precede. Markdown
    heading lines are left out.
    """
    result: list[tuple[str, list[int]]] = []
    for sentence in split_sentences(text):
        body = sentence.text
        if is_heading(body):
            continue  # a title in the answer claims nothing
        leading = _LEADING_MARKERS_RE.match(body)
        if leading:
            if result:
                result[-1][1].extend(markers_in(leading.group(1)))
            body = body[leading.end() :]
        plain = strip_markers(body)
        if plain:
            result.append((plain, markers_in(body)))
        elif result:
            result[-1][1].extend(markers_in(body))
    return result


def overlap(terms: set[str], other: set[str]) -> float:
    """Share of ``terms`` found in ``other`` (0 when ``terms`` is empty)."""
    return len(terms & other) / len(terms) if terms else 0.0


def jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0
