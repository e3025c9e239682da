"""Extractive answers: the fewest whole sentences of the passages that answer the question.

Every readable unit (sentence, list item, table row or record; see ``units``)
of the passages is a candidate, except titles, half sentences cut by a chunk
boundary, questions and sentences addressed to a language model (``quotable``).
Each candidate is scored on its own:

- ``similarity``: the cosine between the question's embedding and the unit's,
  the unit read with its document's title in front ("Incident report: For 47
  minutes …"), since a sentence alone often lacks what it is about;
- ``novelty``: the share of its words the question does not already hold — a
  sentence that only restates the question ("Beacon Cloud outage on 18 July")
  answers nothing, so similarity counts for less the less it adds;
- ``coverage``: the question's words it holds, each weighted by how rare it is
  among the candidates (a word every passage repeats tells nothing apart);
- the relevance of its passage.

A sentence is quoted only when its own similarity clears the sentence floor (or
it holds every word of the question: the model reads numbers poorly) and its
passage clears the relevance floor; then the best one, and up to
``max_sentences`` in all of those scoring at least ``JOIN_RATIO`` of it that do
not repeat what is chosen (a sentence ending in ":" brings the line it
introduces), in the order of the passages and of the text. No qualifying
sentence means the not-found answer. The weights were set on the shipped
golden dataset with the fast profile's passages (``rag eval --offline``).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from query_app.pipeline.assembly import AssembledContext
from query_app.pipeline.lexical import (
    answer_sentences,
    content_terms,
    jaccard,
)
from query_app.pipeline.question import (
    asks_for_quantity,
    own_parts,
    question_parts,
    states_quantity,
)
from query_app.pipeline.quotable import Quote, passage_clears, quotable_units, read_as
from query_app.pipeline.rows import question_words, row_match, row_shape
from query_app.pipeline.units import ROW, TextUnit, text_units

Encode = Callable[[Sequence[str]], np.ndarray]

# A unit scoring at least this share of the best one's score may join it.
JOIN_RATIO = 0.8
# Weight of the rarity-weighted question-word coverage next to the cosine.
LEXICAL_WEIGHT = 0.3
# How much of the cosine depends on what the unit adds to the question.
NOVELTY_WEIGHT = 0.5
# Weight of the passage's own relevance.
PASSAGE_WEIGHT = 0.3
# A unit adding less than this share of new words only restates the question: it may
# answer alone (a yes/no question), never join a better unit.
RESTATES = 0.25
# Question words at least (content words, stems) that a unit must hold all of to be
# quoted below the sentence floor.
MIN_SPELLED = 2
# Two units sharing this much of their words say the same thing.
REPEAT_JACCARD = 0.6


@dataclass
class Extract:
    """The chosen quotes in reading order, and why others were left out."""

    quotes: list[Quote] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        parts = []
        for quote in self.quotes:
            sentence = quote.unit.text
            if not sentence.endswith((".", "!", "?", ":", ";", '"', "'", ")", "”", "`")):
                sentence += "."  # list items and table rows read as sentences too
            parts.append(f"{sentence} [{quote.marker}]")
        return " ".join(parts)

    def spans(self) -> dict[int, list[tuple[int, int]]]:
        """Per marker, the quoted spans as offsets into the passage text."""
        found: dict[int, list[tuple[int, int]]] = {}
        for quote in self.quotes:
            found.setdefault(quote.marker, []).append((quote.unit.start, quote.unit.end))
        return found


class _VectorCache:
    """Embeddings of recently scored units, per model (passages recur across questions)."""

    def __init__(self, size: int = 20_000) -> None:
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def encode(self, encode: Encode, model: str, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if (model, t) not in self._items]
        if missing:
            vectors = encode(missing)
            with self._lock:
                for text, vector in zip(missing, vectors, strict=True):
                    self._items[(model, text)] = vector
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
        with self._lock:
            rows = []
            for text in texts:
                self._items.move_to_end((model, text))
                rows.append(self._items[(model, text)])
        return np.vstack(rows)


_vectors = _VectorCache()


def _rarity(wanted: set[str], unit_terms: list[set[str]]) -> dict[str, float]:
    """IDF of the question's words among the candidates (rarer = more telling)."""
    n = len(unit_terms)
    return {
        t: math.log(1 + (n + 1) / (1 + sum(1 for terms in unit_terms if t in terms)))
        for t in wanted
    }


