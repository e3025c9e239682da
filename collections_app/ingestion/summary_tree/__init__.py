"""The summary tree: section and document summaries stored as retrievable chunks.

Opt-in per collection (``Collection.summary_tree``); built by the ingestion
run's last step (:func:`summary_tree_update`), removed when turned off.
Summaries come from the chat model when one is configured (registered by
query_app) and from centroid sentences offline (:mod:`.summarizers`).
"""

from collections_app.ingestion.summary_tree.build import (
    SummaryTreeReport,
    summary_tree_remove,
    summary_tree_update,
)
from collections_app.ingestion.summary_tree.summarizers import (
    SUMMARIZERS,
    CentroidSummarizer,
    Summarizer,
    SummaryInput,
    sentences_of,
    summarizer_for,
)

__all__ = [
    "SUMMARIZERS",
    "CentroidSummarizer",
    "Summarizer",
    "SummaryInput",
    "SummaryTreeReport",
    "sentences_of",
    "summarizer_for",
    "summary_tree_remove",
    "summary_tree_update",
]
