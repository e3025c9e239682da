"""Keyword search: an OR pool from the GIN tsvector index, scored in SQL.

The work is bounded whatever the collection size: the GIN index matches an OR
of the question's rarest lexemes, chosen so that their summed document
frequencies stay under the pool size; only that pool is scored (over *all*
the question's lexemes) in SQL, by the ranking's :class:`KeywordScoring`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from collections_app.search_index.statistics import term_document_frequencies

# The text-search configuration of the keyword leg; the generated tsvector column
# and every tsquery must use the same one.
TEXT_SEARCH_CONFIG = "english"


@dataclass(frozen=True)
class KeywordTerms:
    """A question as the index sees it."""

    lexemes: list[str]  # the distinct lexemes of the text that may match
    required: str  # tsquery text every hit must match; "" when nothing is required
    # tsquery text a hit should match (it ranks ahead of hits that do not); "" for none.
    preferred: str = ""
    # With a collection: how many of its chunks hold each lexeme (as of the last
    # statistics refresh; lexemes it lacks are left out). None: not read.
    df: dict[str, int] | None = None


def keyword_terms(
    *,
    text: str,
    required_text: str,
    preferred_text: str = "",
    collection_id: int | None = None,
) -> KeywordTerms:
    """The lexemes of ``text``, and ``required_text`` and ``preferred_text``
    (websearch syntax) as tsqueries.

    With ``collection_id`` the lexemes' document frequencies come in the same
    round trip (what ``term_document_frequencies`` reads).
    """
    params: list[Any] = [TEXT_SEARCH_CONFIG, text] + [TEXT_SEARCH_CONFIG, required_text] * 2
    params += [TEXT_SEARCH_CONFIG, preferred_text] * 2
    df_sql = ", NULL"
    if collection_id is not None:
        df_sql = (
            ", (SELECT coalesce(json_object_agg(t.lexeme, t.ndoc), '{}'::json)"
            " FROM collections_app_termstat t"
            " WHERE t.collection_id = %s AND t.lexeme IN (SELECT lexeme FROM lex))"
        )
        params.append(int(collection_id))
    with connection.cursor() as cur:
        cur.execute(
            "WITH lex AS (SELECT DISTINCT unnest(tsvector_to_array("
            "to_tsvector(%s::regconfig, %s))) AS lexeme) "
            "SELECT ARRAY(SELECT lexeme FROM lex ORDER BY lexeme),"
            " websearch_to_tsquery(%s::regconfig, %s)::text,"
            " numnode(websearch_to_tsquery(%s::regconfig, %s)),"
            " websearch_to_tsquery(%s::regconfig, %s)::text,"
            f" numnode(websearch_to_tsquery(%s::regconfig, %s)){df_sql}",
            params,
        )
        row: tuple[Any, ...] = cur.fetchone() or ([], "", 0, "", 0, None)
        lexemes, required, nodes, preferred, preferred_nodes, df = row
    return KeywordTerms(
        lexemes=list(lexemes),
        required=required if nodes else "",
        preferred=preferred if preferred_nodes else "",
        df={str(k): int(v) for k, v in df.items()} if df is not None else None,
    )


def word_document_frequencies(
    *, collection_id: int, words: Sequence[str], stopword_df: int
) -> dict[str, int]:
    """How many chunks of the collection hold each of ``words`` (as written), as of the
    last refresh: 0 for a word it lacks, ``stopword_df`` for one the text-search
    configuration does not index (a stopword of its own)."""
    if not words:
        return {}
    with connection.cursor() as cur:
        cur.execute(
            "SELECT w, CASE WHEN numnode(plainto_tsquery(%s::regconfig, w)) = 0 THEN %s"
            " ELSE coalesce((SELECT max(t.ndoc) FROM collections_app_termstat t"
            " WHERE t.collection_id = %s AND t.lexeme = ANY("
            "tsvector_to_array(to_tsvector(%s::regconfig, w)))), 0) END"
            " FROM unnest(%s::text[]) AS w",
            [TEXT_SEARCH_CONFIG, int(stopword_df), int(collection_id), TEXT_SEARCH_CONFIG,
             list(words)],
        )  # fmt: skip
        return {str(w): int(n) for w, n in cur.fetchall()}


def bm25_idf(*, n_docs: int, df: int) -> float:
    """The always-positive BM25 IDF (as in Lucene): rare terms weigh most."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class KeywordScoring:
    """How a ranking scores one pooled chunk: an SQL aggregate over its matched lexemes.

    ``score_sql`` may use ``q.idf`` (the lexeme's IDF), ``t.positions`` (its
    positions in the chunk), ``p.dl`` (the chunk's length in lexemes) and, with
    ``cover_density``, ``p.rcd`` (ts_rank_cd of the chunk against all the
    question's lexemes); its ``%s`` take ``score_params``.
    """

    score_sql: str
    score_params: tuple[float, ...] = ()
    cover_density: bool = False
    parameters: Mapping[str, float] = field(default_factory=dict)  # as reported in traces