def extract(
    question: str,
    context: AssembledContext,
    *,
    encode: Encode | None,
    model: str = "",
    max_sentences: int,
    floor: float | None,
    sentence_floor: float | None = None,
    said: frozenset[str] = frozenset(),
    unit_floor: float | None = None,
) -> Extract:
    """The quotes that answer ``question`` (none when nothing clears the floors).

    ``said`` holds the sentences the previous answer of a conversation quoted: a
    follow-up wants something new, so they are passed over while another qualifies.
    """
    found, skipped, below = quotable_units(context, floor, unit_floor=unit_floor)
    # A passage below the floor lends a unit only when that unit alone is near the
    # question (``floor.min_unit_similarity``): a notes page mixing five subjects.
    held = frozenset(p.marker for p in context.passages if not passage_clears(p, floor))
    details: dict[str, Any] = {
        "candidates": len(found),
        "skipped_instruction_like": skipped,
        "passages_below_floor": below,
        "sentence_floor": sentence_floor,
    }
    if not found:
        return Extract(details=details)
    parts = question_parts(question)
    probes = [question, *parts] if len(parts) > 1 else [question]
    unit_terms = [set(content_terms(q.unit.text)) for q, _ in found]
    # The heading above a unit says what it is about ("Root cause"): its words count
    # for coverage, not for novelty (they are not what the unit adds).
    heading_terms = [set(content_terms(q.section)) for q, _ in found]
    if encode is not None:
        texts = [read_as(q) for q, _ in found]
        vectors = _vectors.encode(encode, model, [*probes, *texts])
        sims = vectors[len(probes) :] @ vectors[: len(probes)].T  # units x probes
    else:  # no embedder: coverage alone ranks, nothing is held to the sentence floor
        sims = np.zeros((len(found), len(probes)))
    held_to = sentence_floor if encode is not None else None
    exact = {p.marker for p in context.passages if p.candidate.exact_match}
    # One ranking for the whole question, and for a two-part one, one per part.
    # A later part that points back is embedded with the first part's subject ("how
    # do I fix it EmbeddingProfileDrift") but its words are its own: "on its battery"
    # wants the battery sentence, not another one about the scanner's warranty.
    own = [question, *own_parts(question)] if len(parts) > 1 else [question]
    rankings = [
        _scored(
            found,
            unit_terms,
            heading_terms,
            sims[:, i],
            probe,
            own[i],
            floor=held_to,
            exact=exact,
            held=held if encode is not None else frozenset(),
            unit_floor=unit_floor or 0.0,
        )
        for i, probe in enumerate(probes)
    ]
    if said:
        fresh = [[item for item in ranking if not _said(item[0], said)] for ranking in rankings]
        if fresh[0]:
            details["already_said"] = len(rankings[0]) - len(fresh[0])
            rankings = fresh
    scored = rankings[0]
    details["qualified"] = len(scored)
    if len(parts) > 1:
        details["question_parts"] = parts
    if not scored:
        details["best_sentence_similarity"] = round(float(sims.max()), 4)
        return Extract(details=details)
    chosen = _choose(
        scored,
        max_sentences,
        parts=[r for r in rankings[1:] if r],
        held=held,
        wanted=frozenset(content_terms(question)),
    )
    chosen.sort(key=lambda q: (q.marker, q.position))
    details["sentences"] = len(chosen)
    details["scores"] = [round(q.score, 4) for q in chosen]
    return Extract(quotes=chosen, details=details)


def _said(quote: Quote, said: frozenset[str]) -> bool:
    return quote.unit.text.strip().rstrip(".") in said


