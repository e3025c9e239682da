"""Bridging (corrective, multi-hop): the question names a thing by another name.

Organisations call things by internal names: "Tier B" is the Priority support
plan, "Greyfin" the old name of Lanternfish, "the Harbor bundle" the Q3 Starter
Kit. The first retrieval finds the definition (a glossary line), while the answer
lives in a document that only uses the other name. When the evidence defines a
term of the question, the definition's words, added to the question's keywords,
are a bridge probe: the evaluate node sends it to the rewrite node once, and the
question's and the probe's rankings are fused, so the definition and the answer
both reach the context (the answer cites across the two documents).

Only explicit definitions count (a glossary entry ``**Term**: ...``, "Term is the
name of ...", "Term (formerly ...)", "also known as"), so an ordinary passage that
merely mentions a term of the question never triggers a hop.

An entity bridge is the same hop for a question that describes a thing instead of
naming it ("the dock that a Quillmate Q3 of revision C uses"): the evidence's unit
that the description points at ("dock: QD-2") gives the name, and the answer is
read as asking about it ("How much is the dock (QD-2)?").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from query_app.pipeline.lexical import content_terms, content_words, split_sentences
from query_app.pipeline.types import Candidate

# A glossary entry: "**Tier A, Tier B, Tier C**: internal names of ..." (the term in
# bold), or "Greyfin: the name of ..." (plain, accepted only when it says it is a name:
# "ERR-4471: the backup volume is full" answers a question, it names nothing else).
_GLOSSARY_RE = re.compile(
    r"^\s*(?:[-*\u2022]\s+)?(?P<bold>\*\*|__)?(?P<term>[^:*_\n]{2,80}?)(?:\*\*|__)?"
    r"\s*[:\u2013\u2014]\s+(?P<definition>[^\n]+)",
    re.MULTILINE,
)
_NAMING_RE = re.compile(
    r"\b(name|names|codename|code\s+name|alias|nickname|formerly|renamed|also\s+known|"
    r"abbreviation|stands\s+for|refers\s+to)\b",
    re.IGNORECASE,
)
# "Greyfin is the former name of Lanternfish", "The Dock means the QD-2 cradle".
_SENTENCE_RE = re.compile(
    r"(?P<term>\b[^.;:\n]{2,60}?)\s+(?:is|was|are|were)\s+(?:the|an?)\s+"
    r"(?:(?:old|former|internal|sales|marketing|product|code|short|earlier|new|official)\s+)*"
    r"(?:name|names|codename|code\s+name|alias|nickname|abbreviation)\s+(?:of|for)\s+"
    r"(?P<definition>[^.;\n]{3,160})",
    re.IGNORECASE,
)
_ALIAS_RE = re.compile(
    r"(?P<term>\b[^.;:\n(]{2,60}?)\s*(?:\((?:formerly|previously|also\s+called|aka)\s+"
    r"(?P<old>[^)]{2,60})\)|,?\s+(?:also\s+known\s+as|a\.k\.a\.|aka|renamed\s+from)\s+"
    r"(?P<aka>[^.;,\n]{2,60}))",
    re.IGNORECASE,
)
# Words that say "this is a name", not what the thing is.
_FILLER = frozenset(
    {
        *("name", "names", "named", "codename", "alias", "nickname", "abbreviation"),
        *("internal", "sales", "marketing", "former", "formerly", "old", "older"),
        *("earlier", "official", "product", "renamed", "called", "known"),
    }
)
# A list of names ("Standard, Priority and Critical"): matched item by item.
_LIST_SPLIT_RE = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+")
# How many of the top passages are searched for a definition.
DEPTH = 5
# Words of the definition added to the question's keywords.
MAX_DEFINITION_WORDS = 8


@dataclass(frozen=True)
class Bridge:
    """A term of the question, what the evidence says it is, and the probe to search."""

    term: str
    definition: str
    probe: str
    chunk_id: str
    # The question with what the name names after it: "the Harbor bundle (Quillmate Q3
    # Starter Kit)"; "" when it cannot be said. Later nodes read it (as a condensed
    # follow-up): the answer sentence about the Starter Kit then matches the question.
    resolved: str = ""


def _named(question: str, phrase: str) -> int | None:
    """Which of a phrase's names (comma-separated) the question uses, by position.

    "Tier C" of "Tier A, Tier B, Tier C" is 2 for a Tier C question; None when the
    question uses none of them. A name must appear as a whole, in order.
    """
    lowered = " " + " ".join(w.lower() for w in re.findall(r"[\w\-.]+", question)) + " "
    for index, name in enumerate(_LIST_SPLIT_RE.split(phrase.strip())):
        tokens = [w.lower() for w in re.findall(r"[\w\-.]+", name)]
        if tokens and content_terms(name) and f" {' '.join(tokens)} " in lowered:
            return index
    return None


def _aligned(definition: str, index: int, count: int) -> str:
    """The ``index``-th item of a list in the definition when the term was a list of as
    many names ("Tier A, Tier B, Tier C": "Standard, Priority and Critical ...")."""
    if count < 2:
        return definition
    match = re.search(
        r"((?:[A-Z][\w\-]*\s*,\s*)+[A-Z][\w\-]*,?\s+(?:and|or)\s+[A-Z][\w\-]*)", definition
    )
    if not match:
        return definition
    items = _LIST_SPLIT_RE.split(match.group(1))
    if len(items) != count:
        return definition
    return definition[: match.start()] + items[index] + definition[match.end() :]


# Words without which _SENTENCE_RE and _ALIAS_RE cannot match: a passage lacking
# them all is not searched with those (costly, backtracking) expressions.
_SENTENCE_HINTS = ("name", "alias", "abbreviation")
_ALIAS_HINTS = ("formerly", "previously", "also called", "aka", "also known", "a.k.a", "renamed")


@lru_cache(maxsize=4096)
def _definitions(text: str) -> tuple[tuple[str, str], ...]:
    """The (term, definition) pairs a passage states (kept per process: passages recur)."""
    lowered = text.lower()
    found = [
        (m.group("term"), m.group("definition"))
        for m in _GLOSSARY_RE.finditer(text)
        if m.group("bold") or _NAMING_RE.search(m.group("definition"))
    ]
    if any(hint in lowered for hint in _SENTENCE_HINTS):
        found += [(m.group("term"), m.group("definition")) for m in _SENTENCE_RE.finditer(text)]
    if any(hint in lowered for hint in _ALIAS_HINTS):
        for m in _ALIAS_RE.finditer(text):
            other = m.group("old") or m.group("aka") or ""
            # Either name may be the question's: each is the other's definition.
            found += [(m.group("term"), other), (other, m.group("term"))]
    return tuple(found)


_CORE_PREFIX_RE = re.compile(
    r"^\s*(?:(?:the|an?)\s+)?(?:(?:old|former|internal|sales|marketing|product|code|short|"
    r"earlier|official)\s+)*(?:name|names|codename|code\s+name|alias|nickname)\s+(?:of|for)\s+"
    r"(?:(?:the|an?)\s+)?",
    re.IGNORECASE,
)


def _core(definition: str) -> str:
    """What the definition names: "the sales name of the Q3 Starter Kit." → "Q3 Starter Kit"."""
    core = _CORE_PREFIX_RE.sub("", definition.strip(), count=1)
    core = re.split(r"[.;:,(]\s|[.;]$|\s+before\s+|\s+since\s+", core, maxsplit=1)[0]
    core = re.sub(r"^(?:the|an?)\s+", "", core.strip(), flags=re.IGNORECASE)
    return core.strip(" .")


def _resolved(question: str, name: str, core: str) -> str:
    """The question with ``core`` in brackets after the name ("" when it is not found)."""
    if not core or len(core.split()) > 10:
        return ""
    pattern = re.compile(r"\s+".join(re.escape(w) for w in name.split()) + r"\b", re.IGNORECASE)
    match = pattern.search(question)
    if match is None:
        return ""
    return f"{question[: match.end()]} ({core}){question[match.end() :]}"


def bridge_find(question: str, kept: Sequence[Candidate]) -> Bridge | None:
    """The first definition of a question's term in the top passages, as a bridge probe.

    None when no passage defines one, or when the definition adds no new word.
    """
    asked = set(content_terms(question))
    if not asked:
        return None
    keywords = list(dict.fromkeys(w.lower() for w in content_words(question)))
    for candidate in kept[:DEPTH]:
        for term, definition in _definitions(candidate.text):
            term = term.strip(" *_-•")
            index = _named(question, term) if term else None
            if index is None:
                continue
            count = len(_LIST_SPLIT_RE.split(term))
            definition = _aligned(definition, index, count)
            new = [
                w.lower()
                for w in content_words(definition)
                if not set(content_terms(w)) <= asked and len(w) > 1 and w.lower() not in _FILLER
            ]
            new = list(dict.fromkeys(new))[:MAX_DEFINITION_WORDS]
            if not new:
                continue
            return Bridge(
                term=term,
                definition=definition.strip()[:200],
                probe=" ".join([*keywords, *new]),
                chunk_id=candidate.chunk_id,
                resolved=_resolved(
                    question, _LIST_SPLIT_RE.split(term.strip())[index].strip(), _core(definition)
                ),
            )
    return None


# --- entity bridges: the question describes a thing instead of naming it ----------

# "the dock that a Q3 uses", "the Beacon plan that allows 20 webhooks", "the city where
# the company was founded": a noun phrase with a relative clause describes something
# whose name the answer's document uses instead.
_DESCRIBED_RE = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w\-.]+\s+){0,4}?(?P<clause>(?:that|which|whose|where|who)\s+\w)",
    re.IGNORECASE,
)
# A code or identifier: letters and digits together (QD-2, SKU-30112), or a path.
_CODE_RE = re.compile(
    r"(?<![\w/])(?:/[\w\-.]+)+/?|\b(?=[\w\-]*[A-Za-z])(?=[\w\-]*\d)[\w][\w\-]*\w\b"
)
# A capitalised word inside a unit (not its first word, nor a field's first word).
_NAME_RE = re.compile(r"(?<=[\w,)] )[A-Z][a-z][\w\-]+")
# Versions, dates and times name nothing another document would be found by.
_NOT_A_NAME_RE = re.compile(r"^v?\d[\d.\-:/]*$|^\d{4}-\d{2}")
# The question's words as written, to find a row's value in it.
_SPELLED_RE = re.compile(r"[\w\-]+(?:\.\d+)*")
# How many names a unit gives the bridge probe (codes first).
MAX_NAMES = 3
# The unit must be about the question: this share of its words, at least two of them.
MIN_UNIT_COVERAGE = 0.3


def describes_entity(question: str) -> bool:
    """Whether the question names a thing by a description ("the plan that costs …")."""
    return bool(_DESCRIBED_RE.search(question))


@lru_cache(maxsize=4096)
def _units(text: str) -> tuple[str, ...]:
    """Lines (a table row each), and the sentences of prose lines (kept per process:
    the sentence segmenter takes milliseconds a passage, and passages recur)."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if ";" in line and ":" in line:  # a table row read as "key: value; key: value"
            found.append(line)
        else:
            found += [s.text for s in split_sentences(line)]
    return tuple(found)


