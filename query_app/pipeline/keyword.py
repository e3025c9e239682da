"""The keyword leg: Postgres full-text search with OR semantics and BM25-style ranking.

Natural-language questions need OR semantics (``websearch_to_tsquery``'s AND
finds nothing for most of them) and a score that knows how rare a term is and
how long a chunk is. Exact intent still matters: quoted phrases, codes such as
``ERR-4471`` and ``-excluded`` words from the websearch syntax must hold.

This module reads the question (phrases, codes, negations) and reports what
the leg did; the search itself, bounded by ``keyword_pool`` whatever the
collection size, is :func:`collections_app.search_index.keyword_search`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collections_app import search_index
from collections_app.models import Collection
from query_app.exceptions import UnknownKeywordRanking
from query_app.pipeline.options import RetrievalOptions
from ragsite.registry import Registry


@dataclass(frozen=True)
class KeywordRanking:
    """A keyword ranking: what it does, and the scoring it asks of the search index."""

    description: str
    # (retrieval options, the collection's average chunk length in lexemes) → scoring.
    scoring: Callable[[RetrievalOptions, float], search_index.KeywordScoring]
    # Without term statistics the ranking falls back to one that needs none.
    needs_term_stats: bool = False


KEYWORD_RANKINGS: Registry[KeywordRanking] = Registry(
    "keyword ranking", unknown=UnknownKeywordRanking
)
KEYWORD_RANKINGS.add(
    "bm25",
    KeywordRanking(
        description="Okapi BM25 over the tsvector: IDF from term statistics, length-normalised",
        scoring=lambda options, avg_lexemes: search_index.bm25_scoring(
            k1=options.bm25_k1, b=options.bm25_b, avg_lexemes=avg_lexemes
        ),
        needs_term_stats=True,
    ),
)
KEYWORD_RANKINGS.add(
    "ts_rank_cd",
    KeywordRanking(
        description="Postgres cover-density rank over an OR of the question's lexemes",
        scoring=lambda options, avg_lexemes: search_index.cover_density_scoring(),
    ),
)
# The ranking used when the collection's term statistics are missing.
_WITHOUT_TERM_STATS = "ts_rank_cd"

_PHRASE_RE = re.compile(r'"([^"]+)"')
_NEGATION_RE = re.compile(r"(?:^|\s)-([A-Za-z0-9][\w.\-]*)")
_TOKEN_RE = re.compile(r"[A-Za-z0-9][\w.\-/:+#]*[A-Za-z0-9+#]|[A-Za-z0-9]")


_UNIT_RE = re.compile(r"^\d+(?:[.,]\d+)?[A-Za-z/%]+$")  # 400mg, 5mmol/L, 3d
_VERSION_RE = re.compile(r"^(?:v\d+(?:\.\d+)+|\d+(?:\.\d+){2,})[A-Za-z0-9-]*$", re.IGNORECASE)


def _mixed(part: str) -> bool:
    """Letters and digits together (sha256, Rad53, 0x1F), not a quantity with a unit."""
    return (
        any(ch.isdigit() for ch in part)
        and any(ch.isalpha() for ch in part)
        and not _UNIT_RE.match(part)
    )


# "macOS", "iPhone", "SourceTooLarge": a capital after a lower-case letter in one word.
_CAMEL_RE = re.compile(r"^[A-Za-z]*[a-z][A-Z][A-Za-z]*$")


def _word(part: str) -> bool:
    """An ordinary word (dependent, Interleukin), as opposed to an acronym (ERR, IL)."""
    return part.isalpha() and len(part) >= 4 and (part.islower() or part[1:].islower())


def code_parts(token: str) -> list[str]:
    """The exact identifiers in ``token`` that keyword hits must contain.

    ``ERR-4471``, ``v2.3.1``, ``sha256``, ``0x1F``, ``IL-10`` are codes, and so are
    identifiers written in camel case (``SourceTooLarge``, ``macOS``);
    ``Rad53-dependent`` requires ``Rad53``; ``2019``, ``400mg``,
    ``0-dimensional`` and URLs require nothing.
    """
    if "://" in token or _UNIT_RE.match(token):
        return []
    if _VERSION_RE.match(token):
        return [token]
    parts = [p for p in re.split(r"[-/]", token) if p]
    if len(parts) <= 1:
        return [token] if _mixed(token) or _CAMEL_RE.match(token) else []
    mixed = [p for p in parts if _mixed(p)]
    if mixed:
        return mixed
    if any(_word(p) for p in parts):
        return []
    has_digit = any(ch.isdigit() for ch in token)
    return [token] if has_digit and any(ch.isalpha() for ch in token) else []


@dataclass(frozen=True)
class KeywordQuery:
    """The question split into what must match and what may match."""

    text: str  # the positive text (negations removed): its lexemes form the OR pool
    phrases: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    negated: tuple[str, ...] = ()

    @property
    def must_text(self) -> str:
        """The required part in websearch syntax (AND of phrases, codes, negations)."""
        return " ".join([self.phrase_text, self.code_text]).strip()

    @property
    def phrase_text(self) -> str:
        """Phrases and negations in websearch syntax: what always holds."""
        parts = [f'"{p}"' for p in self.phrases]
        parts += [f"-{n}" for n in self.negated]
        return " ".join(parts)

    @property
    def code_text(self) -> str:
        """The codes in websearch syntax (their AND)."""
        return " ".join(self.codes)


def keyword_query_parse(question: str, *, require_codes: bool = True) -> KeywordQuery:
    """Split websearch syntax: ``"quoted phrases"``, ``-negated`` words, codes, the rest."""
    phrases = tuple(p.strip() for p in _PHRASE_RE.findall(question) if p.strip())
    unquoted = _PHRASE_RE.sub(" ", question)
    negated = tuple(_NEGATION_RE.findall(unquoted))
    positive = _NEGATION_RE.sub(" ", question)
    codes: tuple[str, ...] = ()
    if require_codes:
        seen: list[str] = []
        for token in _TOKEN_RE.findall(_NEGATION_RE.sub(" ", unquoted)):
            for code in code_parts(token):
                if code not in seen:
                    seen.append(code)
        codes = tuple(seen)
    return KeywordQuery(
        text=positive.replace('"', " "), phrases=phrases, codes=codes, negated=negated
    )


@dataclass
class KeywordHit:
    chunk_id: str
    score: float
    coverage: float  # IDF-weighted share of the question's lexemes in the chunk
    # It holds the question's codes and quoted phrases (True when it has none).
    exact: bool = True


@dataclass
class KeywordResult:
    hits: list[KeywordHit]
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def keyword_search(
    *, collection: Collection, text: str, k: int, options: RetrievalOptions
) -> KeywordResult:
    """The ``k`` best chunks of ``collection`` for ``text`` by the configured ranking."""
    ranking = KEYWORD_RANKINGS.get(options.keyword_ranking)
    query = keyword_query_parse(text, require_codes=options.require_codes)
    # With missing_code_weight a chunk lacking a code is kept, behind those holding it.
    soft_codes = bool(query.codes) and options.missing_code_weight > 0
    terms = search_index.keyword_terms(
        text=query.text,
        required_text=query.phrase_text if soft_codes else query.must_text,
        preferred_text=query.code_text if soft_codes else "",
        collection_id=int(collection.pk),
    )
    details: dict[str, Any] = {
        "ranking": options.keyword_ranking,
        "lexemes": len(terms.lexemes),
        "phrases": list(query.phrases),
        "codes": list(query.codes),
        "negated": list(query.negated),
        "required": terms.required,
    }
    if terms.preferred:
        details["preferred"] = terms.preferred
        details["missing_code_weight"] = options.missing_code_weight
    if not terms.lexemes:
        details["reason"] = "the question has no searchable words (only stopwords)"
        return KeywordResult(hits=[], details=details)

    stats = search_index.TermStats.from_stored(collection.keyword_stats)
    ranking, n_docs, warnings = _ranking_given_stats(ranking, stats)
    scoring = ranking.scoring(options, stats.avg_lexemes)
    found = search_index.keyword_search(
        collection_id=int(collection.pk),
        lexemes=terms.lexemes,
        required=terms.required,
        n_docs=n_docs,
        scoring=scoring,
        pool_size=options.keyword_pool,
        k=k,
        df=terms.df,
        preferred=terms.preferred,
        preferred_miss=options.missing_code_weight,
    )
    details.update(
        {
            "match_terms": len(found.pool.match_terms),
            "pruned_common_terms": found.pool.pruned[:20],
            "chunks": n_docs,
            "avg_lexemes": round(stats.avg_lexemes, 2),
            **scoring.parameters,
        }
    )
    if found.pool.rarest_df > options.keyword_pool:
        warnings.append(
            f"every term of the question is common (rarest in {found.pool.rarest_df} chunks); "
            f"only the first {options.keyword_pool} matching chunks were scored"
        )
    details["pooled"] = found.pooled
    hits = [
        KeywordHit(chunk_id=m.chunk_id, score=m.score, coverage=m.coverage, exact=m.preferred)
        for m in found.matches
    ]
    return KeywordResult(hits=hits, details=details, warnings=warnings)


def _ranking_given_stats(
    ranking: KeywordRanking, stats: search_index.TermStats
) -> tuple[KeywordRanking, int, list[str]]:
    """The ranking that can run, the chunk count for IDF, and a warning if it changed."""
    if not (ranking.needs_term_stats and stats.missing):
        return ranking, stats.chunks, []
    warning = (
        "term statistics are missing for this collection; ranked with ts_rank_cd "
        "instead of BM25 (refresh them with collection_term_stats_refresh)"
    )
    return KEYWORD_RANKINGS.get(_WITHOUT_TERM_STATS), max(stats.chunks, 1), [warning]