def _scored(
    found: list[tuple[Quote, TextUnit | None]],
    unit_terms: list[set[str]],
    heading_terms: list[set[str]],
    sims: np.ndarray,
    probe: str,
    words_of: str,
    *,
    floor: float | None,
    exact: set[int],
    held: frozenset[int],
    unit_floor: float,
) -> list[tuple[Quote, TextUnit | None]]:
    """The units that clear the sentence floor for ``probe``, best first."""
    asked = set(content_terms(probe))  # what a unit restating the probe would repeat
    wanted = set(content_terms(words_of)) or asked
    covering = [terms | heading for terms, heading in zip(unit_terms, heading_terms, strict=True)]
    rarity = _rarity(wanted, covering)
    total = sum(rarity.values()) or 1.0
    quantity = asks_for_quantity(probe)
    probe_words = question_words(probe)
    scored = []
    for (quote, following), terms, covers, sim in zip(
        found, unit_terms, covering, sims, strict=True
    ):
        # A unit holding every word of the question (two at least) is on the subject by
        # its words, where the model reads numbers poorly: "What does Rule 17 say?"
        # is answered by "Rule 17 says …" at a cosine of 0.24, as is every other rule.
        spelled = len(wanted) >= MIN_SPELLED and wanted <= covers
        if floor is not None and quote.marker not in exact and sim < floor and not spelled:
            continue
        if quote.marker in held and quote.marker not in exact and sim < unit_floor:
            continue  # from a passage below the floor: only a unit near the question alone
        if quantity and not states_quantity(quote.unit.text):
            continue  # "How much does it cost?" is not answered without a figure
        novelty = len(terms - asked - wanted) / len(terms) if terms else 0.0
        coverage = sum(rarity[t] for t in wanted & covers) / total
        score = (
            float(sim) * (1 - NOVELTY_WEIGHT + NOVELTY_WEIGHT * novelty)
            + LEXICAL_WEIGHT * coverage
            + PASSAGE_WEIGHT * quote.passage_similarity
            + (named := row_match(probe_words, quote.unit.text) if quote.unit.kind == ROW else 0.0)
        )
        quote = replace(quote, similarity=float(sim), score=score, named=named > 0, novelty=novelty)
        scored.append((quote, following))
    scored.sort(key=lambda item: (-item[0].score, item[0].marker, item[0].position))
    return scored


# Bonus for a unit just after the best one in the same passage (see _choose).
CONTINUITY_BONUS = 0.15


def _continuity(best: Quote, quote: Quote) -> float:
    after = quote.position - best.position
    return CONTINUITY_BONUS if quote.marker == best.marker and 1 <= after <= 2 else 0.0