def _names(unit: str, asked: set[str]) -> list[str]:
    """Codes, paths and proper names in ``unit`` that the question does not use.

    In a table row, a field whose value is all capitalised words is a name as a
    whole ("plan: Business", "product: Beacon Cloud Business").
    """
    fields = re.findall(r"(?:^|;\s*)[\w\-]+:\s*([^;]+)", unit) if ";" in unit else []
    values = "; ".join(fields) if fields else unit  # a row's keys name no thing
    codes = [m.group(0) for m in _CODE_RE.finditer(values)]
    proper = [
        value.strip()
        for value in fields
        if len(value.split()) <= 4 and all(w[:1].isupper() for w in value.split())
    ] or [m.group(0) for m in _NAME_RE.finditer(values)]
    names: list[str] = []
    for name in [*codes, *proper]:
        terms = set(content_terms(name))
        if not terms or terms <= asked or _NOT_A_NAME_RE.match(name) or name in names:
            continue
        names.append(name)
    return names[:MAX_NAMES]


def _about(unit: str, asked: set[str], spelled: str) -> tuple[float, float]:
    """How much of the question ``unit`` is about: the share of the question's words it
    holds, and the share of its own words that are the question's (the closer fit).

    A table row's field counts once more when the question spells out its value next
    to a word of its key ("20 webhook endpoints" for ``webhook_endpoints: 20``): of
    two rows with the same words, that is the one the question describes.
    """
    terms = set(content_terms(unit.replace("_", " ")))
    shared = asked & terms
    if len(shared) < 2:
        return 0.0, 0.0
    fields = re.findall(r"(?:^|;\s*)([\w\-]+):\s*([^;]+)", unit) if ";" in unit else []
    pairs = sum(
        1
        for key, value in fields
        if f" {value.strip().lower()} " in spelled
        and asked & set(content_terms(key.replace("_", " ")))
    )
    return (len(shared) + pairs) / len(asked), len(shared) / len(terms)


