"""The search index of the chunk table, in one place.

Everything that knows how chunks are indexed and searched in Postgres: the
per-collection HNSW indexes (:mod:`.ddl`), the term statistics BM25 reads
(:mod:`.statistics`), the text-search configuration and the keyword search
over the GIN tsvector index (:mod:`.keyword`), the vector search over the
HNSW index (:mod:`.vector`), and the passages a search found, read by id
(:mod:`.passages`); :mod:`.columns` reads their jsonb and vector values.
The functions take plain values (ids, sizes, vectors, lexemes, limits), never
model instances or query options, so the answering pipeline and the
benchmarks call them the same way.
"""

from collections_app.search_index.ddl import (
    vector_distance_sql,
    vector_index_drop,
    vector_index_ensure,
    vector_index_name,
    vector_index_predicate,
)
from collections_app.search_index.keyword import (
    TEXT_SEARCH_CONFIG,
    KeywordMatch,
    KeywordPool,
    KeywordScoring,
    KeywordSearch,
    KeywordTerms,
    bm25_idf,
    bm25_scoring,
    cover_density_scoring,
    keyword_search,
    keyword_terms,
    word_document_frequencies,
)
from collections_app.search_index.passages import PassageRow, passages_read
from collections_app.search_index.statistics import (
    TermStats,
    collection_term_stats_refresh,
    term_document_frequencies,
    term_stats_refresh,
)
from collections_app.search_index.vector import (
    document_means,
    vector_literal,
    vector_search,
)

__all__ = [
    "TEXT_SEARCH_CONFIG",
    "KeywordMatch",
    "KeywordPool",
    "KeywordScoring",
    "KeywordSearch",
    "KeywordTerms",
    "PassageRow",
    "TermStats",
    "bm25_idf",
    "bm25_scoring",
    "collection_term_stats_refresh",
    "cover_density_scoring",
    "document_means",
    "keyword_search",
    "keyword_terms",
    "passages_read",
    "term_document_frequencies",
    "term_stats_refresh",
    "vector_distance_sql",
    "vector_index_drop",
    "vector_index_ensure",
    "vector_index_name",
    "vector_index_predicate",
    "vector_literal",
    "vector_search",
    "word_document_frequencies",
]