def bm25_scoring(*, k1: float, b: float, avg_lexemes: float) -> KeywordScoring:
    """Okapi BM25: saturating term frequency (``k1``), length normalisation (``b``)."""
    tf = "coalesce(array_length(t.positions, 1), 1)"
    return KeywordScoring(
        score_sql=(
            f"sum(q.idf * ({tf} * (%s::float8 + 1.0)) / "
            f"({tf} + %s::float8 * (1.0 - %s::float8 + %s::float8 * p.dl / %s::float8)))"
        ),
        score_params=(k1, k1, b, b, avg_lexemes or 1.0),
        parameters={"k1": k1, "b": b},
    )


def cover_density_scoring() -> KeywordScoring:
    """Postgres' cover-density rank (ts_rank_cd) over an OR of all the question's lexemes."""
    return KeywordScoring(score_sql="max(p.rcd)", cover_density=True)


@dataclass(frozen=True)
class KeywordPool:
    """Which lexemes the GIN index matches to fill the pool."""

    match_terms: list[str]  # the rarest lexemes, while their frequencies fit the pool
    pruned: list[str]  # the commoner ones left out of matching, rarest first
    rarest_df: int  # chunks holding the rarest lexeme


def keyword_pool_terms(
    *, lexemes: Sequence[str], df: Mapping[str, int], pool_size: int
) -> KeywordPool:
    """The rarest lexemes whose summed document frequencies stay under ``pool_size``.

    The rarest one is always kept, however common, so the pool is never empty.
    """
    by_rarity = sorted(lexemes, key=lambda lex: (df.get(lex, 0), lex))
    match_terms: list[str] = []
    pooled_df = 0
    for lex in by_rarity:
        if match_terms and pooled_df + df.get(lex, 0) > pool_size:
            break
        match_terms.append(lex)
        pooled_df += df.get(lex, 0)
    return KeywordPool(
        match_terms=match_terms,
        pruned=[lex for lex in by_rarity if lex not in match_terms],
        rarest_df=df.get(by_rarity[0], 0) if by_rarity else 0,
    )


@dataclass(frozen=True)
class KeywordMatch:
    chunk_id: str
    score: float
    coverage: float  # IDF-weighted share of the question's lexemes in the chunk
    preferred: bool = True  # it matches what the search preferred (or nothing was)


@dataclass(frozen=True)
class KeywordSearch:
    """The ``k`` best matches, and how the pool was formed."""

    matches: list[KeywordMatch]
    pool: KeywordPool
    pooled: int  # chunks scored (the pool's size)


def keyword_search(
    *,
    collection_id: int,
    lexemes: Sequence[str],
    required: str,
    n_docs: int,
    scoring: KeywordScoring,
    pool_size: int,
    k: int,
    df: Mapping[str, int] | None = None,
    preferred: str = "",
    preferred_miss: float = 1.0,
) -> KeywordSearch:
    """The ``k`` best chunks of the collection for ``lexemes``, scored by ``scoring``.

    ``required`` (a tsquery, "" for none) filters the pool; a chunk that does not
    match ``preferred`` (a tsquery, "" for none) has its score multiplied by
    ``preferred_miss`` (0-1), so it ranks behind those that do; ``n_docs`` is the
    collection's chunk count for the IDF; ``df`` the lexemes' document frequencies
    when the caller has them (``keyword_terms`` with the collection), else read here.
    """
    if not lexemes:
        return KeywordSearch(matches=[], pool=KeywordPool([], [], 0), pooled=0)
    if df is None:
        df = term_document_frequencies(collection_id=collection_id, lexemes=lexemes)
    # Lexemes absent from the statistics (new since the last refresh, or not in
    # the collection) count as rare; matching them costs nothing if absent.
    idf = {lex: bm25_idf(n_docs=n_docs, df=df.get(lex, 0)) for lex in lexemes}
    pool = keyword_pool_terms(lexemes=lexemes, df=df, pool_size=pool_size)
    sql, params = _scoring_query(
        collection_id=collection_id,
        idf=idf,
        match_terms=pool.match_terms,
        required=required,
        scoring=scoring,
        pool_size=pool_size,
        k=k,
        preferred=preferred,
        preferred_miss=preferred_miss,
    )
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    total_idf = sum(idf.values()) or 1.0
    return KeywordSearch(
        matches=[
            KeywordMatch(
                chunk_id=row[0],
                score=float(row[1]),
                coverage=float(row[2]) / total_idf,
                preferred=bool(row[4]),
            )
            for row in rows
        ],
        pool=pool,
        pooled=int(rows[0][3]) if rows else 0,
    )


