"""The keyword leg: Postgres full-text search with OR semantics and BM25-style ranking.

Natural-language questions need OR semantics (``websearch_to_tsquery``'s AND
finds nothing for most of them) and a score that knows how rare a term is and
how long a chunk is. Exact intent still matters: quoted phrases, codes such as
``ERR-4471`` and ``-excluded`` words from the websearch syntax must hold.

The work is bounded whatever the collection size: the GIN index matches an OR
of the question's rarest lexemes, chosen so that their summed document
frequencies stay under ``keyword_pool``; only that pool is scored (over *all*
the question's lexemes) in SQL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from collections_app.models import TEXT_SEARCH_CONFIG, Collection
from query_app.pipeline.options import RetrievalOptions

KEYWORD_RANKINGS: dict[str, str] = {
    "bm25": "Okapi BM25 over the tsvector: IDF from term statistics, length-normalised",
    "ts_rank_cd": "Postgres cover-density rank over an OR of the question's lexemes",
}

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


def _word(part: str) -> bool:
    """An ordinary word (dependent, Interleukin), as opposed to an acronym (ERR, IL)."""
    return part.isalpha() and len(part) >= 4 and (part.islower() or part[1:].islower())


def code_parts(token: str) -> list[str]:
    """The exact identifiers in ``token`` that keyword hits must contain.

    ``ERR-4471``, ``v2.3.1``, ``sha256``, ``0x1F``, ``IL-10`` are codes;
    ``Rad53-dependent`` requires ``Rad53``; ``2019``, ``400mg``,
    ``0-dimensional`` and URLs require nothing.
    """
    if "://" in token or _UNIT_RE.match(token):
        return []
    if _VERSION_RE.match(token):
        return [token]
    parts = [p for p in re.split(r"[-/]", token) if p]
    if len(parts) <= 1:
        return [token] if _mixed(token) else []
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
        parts = [f'"{p}"' for p in self.phrases]
        parts += list(self.codes)
        parts += [f"-{n}" for n in self.negated]
        return " ".join(parts)


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


@dataclass
class KeywordResult:
    hits: list[KeywordHit]
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _tsquery_literal(lexemes: list[str]) -> str:
    quoted = ["'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes]
    return " | ".join(quoted)


def _idf(n_docs: int, df: int) -> float:
    # The always-positive BM25 IDF (as in Lucene): rare terms weigh most.
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def keyword_search(
    *, collection: Collection, text: str, k: int, options: RetrievalOptions
) -> KeywordResult:
    """The ``k`` best chunks of ``collection`` for ``text`` by the configured ranking."""
    query = keyword_query_parse(text, require_codes=options.require_codes)
    cid = int(collection.pk)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT ARRAY(SELECT DISTINCT unnest(tsvector_to_array(to_tsvector(%s::regconfig, %s)))),"
            " websearch_to_tsquery(%s::regconfig, %s)::text,"
            " numnode(websearch_to_tsquery(%s::regconfig, %s))",
            [TEXT_SEARCH_CONFIG, query.text] + [TEXT_SEARCH_CONFIG, query.must_text] * 2,
        )
        lexemes, must_tsquery, must_nodes = cur.fetchone()
        details: dict[str, Any] = {
            "ranking": options.keyword_ranking,
            "lexemes": len(lexemes),
            "phrases": list(query.phrases),
            "codes": list(query.codes),
            "negated": list(query.negated),
            "required": must_tsquery if must_nodes else "",
        }
        if not lexemes:
            details["reason"] = "the question has no searchable words (only stopwords)"
            return KeywordResult(hits=[], details=details)
        cur.execute(
            "SELECT lexeme, ndoc FROM collections_app_termstat "
            "WHERE collection_id = %s AND lexeme = ANY(%s)",
            [cid, list(lexemes)],
        )
        df: dict[str, int] = dict(cur.fetchall())

    stats: Mapping[str, Any] = collection.keyword_stats or {}
    n_docs = int(stats.get("chunks") or 0)
    avgdl = float(stats.get("avg_lexemes") or 0.0)
    warnings: list[str] = []
    ranking = options.keyword_ranking
    if ranking == "bm25" and (n_docs == 0 or avgdl <= 0):
        warnings.append(
            "term statistics are missing for this collection; ranked with ts_rank_cd "
            "instead of BM25 (refresh them with collection_term_stats_refresh)"
        )
        ranking = "ts_rank_cd"
        n_docs = max(n_docs, 1)
    # Lexemes absent from the statistics (new since the last refresh, or not in
    # the collection) count as rare; matching them costs nothing if absent.
    idf = {lex: _idf(n_docs, df.get(lex, 0)) for lex in lexemes}
    total_idf = sum(idf.values()) or 1.0

    by_rarity = sorted(lexemes, key=lambda lex: (df.get(lex, 0), lex))
    match_terms: list[str] = []
    pooled_df = 0
    for lex in by_rarity:
        if match_terms and pooled_df + df.get(lex, 0) > options.keyword_pool:
            break
        match_terms.append(lex)
        pooled_df += df.get(lex, 0)
    pruned = [lex for lex in by_rarity if lex not in match_terms]
    details.update(
        {
            "match_terms": len(match_terms),
            "pruned_common_terms": pruned[:20],
            "chunks": n_docs,
            "avg_lexemes": round(avgdl, 2),
        }
    )
    if ranking == "bm25":
        details.update({"k1": options.bm25_k1, "b": options.bm25_b})
    if df.get(by_rarity[0], 0) > options.keyword_pool:
        warnings.append(
            f"every term of the question is common (rarest in {df.get(by_rarity[0], 0)} chunks); "
            f"only the first {options.keyword_pool} matching chunks were scored"
        )

    must_sql = " AND c.search_vector @@ %s::tsquery" if must_nodes else ""
    if ranking == "bm25":
        tf = "coalesce(array_length(t.positions, 1), 1)"
        score_expr = (
            f"sum(q.idf * ({tf} * (%s::float8 + 1.0)) / "
            f"({tf} + %s::float8 * (1.0 - %s::float8 + %s::float8 * p.dl / %s::float8)))"
        )
        score_params: list[Any] = [
            options.bm25_k1,
            options.bm25_k1,
            options.bm25_b,
            options.bm25_b,
            avgdl or 1.0,
        ]
        rank_select = ""
    else:
        score_expr = "max(p.rcd)"
        score_params = []
        rank_select = ", ts_rank_cd(c.search_vector, %s::tsquery) AS rcd"
    # setweight marks the question's lexemes, ts_filter keeps only them: the
    # unnest then walks a handful of entries instead of the whole chunk.
    sql = (
        "WITH q(lexeme, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])), "
        "pool AS ("
        f" SELECT c.id, c.search_vector, length(c.search_vector) AS dl{rank_select}"
        " FROM collections_app_chunk c"
        f" WHERE c.collection_id = {cid} AND c.search_vector @@ %s::tsquery{must_sql}"
        " LIMIT %s), "
        "scored AS ("
        f" SELECT p.id, {score_expr} AS score, sum(q.idf) AS matched_idf"
        " FROM pool p"
        " CROSS JOIN LATERAL unnest(ts_filter(setweight(p.search_vector, 'A', %s::text[]), '{a}'))"
        " AS t(lexeme, positions, weights)"
        " JOIN q ON q.lexeme = t.lexeme"
        " GROUP BY p.id) "
        "SELECT id, score, matched_idf, count(*) OVER () FROM scored "
        "ORDER BY score DESC, id LIMIT %s"
    )
    params: list[Any] = [list(idf), [idf[lex] for lex in idf]]
    if rank_select:
        params.append(_tsquery_literal(list(lexemes)))
    params.append(_tsquery_literal(match_terms))
    if must_nodes:
        params.append(must_tsquery)
    params.append(options.keyword_pool)
    params += score_params
    params.append(list(idf))
    params.append(k)
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    details["pooled"] = int(rows[0][3]) if rows else 0
    hits = [
        KeywordHit(chunk_id=row[0], score=float(row[1]), coverage=float(row[2]) / total_idf)
        for row in rows
    ]
    return KeywordResult(hits=hits, details=details, warnings=warnings)
