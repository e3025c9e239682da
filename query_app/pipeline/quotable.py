"""What an extractive answer may quote, and how each unit is read when it is embedded.

The quotable units of the passages (sentences, list items, table rows; see
``units``) are every readable unit except titles, half sentences cut by a chunk
boundary, questions, sentences addressed to a language model and ones too short
to answer anything. Each is read with its document's title and the heading above
it ("Incident report — Root cause: the sentence"): that is the text embedded
for it, by an answer and, ahead of answers, at ingestion (``read_as_texts``,
registered as a unit reader of ``collections_app.embedding.unit_vectors``).
How the units are scored and chosen is ``extractive``'s business.
"""

from __future__ import annotations

from dataclasses import dataclass

from collections_app.embedding.unit_vectors import UNIT_READERS
from query_app.pipeline.assembly import AssembledContext, Passage
from query_app.pipeline.lexical import looks_like_instruction
from query_app.pipeline.types import Candidate
from query_app.pipeline.units import TextUnit, text_units

# Fewer words (with no digit or code among them) than this are not an answer.
MIN_WORDS = 3


@dataclass(frozen=True)
class Quote:
    """One quotable unit: where it is in its passage, and how it scored."""

    marker: int
    unit: TextUnit
    position: int  # index of the unit in its passage
    title: str = ""  # its document's title, read with it
    section: str = ""  # the heading above it in its passage, read with it too
    passage_similarity: float = 0.0
    similarity: float = 0.0
    score: float = 0.0
    named: bool = False  # a table row one of whose values the question spells out
    novelty: float = 1.0  # the share of its words the question does not hold


def _answers_something(unit: TextUnit) -> bool:
    text = unit.text
    if not unit.quotable or text.endswith("?") or looks_like_instruction(text):
        return False
    return len(text.split()) >= MIN_WORDS or any(ch.isdigit() for ch in text)


def quotable_units(
    context: AssembledContext, floor: float | None, *, unit_floor: float | None = None
) -> tuple[list[tuple[Quote, TextUnit | None]], int, int]:
    """Quotable units of the passages that clear the floor, each with the unit after it
    (with ``unit_floor``, those of the passages below it too: each unit is then held
    to ``unit_floor`` on its own, see ``extractive.extract``)."""
    quotes: list[tuple[Quote, TextUnit | None]] = []
    skipped_instructions = 0
    below_floor = 0
    for passage in context.passages:
        if not passage_clears(passage, floor):
            below_floor += 1
            if unit_floor is None:
                continue
        units = text_units(passage.text)
        # The passage's opening title (a page's or a document's) covers all of it;
        # a later heading covers the units up to the next one.
        top = units[0].text.lstrip("#").strip() if units and units[0].title else ""
        section = top
        for position, unit in enumerate(units):
            if position and unit.heading:
                heading = unit.text.lstrip("#").strip()
                section = f"{top} > {heading}" if top else heading
            if unit.quotable and looks_like_instruction(unit.text):
                skipped_instructions += 1
            if _answers_something(unit):
                following = units[position + 1] if position + 1 < len(units) else None
                quote = Quote(
                    marker=passage.marker,
                    unit=unit,
                    position=position,
                    title=passage.candidate.source_name,
                    section=section,
                    passage_similarity=passage.candidate.vector_similarity or 0.0,
                )
                quotes.append((quote, following))
    return quotes, skipped_instructions, below_floor


def read_as(quote: Quote) -> str:
    """The unit as embedded: "Document title — Section: the sentence" (a sentence
    alone often lacks what it is about)."""
    where = " — ".join(part for part in (quote.title, quote.section) if part)
    return f"{where}: {quote.unit.text}" if where else quote.unit.text


def read_as_texts(text: str, *, title: str, location: str) -> list[str]:
    """What an answer embeds for the units of a passage of ``text`` from the document
    ``title`` at ``location``: computed at ingestion and stored with the chunk
    (``collections_app.embedding.unit_vectors``), by the same code an answer runs."""
    return [read for _, read in units_read(text, title=title, location=location)]


def units_read(text: str, *, title: str, location: str) -> list[tuple[str, str]]:
    """Each quotable unit of a passage: its own text, and the text embedded for it."""
    candidate = Candidate(
        chunk_id="",
        source_id=0,
        source_location=location,
        source_title=title,
        text=text,
        char_start=0,
        char_end=len(text),
    )
    passage = Passage(marker=1, candidate=candidate, text=text, block="", tokens=0)
    found, _, _ = quotable_units(AssembledContext(passages=[passage]), None)
    return [(quote.unit.text, read_as(quote)) for quote, _ in found]


UNIT_READERS.add("extractive", read_as_texts)


def passage_clears(passage: Passage, floor: float | None) -> bool:
    similarity = passage.candidate.vector_similarity
    if floor is None or similarity is None or passage.candidate.exact_match:
        return True
    return similarity >= floor