def _scoring_query(
    *,
    collection_id: int,
    idf: Mapping[str, float],
    match_terms: Sequence[str],
    required: str,
    scoring: KeywordScoring,
    pool_size: int,
    k: int,
    preferred: str = "",
    preferred_miss: float = 1.0,
) -> tuple[str, list[Any]]:
    """The pool-and-score query and its parameters (in placeholder order)."""
    rank_select = (
        ", ts_rank_cd(c.search_vector, %s::tsquery) AS rcd" if scoring.cover_density else ""
    )
    # What is required (a code, a quoted phrase) may be named by the chunk's document
    # title instead of its text: page 2 of "Quillmate Q3 datasheet" is about the Q3
    # without saying so. The title is read only for chunks whose own text falls short.
    matches_sql = (
        "(c.search_vector @@ %s::tsquery OR (to_tsvector("
        f"'{TEXT_SEARCH_CONFIG}'::regconfig, (SELECT s.title FROM collections_app_source s"
        " WHERE s.id = c.source_id)) || c.search_vector) @@ %s::tsquery)"
    )
    must_sql = f" AND {matches_sql}" if required else ""
    preferred_select = f", {matches_sql} AS preferred" if preferred else ", TRUE AS preferred"
    miss_sql = (
        " * (CASE WHEN bool_or(p.preferred) THEN 1.0 ELSE %s::float8 END)" if preferred else ""
    )
    # setweight marks the question's lexemes, ts_filter keeps only them: the
    # unnest then walks a handful of entries instead of the whole chunk.
    sql = (
        "WITH q(lexeme, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])), "
        "pool AS ("
        f" SELECT c.id, c.search_vector, length(c.search_vector) AS dl{rank_select}"
        f"{preferred_select}"
        " FROM collections_app_chunk c"
        f" WHERE c.collection_id = {int(collection_id)} AND c.search_vector @@ %s::tsquery{must_sql}"
        " LIMIT %s), "
        "scored AS ("
        f" SELECT p.id, ({scoring.score_sql}){miss_sql} AS score, sum(q.idf) AS matched_idf,"
        " bool_or(p.preferred) AS preferred"
        " FROM pool p"
        " CROSS JOIN LATERAL unnest(ts_filter(setweight(p.search_vector, 'A', %s::text[]), '{a}'))"
        " AS t(lexeme, positions, weights)"
        " JOIN q ON q.lexeme = t.lexeme"
        " GROUP BY p.id) "
        "SELECT id, score, matched_idf, count(*) OVER (), preferred FROM scored "
        "ORDER BY score DESC, id LIMIT %s"
    )
    params: list[Any] = [list(idf), list(idf.values())]
    if scoring.cover_density:
        params.append(_tsquery_literal(list(idf)))
    if preferred:
        params += [preferred, preferred]
    params.append(_tsquery_literal(match_terms))
    if required:
        params += [required, required]
    params.append(pool_size)
    params += scoring.score_params
    if preferred:
        params.append(preferred_miss)
    params.append(list(idf))
    params.append(k)
    return sql, params


def _tsquery_literal(lexemes: Sequence[str]) -> str:
    """An OR of ``lexemes`` as tsquery text, each quoted as a single lexeme."""
    quoted = ["'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes]
    return " | ".join(quoted)