def entity_bridge(question: str, kept: Sequence[Candidate]) -> Bridge | None:
    """For a question that describes a thing ("the dock that a Q3 of revision C uses"),
    the names the evidence gives it ("QD-2"), as a bridge probe.

    The unit (a sentence or a table row) of the top passages that shares the most of
    the question's words is what the description points at; its codes and proper
    names the question lacks are searched with the question's keywords, and the
    question is read with them for the answer. None when the question names what it
    asks about, or no unit of the evidence is about it, or the unit adds no name.
    """
    if not describes_entity(question):
        return None
    asked = set(content_terms(question))
    if len(asked) < 2:
        return None
    spelled = " " + " ".join(_SPELLED_RE.findall(question.lower())) + " "
    best: tuple[float, float, str, str] | None = None
    for candidate in kept[:DEPTH]:
        for unit in _units(candidate.text):
            share, density = _about(unit, asked, spelled)
            if share >= MIN_UNIT_COVERAGE and (best is None or (share, density) > best[:2]):
                best = (share, density, unit, candidate.chunk_id)
    if best is None:
        return None
    _, _, unit, chunk_id = best
    names = _names(unit, asked)
    if not names:
        return None
    keywords = list(dict.fromkeys(w.lower() for w in content_words(question)))
    # Read for the answer as asking about the named thing: the description gives
    # way to the names ("How much is the dock (QD-2)?"), or the answer would quote
    # the row the description matches instead of the one about the thing.
    described = _DESCRIBED_RE.search(question)
    head = question[: described.start("clause")] if described else question
    stripped = head.rstrip(" ,?.!")
    ending = question[len(question.rstrip(" ?.!")) :]
    return Bridge(
        term="",
        definition=unit[:200],
        probe=" ".join([*keywords, *names]),
        chunk_id=chunk_id,
        resolved=f"{stripped} ({', '.join(names)}){ending}",
    )


def bridge_for(question: str, kept: Sequence[Candidate]) -> Bridge | None:
    """The bridge hop the evidence offers: a definition of a term of the question
    first, else the name of a thing the question describes; None when neither."""
    return bridge_find(question, kept) or entity_bridge(question, kept)
