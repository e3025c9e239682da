"""Per-collection lexeme statistics for keyword (BM25-style) scoring."""

from __future__ import annotations

from django.db import models

from collections_app.models.collection import Collection


class TermStat(models.Model):
    """Document frequency of one lexeme in one collection (for BM25-style IDF).

    Refreshed from the chunks' tsvectors after every ingestion that changed
    chunks (``collections_app.search_index.collection_term_stats_refresh``).
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="term_stats")
    lexeme = models.TextField()
    ndoc = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "lexeme"], name="uniq_term_stat")
        ]

    def __str__(self) -> str:
        return f"{self.lexeme}: {self.ndoc}"