def _choose(
    scored: list[tuple[Quote, TextUnit | None]],
    max_sentences: int,
    *,
    parts: list[list[tuple[Quote, TextUnit | None]]],
    held: frozenset[int] = frozenset(),
    wanted: frozenset[str] = frozenset(),
) -> list[Quote]:
    """The best quote, one more for each part of a two-part question that another
    answers better, then those nearly as good as the best. Repeats are skipped.
    A passage below the floor (``held``) lends the best quote or a part's, never
    one that merely joins them. Of the rows of the best one's table, one lacking a
    word of the question (``wanted``) that the best row holds does not join it."""
    ranked = list(scored)
    best = ranked[0][0]
    best_holds = wanted & set(content_terms(best.unit.text))
    best_shape = row_shape(best.unit.text) if best.unit.kind == ROW else ()
    required: list[tuple[Quote, TextUnit | None]] = []
    for index, part in enumerate(parts):
        # The later part of "What is X and how do I fix it?" is most often answered
        # right after the sentence that answers the first: nearby units get a bonus.
        if index == 0 and (part[0][0].marker, part[0][0].position) == (best.marker, best.position):
            continue  # the best unit already answers the first part
        others = [
            (quote.score + _continuity(best, quote), quote, following)
            for quote, following in part
            if (quote.marker, quote.position) != (best.marker, best.position)
        ]
        if others:
            _, quote, following = max(others, key=lambda item: item[0])
            required.append((quote, following))
    chosen: list[Quote] = []
    seen_terms: list[set[str]] = []

    def take(quote: Quote) -> bool:
        terms = set(content_terms(quote.unit.text))
        if any(jaccard(terms, other) >= REPEAT_JACCARD for other in seen_terms):
            return False
        chosen.append(quote)
        seen_terms.append(terms)
        return True

    def placed(quote: Quote) -> bool:
        return any((c.marker, c.position) == (quote.marker, quote.position) for c in chosen)

    # Units nearly as good as the best answer to one part ("Which OpenSSL version did
    # 2.1 bring": the 3.0.14 sentence beside the one naming 2.1.2) may join from a
    # passage not cited yet.
    near_a_part = {
        (quote.marker, quote.position)
        for part in parts
        for quote, _ in part
        if quote.score >= JOIN_RATIO * part[0][0].score
    }

    for quote, following in [ranked[0], *required, *ranked[1:]]:
        is_required = any(quote is r[0] for r in required)
        if len(chosen) >= max_sentences:
            break
        if chosen and not is_required and quote.novelty < RESTATES:
            continue  # "Beacon Cloud outage on 18 July 2024" only restates the question
        if (
            chosen
            and parts
            and not is_required
            and all(c.marker != quote.marker for c in chosen)
            and (quote.marker, quote.position) not in near_a_part
        ):
            continue  # each part has its answer: nothing else joins from a passage not cited
        if not is_required and quote.score < JOIN_RATIO * best.score:
            break
        if chosen and not is_required and quote.marker in held:
            continue  # near the question on its own, but its passage is not
        if best.named and quote.unit.kind == ROW and not quote.named and not is_required:
            continue  # the row the question names answers it; its neighbours do not
        if (
            best.unit.kind == ROW
            and quote.unit.kind == ROW
            and not is_required
            and row_shape(quote.unit.text) == best_shape
            and best_holds - set(content_terms(quote.unit.text))
        ):
            # "Which profile reranks with a cross-encoder?": of one table's rows, the
            # one saying "Reranker: cross-encoder" answers it, not the one saying
            # "none". A row of another table may still join (the second hop).
            continue
        if placed(quote) or not take(quote):
            continue
        # "To install silently, run:" is answered by the line it introduces.
        introduces = quote.unit.text.endswith(":") and following is not None
        if introduces and following is not None and following.quotable:
            taken = any(
                (c.marker, c.position) == (quote.marker, quote.position + 1) for c in chosen
            )
            if len(chosen) < max_sentences and not taken:
                take(replace(quote, unit=following, position=quote.position + 1))
    return chosen


def align_spans(
    answer: str, context: AssembledContext, *, encode: Encode | None, model: str = ""
) -> dict[int, list[tuple[int, int]]]:
    """Per marker, the unit of its passage that best supports each answer sentence citing it.

    For a chat model's answer: every sentence is matched to the closest unit
    (embedding cosine, plus the word overlap) of each passage it cites, so a
    citation points at that sentence rather than at the whole passage.
    """
    by_marker = {p.marker: p for p in context.passages}
    claims = [(text, markers) for text, markers in answer_sentences(answer) if markers]
    units = {m: [u for u in text_units(p.text) if not u.title] for m, p in by_marker.items()}
    pairs = [(text, m) for text, markers in claims for m in markers if units.get(m)]
    if not pairs:
        return {}
    texts = list(dict.fromkeys([t for t, _ in pairs] + [u.text for m in units for u in units[m]]))
    index = {t: i for i, t in enumerate(texts)}
    vectors = _vectors.encode(encode, model, texts) if encode is not None else None
    spans: dict[int, list[tuple[int, int]]] = {}
    for text, marker in pairs:
        claim_terms = set(content_terms(text))

        def support(unit: TextUnit, claim: str = text, terms: set[str] = claim_terms) -> float:
            overlap = len(terms & set(content_terms(unit.text))) / len(terms) if terms else 0.0
            if vectors is None:
                return overlap
            cosine = float(vectors[index[unit.text]] @ vectors[index[claim]])
            return cosine + LEXICAL_WEIGHT * overlap

        best = max(units[marker], key=support)
        found = spans.setdefault(marker, [])
        if (best.start, best.end) not in found:
            found.append((best.start, best.end))
    for found in spans.values():
        found.sort()
    return spans
