"""Words a question turns on that neither the collection nor the quoted sentences speak of.

An extractive answer quotes the sentences nearest the question. When the
question turns on a word the collection never uses ("What was the revenue in
2023?", "What will the weather be like in Ghent tomorrow?"), the nearest
sentences are about the rest of it (the company's founding, Ghent's holidays),
and quoting them answers another question. A chat model reads the passages and
can say what they lack; quoting cannot, so the extractive answer checks.

A word the collection lacks may still be a synonym of what a quoted sentence
says ("orange" for "amber", "tones" for "beeps"): the test is whether the word
draws the question towards the quoted sentences or away from them (those two
drew it towards them by 0.09 and 0.08 on the golden set). The test is
approximate: a synonym the model does not know draws the question away too. The
question is embedded with and without the word. When the word carries the
question (without it, the question's embedding moves by at least ``FOCAL``)
and every quoted sentence is closer to the question without it, by more than
``AWAY``, nothing quoted speaks of it and the answer is not found.

What is tried:

- only questions asking for a fact (what, which, when, who, where, how
  much, how many, how long): in "Health habits of Lebanese residents: are
  future doctors applying the rules?" the unnamed word sets the scene, and the
  passages about the residents answer it; "How are chunk sizes counted?" is
  answered in other words ("measured in tokens");
- only the question's words that no passage holds, and of those only the ones
  no chunk of the collection holds (``names.words_absent``);
- never a misspelling of a passage word or of a common word ("conect",
  "wich"), nor a word that frames a question ("how much").

``FOCAL`` and ``AWAY`` (``generation.decline_unaddressed``) were set on the
shipped golden dataset and on the answerable wh-questions of
``eval/pubmedqa_faq_wh`` (docs/answering.md).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

import numpy as np

from query_app.pipeline.lexical import STOPWORDS, content_terms, stem, words
from query_app.pipeline.names import never_mentions_answer
from query_app.pipeline.question import asks_for_attribute, plain_word

Encode = Callable[[Sequence[str]], np.ndarray]
AbsentWords = Callable[[Sequence[str]], list[str]]

# Cosines of all-MiniLM-L6-v2. A word whose removal moves the question's embedding
# by less than FOCAL (1 - cosine) does not carry it ("prefix" in "What prefix do
# test API keys have?" moves it by 0.08; "weather" in "What will the weather be
# like in Ghent tomorrow?" by 0.14): answers to it are often worded otherwise
# ("keys start with bk_test_"), and it is not tried.
FOCAL = 0.1
# A quoted sentence closer to the question without the word by more than this is
# not about the word: the default of generation.decline_unaddressed. Framing words
# and misspellings moved sentences by up to 0.04 on the golden set, hence their
# exclusion; paraphrased answers ("faint" for "became pale … unreactive") by up to
# 0.024 on the wh-question set; the declined golden questions moved them by 0.033
# to 0.067.
AWAY = 0.03
# Words shorter than this are left alone (abbreviations, units: "IP", "GB").
MIN_LENGTH = 4
# A word this close (difflib ratio) to a passage word or a common word is its misspelling.
MISSPELLING = 0.8


def words_to_try(question: str, passages: Sequence[str]) -> list[str]:
    """The question's words (as written) that no passage holds and that are not a
    misspelling of a passage word or a common word, in order, without repeats (none
    when the question does not ask for a fact)."""
    if not asks_for_attribute(question):
        return []
    held, vocabulary = passage_words(passages)
    found: list[str] = []
    for word in words(question):
        lower = word.lower()
        if not plain_word(word, min_length=MIN_LENGTH) or stem(lower) in held or word in found:
            continue
        if misspells(word, vocabulary):
            continue
        found.append(word)
    return found


def passage_words(passages: Sequence[str]) -> tuple[set[str], set[str]]:
    """The content terms (stems) ``passages`` hold, and their words lower-cased with the
    stopwords: the vocabulary a question word may be a misspelling of."""
    held: set[str] = set()
    vocabulary: set[str] = set(STOPWORDS)
    for text in passages:
        for word in words(text):
            vocabulary.add(word.lower())
        held.update(content_terms(text))
    return held, vocabulary


def misspells(word: str, vocabulary: set[str]) -> bool:
    """Whether ``word`` is near enough a word of ``vocabulary`` to be its misspelling."""
    return bool(difflib.get_close_matches(word.lower(), vocabulary, n=1, cutoff=MISSPELLING))


def _without(question: str, word: str) -> str:
    return re.sub(rf"\s*\b{re.escape(word)}\b", "", question).strip()


def unaddressed_words(
    question: str,
    quoted: Sequence[str],
    candidates: Sequence[str],
    *,
    encode: Encode,
    away: float = AWAY,
) -> dict[str, float]:
    """Of ``candidates``, the words that carry the question and that every ``quoted``
    sentence is further from, with how much closer the nearest one is to the
    question without the word."""
    if not candidates or not quoted:
        return {}
    probes = [question, *(_without(question, word) for word in candidates)]
    vectors = encode([*probes, *quoted])
    asked = vectors[: len(probes)]
    sims = vectors[len(probes) :] @ asked.T  # quoted x probes
    found: dict[str, float] = {}
    for index, word in enumerate(candidates, start=1):
        carries = 1.0 - float(asked[0] @ asked[index])
        towards = float(np.max(sims[:, 0] - sims[:, index]))
        if carries >= FOCAL and towards < -away:
            found[word] = round(-towards, 4)
    return found


def unaddressed_answer(words: Sequence[str]) -> str:
    return never_mentions_answer(
        words, "and the passages nearest the question speak of something else"
    )
